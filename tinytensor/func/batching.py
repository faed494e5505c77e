"""The machinery of `tt.func.vmap`: batched tensors, vmap levels, and the dispatch that
`Function.apply` hands them to.

A `BatchedTensor` is what the function under vmap sees: a tensor of the *logical* shape
(one example), backed by a *physical* tensor `_value` that holds every example along dim
`_bdim`, at one vmap `Level`. Nesting stacks levels: the `_value` of a level-2 batched
tensor may itself be a level-1 one. Wrappers read the logical shape, dtype and device as
usual (`data` is a read-only zero-strided array of the logical shape: no values, so a
wrapper that reads values of a batched tensor reads zeros, and the Python conversions
(`item`, `bool`, `tolist`, ...) refuse).

When an op gets a batched input, `Function.apply` calls `dispatch`: the op's batching rule
(batching_rules.py) runs the op on the physical tensors of the innermost level, with that
level popped (so the physical ops are ordinary ops of the levels outside, recorded on the
tape as usual), and the result is wrapped again. An op without a rule runs once per example
and the results are stacked (`fallback`, with a warning naming the op, once).

Autograd is physical: the tape records the physical ops, so a gradient taken outside vmap
is the ordinary one. A gradient taken inside vmap (`vmap(grad(f))`) must be one per example,
also for a tensor shared by every example (`in_dims=None`): so inside vmap, a tensor that
requires grad is *lifted* into the batch the first time an op uses it (a stride-0 expand,
no copy: `lift`), and the backward hook (`backward`) differentiates with respect to that
lifted tensor, whose gradient holds one slice per example. The rules for matmul, embedding
and the norms keep a lifted weight one GEMM / one table in the forward pass.
"""

import contextlib

from ..core.function import BATCHING, Function
from ..core import engine
from ..core.grad_mode import STATE, transform_label
from ..core.tensor import Tensor

_RANDOMNESS = ("error", "different", "same")


class Level:
    """One active vmap call: its batch size and randomness, and the tensors it lifted."""
    __slots__ = ("depth", "size", "randomness", "lifted", "alive")

    def __init__(self, depth, size, randomness):
        self.depth = depth          # index in STATE.vmap
        self.size = size
        self.randomness = randomness
        self.lifted = {}            # id(tensor) -> (tensor, its batched form at this level)
        self.alive = True


def _logical(xp, shape, dtype):
    return xp.broadcast_to(xp.zeros((), dtype=dtype), shape)


class BatchedTensor(Tensor):
    """A tensor under vmap: the logical value of one example (see the module docstring)."""
    __slots__ = ("_value", "_bdim", "_level")

    @property
    def requires_grad(self):
        return self._value.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if self._value.requires_grad != flag:
            self._value.requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        self._value.requires_grad_(requires_grad)
        return self

    def detach(self):
        return wrap(self._value.detach(), self._bdim, self._level)

    def detach_(self):
        raise RuntimeError("vmap: detach_() on a batched tensor is not supported; use detach()")

    def _refuse(self, what):
        raise RuntimeError(
            f"vmap: {what} reads the value of a batched tensor of logical shape "
            f"{tuple(self.shape)} (one value per example): data-dependent Python control flow "
            "is not supported inside vmap; compute it with tensor ops (tt.where, ...) or take "
            "the value outside vmap")

    def item(self, _what="item()"):
        self._refuse(_what)

    def tolist(self):
        self._refuse(".tolist()")

    def numpy(self):
        self._refuse(".numpy()")

    def __bool__(self):
        self._refuse("bool()")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("use as an index")

    def __array__(self, dtype=None, copy=None):
        self._refuse("conversion to a NumPy array")

    def __dlpack__(self, **kw):
        self._refuse("__dlpack__")

    def backward(self, *a, **k):
        raise RuntimeError("vmap: .backward() inside vmap would add every example into one "
                           ".grad; take per-example gradients with tt.func.grad (or "
                           "tt.autograd.grad) inside vmap instead")

    def __repr__(self):
        return (f"BatchedTensor(level={self._level.depth}, bdim={self._bdim}, "
                f"logical shape={tuple(self.shape)}, value={self._value!r})")


def wrap(value, bdim, level):
    """`value` (physical, holding the batch along `bdim`) as a batched tensor of `level`."""
    t = object.__new__(BatchedTensor)
    shape = tuple(value.shape)
    t.data = _logical(value._device.xp, shape[:bdim] + shape[bdim + 1:], value.data.dtype)
    t._device = value._device
    t._value = value
    t._bdim = bdim
    t._level = level
    t._no_history()
    t._version = value._version   # the physical tensor's counter: a write to either is seen
    return t


def levels_of(t):
    """[(level, bdim)] of t, innermost level first."""
    out = []
    while t._level is not None:
        out.append((t._level, t._bdim))
        t = t._value
    return out


def bottom(t):
    """The plain tensor under every level of t."""
    while t._level is not None:
        t = t._value
    return t


class _Popped:
    """STATE.vmap without `level` and the levels inside it, for the duration of a block."""
    __slots__ = ("stack", "depth")

    def __init__(self, depth):
        self.depth = depth

    def __enter__(self):
        self.stack = STATE.vmap
        STATE.vmap = self.stack[:self.depth]

    def __exit__(self, *exc):
        STATE.vmap = self.stack
        return False


def _top_level(inputs):
    lvl = None
    for t in inputs:
        lv = t._level
        if lv is not None and (lvl is None or lv.depth > lvl.depth):
            lvl = lv
        if t._fw and STATE.fw_levels:   # a tangent batched deeper than its primal (vmap of
            for k in STATE.fw_levels:     # jacfwd): the op runs at the tangent's level first
                tan = t._fw.get(k)
                lv = tan._level if tan is not None else None
                if lv is not None and lv.alive and (lvl is None or lv.depth > lvl.depth):
                    lvl = lv
    if not lvl.alive or lvl.depth >= len(STATE.vmap) or STATE.vmap[lvl.depth] is not lvl:
        raise RuntimeError("vmap: a batched tensor was used outside the vmap call that made "
                           "it (it escaped through a global, a closure or an attribute); return "
                           "it from the function instead")
    return lvl


def lift(t, level):
    """t (not batched at `level`, requiring grad) as a batched tensor of `level`: one stride-0
    view, made once per tensor and level, so every use of t inside this vmap goes through
    it and a gradient taken inside vmap comes out per example (module docstring)."""
    hit = level.lifted.get(id(t))
    if hit is not None:
        return hit[1]
    from ..core.primitives import Expand
    from ..ops.movement import Reshape
    shape = tuple(t.shape)
    fw = t._fw
    batched_tan = fw and any(tan is not None and tan._level is level for tan in fw.values())
    if batched_tan:   # a tangent batched here (jacfwd of jacrev) cannot go through Expand
        t._fw = None
    try:
        with _Popped(level.depth):   # ops of the levels outside (which may lift t there first)
            v = Expand.apply(Reshape.apply(t, shape=(1,) + shape), shape=(level.size,) + shape)
            if batched_tan:   # so v carries them laid out as itself, batch first
                from .batching_rules import expand_batch, move
                v._fw = {k: move(tan._value, tan._bdim, 0) if tan._level is level
                         else expand_batch(tan, level.size)
                         for k, tan in fw.items() if tan is not None}
    finally:
        t._fw = fw
    b = wrap(v, 0, level)
    level.lifted[id(t)] = (t, b)
    return b


def dispatch(cls, inputs, attrs):
    """Function.apply for inputs holding a batched tensor: the op's batching rule at the
    innermost level among them."""
    from .batching_rules import RULES, fallback
    lvl = _top_level(inputs)
    grad_on = STATE.grad_enabled
    args = []
    for t in inputs:
        if t._level is lvl:
            args.append((t._value, t._bdim))
        elif grad_on and t.requires_grad:
            b = lift(t, lvl)
            args.append((b._value, 0))
        else:
            args.append((t, None))
    rule = RULES.get(cls, fallback)
    with _Popped(lvl.depth), transform_label("batched"):   # graph export labels the rule's ops
        if STATE.fw_levels:
            args = _with_tangents(inputs, args, lvl)
        out, bdim = rule(cls, args, attrs, lvl.size)
    if bdim is None:
        return out
    if out.__class__ is tuple:
        return tuple(_wrap_out(o, bdim, lvl) for o in out)
    return _wrap_out(out, bdim, lvl)


def _wrap_out(o, bdim, lvl):
    b = wrap(o, bdim, lvl)
    if o._fw:   # forward mode: the physical tangents, seen per example
        b._fw = {k: wrap(t, bdim, lvl) for k, t in o._fw.items() if t is not None}
    return b


def _with_tangents(inputs, args, lvl):
    """Forward mode under vmap (vmap of jvp): a batched input's tangents (logical, per
    example) are put on an alias of its physical tensor, laid out as it, so the physical
    op pushes them (core/forward_ad.py) and its outputs carry them batched."""
    from ._alias import alias
    from .batching_rules import expand_batch, move
    live = STATE.fw_levels
    new = []
    for t, (v, d) in zip(inputs, args):
        fw = t._fw
        if fw and d is None and any(tan is not None and tan._level is lvl for tan in fw.values()):
            # an unbatched primal whose tangent is batched here (jacfwd's basis tangents)
            # joins the batch, as plain_inside does; its tangents go on below
            t._fw = None
            try:
                v, d = expand_batch(t, lvl.size), 0
            finally:
                t._fw = fw
        if fw and d is not None:
            have = v._fw or {}
            add = {k: fw[k] for k in live if fw.get(k) is not None and k not in have}
            if add:
                v = alias(v)
                phys = dict(v._fw) if v._fw else {}
                for k, tan in add.items():
                    phys[k] = (move(tan._value, tan._bdim, d) if tan._level is lvl
                               else move(expand_batch(tan, lvl.size), 0, d))
                v._fw = phys
        new.append((v, d))
    return new


def plain_inside(cls, inputs, attrs):
    """Function.apply inside vmap for plain inputs when some requires grad (lift it, then
    dispatch) or there are no inputs (a random draw follows the randomness mode)."""
    if not inputs:
        return _random(cls, attrs) if getattr(cls, "random", False) else None
    lifted = False
    new = list(inputs)
    if STATE.grad_enabled:
        top = STATE.vmap[-1]
        for k, t in enumerate(inputs):
            if t.requires_grad:
                new[k] = lift(t, top)
                lifted = True
    if STATE.fw_levels:   # an unbatched primal whose tangent is batched joins the batch
        for k, t in enumerate(new):
            lvl = _batched_tangent_level(t)
            if lvl is not None:
                from .batching_rules import expand_batch
                fw, t._fw = t._fw, None   # its tangents go on as the batched tensor's (dispatch)
                try:
                    with _Popped(lvl.depth):
                        b = wrap(expand_batch(t, lvl.size), 0, lvl)
                finally:
                    t._fw = fw
                b._fw = fw
                new[k] = b
                lifted = True
    return cls.apply(*new, **attrs) if lifted else None


def _batched_tangent_level(t):
    if t._level is not None or not t._fw:
        return None
    best = None
    for tan in t._fw.values():
        lv = tan._level if tan is not None else None
        if lv is not None and lv.alive and (best is None or lv.depth > best.depth):
            best = lv
    return best


def refuse_random(op):
    """For draws that do not go through an op (tt.rand, tt.randn, tt.randint): as randomness=
    'error' refuses every draw inside vmap; 'different' cannot batch them."""
    for lvl in STATE.vmap:
        if lvl.randomness == "error":
            raise RuntimeError(_random_refused(op))
        if lvl.randomness == "different":
            raise RuntimeError(f"vmap: {op} inside vmap(randomness='different') is not supported "
                               "(it draws outside the op tape); use tt.normal(0, 1, size=...) or "
                               "tt.rand_like / dropout on a batched tensor, or randomness='same'")


def _random_refused(op):
    return (f"vmap: called random operation '{op}' while in randomness='error' mode; pass "
            "randomness='different' (a draw per example) or 'same' (one draw for all) to vmap, "
            "or draw outside vmap")


def _random(cls, attrs):
    lvl = STATE.vmap[-1]
    if lvl.randomness == "error":
        raise RuntimeError(_random_refused(cls.name))
    with _Popped(lvl.depth):   # the levels outside apply their own mode
        if lvl.randomness == "same":
            return cls.apply(**attrs)
        out = cls.apply(**{**attrs, "shape": (lvl.size,) + tuple(attrs["shape"])})
    return wrap(out, 0, lvl)


# ---------------------------------------------------------------- backward inside vmap
def _resolve(t):
    """The tensor the ops inside vmap used for t: its lifted form at the innermost level
    that lifted it, else t."""
    for lvl in reversed(STATE.vmap):
        hit = lvl.lifted.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
    return t


def _align(o, g):
    """(physical tensor of output o, cotangent g laid out as it), level by level."""
    from .batching_rules import expand_batch, move
    while o._level is not None:
        lvl, d = o._level, o._bdim
        with _Popped(lvl.depth):
            if g._level is lvl:
                gv = move(g._value, g._bdim, d)
            else:
                gv = move(expand_batch(g, lvl.size), 0, d)
        o, g = o._value, gv
    return o, g


def _rewrap(g, like):
    for lvl, d in reversed(levels_of(like)):
        g = wrap(g, d, lvl)
    return g


def backward(outputs, grad_outputs, retain_graph, create_graph, inputs, allow_unused, graph):
    """engine.run_backward inside vmap: run it on the physical tensors (every level popped),
    with respect to the tensors the ops used (lifted ones included), and give the gradients
    the layout of the inputs: batched, one per example."""
    if inputs is None:
        raise RuntimeError("vmap: .backward() inside vmap would add every example into one "
                           ".grad; take per-example gradients with tt.func.grad (or "
                           "tt.autograd.grad) inside vmap instead")
    top_o = max((o._level.depth for o in outputs if o._level is not None), default=-1)
    for k, g in enumerate(grad_outputs):
        if g._level is not None and g._level.depth > top_o:
            return _per_cotangent(outputs, grad_outputs, k, retain_graph, create_graph, inputs,
                                  allow_unused, graph)
    pairs = [_align(o, g) for o, g in zip(outputs, grad_outputs)]
    used = [_resolve(t) for t in inputs]
    with _Popped(0):
        grads = engine.run_backward([p[0] for p in pairs], [p[1] for p in pairs], retain_graph,
                                    create_graph, inputs=[bottom(u) for u in used],
                                    allow_unused=allow_unused, graph=graph)
    return [None if g is None else _rewrap(g, u) for g, u in zip(grads, used)]


def _per_cotangent(outputs, grad_outputs, k, retain_graph, create_graph, inputs, allow_unused,
                   graph):
    """A cotangent batched at a level its output is not (vmap over a vjp, as jacrev does):
    one backward per example of that level, stacked."""
    from .batching_rules import select, stack0
    g = grad_outputs[k]
    lvl = g._level
    outside = all(t._level is None or t._level.depth < lvl.depth
                  for t in list(inputs) + [c for c in grad_outputs if c._level is not lvl])
    per = []
    for i in range(lvl.size):
        # example i of every cotangent batched at lvl (jacrev batches all outputs' at once)
        with _Popped(lvl.depth):
            gos = [select(c._value, c._bdim, i) if c._level is lvl else c for c in grad_outputs]
        # nothing here is batched at lvl or inside it: run with those levels popped, so the
        # engine does not come back here once per example
        with _Popped(lvl.depth) if outside else contextlib.nullcontext():
            per.append(engine.run_backward(outputs, gos, True if i < lvl.size - 1 else
                                           retain_graph, create_graph, inputs, allow_unused, graph))
    out = []
    for j in range(len(inputs)):
        col = [p[j] for p in per]
        if any(c is None for c in col):
            out.append(None)
            continue
        with _Popped(lvl.depth):
            out.append(wrap(stack0(col), 0, lvl))
    return out


def _install():
    BATCHING[0] = dispatch
    BATCHING[1] = plain_inside
    engine.BATCHED_BACKWARD[0] = backward


_install()
__all__ = ["BatchedTensor", "Level", "wrap", "lift", "dispatch", "Function"]
