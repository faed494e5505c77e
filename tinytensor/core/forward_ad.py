"""Forward-mode AD: dual levels, and pushing tangents through one op (issue 27).

A tangent lives on the Tensor it belongs to, `t._fw = {level: tangent Tensor}`, one entry per
open dual level (`STATE.fw_levels`, outermost first; `tt.func.jvp` opens one). When some input
of an op carries a tangent on an open level, `Function.apply` records a Node (so the op's
`jvp` can read what forward saved) and calls `push_tangents` after forward.

The tangent for level L is computed by the op's `jvp(ctx, *tangents)` in tinytensor ops with
only the levels outside L open: the rule's own ops then carry the outer levels' tangents (the
derivative of the tangent, as jvp of jvp needs) and never L's or an inner one's, which is what
keeps two nested jvps apart (no perturbation confusion). The rule runs in the caller's grad
mode, so with grad on a tangent is differentiable in reverse mode too.

An op without a rule falls back to the double-vjp identity: its backward is linear in the
output gradient u, so  J t = d/du <backward(u), t>  at any u (ones), taken on the tape with
create_graph (one warning per op).

Levels are numbered from a global counter and never reused: a tensor that outlives its jvp
keeps a dead entry that no open level ever reads.
"""
import itertools
import warnings

from .grad_mode import STATE

_level_ids = itertools.count(1)
_warned = set()


def new_level():
    return next(_level_ids)


def live_levels(inputs, levels):
    """The open levels on which some input carries a tangent (outermost first), or ()."""
    live = ()
    for t in inputs:
        fw = t._fw
        if fw:
            for lv in levels:
                if lv in fw and lv not in live:
                    live += (lv,)
    if len(live) > 1:
        live = tuple(lv for lv in levels if lv in live)
    return live


def saved_tangents(node, to_save, inputs, arrays, outs, results):
    """For each saved array, the tangent dict of the Tensor it came from (None: a constant).
    The results' dicts are the very ones push_tangents fills next, so a rule reading a saved
    output (exp saves exp(x)) sees that output's tangents on the outer levels."""
    fws = []
    for a in to_save:
        fw = None
        if hasattr(a, "_fw"):       # a Tensor saved directly
            fw = a._fw
        else:
            for t, arr in zip(inputs, arrays):
                if arr is a:
                    fw = t._fw
                    break
            else:
                for r, arr in zip(results, outs):
                    if arr is a:
                        fw = r._fw
                        break
        fws.append(fw)
    node.saved_fw = fws


def push_tangents(cls, node, inputs, results, live):
    """Give each result its tangent on every level in `live` (the op has run)."""
    state = STATE
    levels = state.fw_levels
    rule = cls.jvp
    if all(r._fw is None for r in results):
        return   # integer, bool or non-differentiable outputs: no tangent to compute
    for lv in live:
        tangents = [(t._fw.get(lv) if t._fw else None) for t in inputs]
        state.fw_levels = levels[:levels.index(lv)]
        role = state.transform   # the rule's ops compute a tangent: graph export labels them so
        state.transform = role + ("tangent",)
        try:
            if rule is not None:
                out = rule(node, *tangents)
            else:
                out = _double_vjp(cls, node, tangents)
        finally:
            state.fw_levels = levels
            state.transform = role
        if out.__class__ is not tuple and out.__class__ is not list:
            out = (out,)
        if len(out) != len(results):
            raise RuntimeError(f"{cls.name}: {cls.__qualname__}.jvp returned {len(out)} tangents "
                               f"for {len(results)} outputs")
        for r, o, meta in zip(results, out, node.out_meta):
            if o is None or r._fw is None:
                continue
            r._fw[lv] = _fit(cls, o, meta)


def _fit(cls, o, meta):
    """An output tangent at its output's shape and dtype (a rule may return a broadcastable
    tangent, e.g. add's t_x alone)."""
    from .primitives import cast, expand_to
    if not hasattr(o, "_fw"):
        raise TypeError(f"{cls.name}: {cls.__qualname__}.jvp must return Tensors (or None), "
                        f"got {type(o).__name__}")
    shape, dtype = meta[0], meta[1]
    if o.shape != shape:
        try:
            o = expand_to(o, shape)
        except ValueError:
            raise RuntimeError(f"{cls.name}: {cls.__qualname__}.jvp returned a tangent of shape "
                               f"{tuple(o.shape)} for an output of shape {tuple(shape)}") from None
    if o.dtype is not dtype:
        o = cast(o, dtype)
    return o


def Function_backward():
    from .function import Function
    return Function.backward


def _double_vjp(cls, node, tangents, warn=True):
    """J t = d/du <vjp(u), t> for an op with a backward and no jvp."""
    from .engine import run_backward
    from .grad_mode import enable_grad
    from .primitives import sum_to
    from .tensor import Tensor
    if cls.backward is Function_backward():
        raise RuntimeError(f"{cls.name}: tt.func.jvp reached op '{cls.name}', which has neither a "
                           "jvp rule nor a backward: it is not differentiable in forward mode")
    if warn and cls not in _warned:
        _warned.add(cls)
        warnings.warn(f"tt.func.jvp: op '{cls.name}' has no jvp rule; its tangent is computed by "
                      "the double-vjp identity (two backward passes, slower)", stacklevel=4)
    outer_grad = STATE.grad_enabled
    us = []
    for shape, dtype, device in node.out_meta:
        if dtype.category >= 2:
            # any u serves (backward is linear in u); ones, not zeros: a backward taking
            # the log of |u| (logcumsumexp's) is singular at 0
            us.append(Tensor._make(device.xp.ones(shape, dtype=dtype.np), device, True))
        else:
            us.append(None)
    live = [u for u in us if u is not None]
    if not live:
        return None
    prev_needs = node.needs_input_grad
    node.needs_input_grad = [t is not None for t in tangents]
    try:
        with enable_grad():
            grads = cls.backward(node, *[u if u is not None else Tensor._make(
                device.xp.zeros(shape, dtype=dtype.np), device, False)
                for u, (shape, dtype, device) in zip(us, node.out_meta)])
            if grads.__class__ is not tuple and grads.__class__ is not list:
                grads = (grads,)
            s = None
            for g, t, meta in zip(grads, tangents, node.in_meta):
                if g is None or t is None:
                    continue
                if g.shape != meta[0]:
                    g = sum_to(g, meta[0])
                term = (g * t).sum()
                s = term if s is None else s + term
            if s is None or not s.requires_grad:
                return None
            one = Tensor._make(s.data.dtype.type(1) * s.device.xp.ones((), dtype=s.data.dtype),
                               s.device, False)
            outs = run_backward([s], [one], retain_graph=True, create_graph=True, inputs=live,
                                allow_unused=True)
    finally:
        node.needs_input_grad = prev_needs
    it = iter(outs)
    res = []
    for u in us:
        g = next(it) if u is not None else None
        if g is not None and not outer_grad:
            fw = g._fw
            g = Tensor._make(g.data, g._device, False)   # the caller asked for no graph
            g._fw = fw
        res.append(g)
    return tuple(res)


# --------------------------------------------------------------------------- family rules
# One rule serves a whole family of ops; an op names it as `jvp = staticmethod(linear_jvp)`.

def linear_jvp(ctx, *tangents):
    """A linear op (reshape, permute, sum, cat, getitem, ...): the tangent is the op itself
    applied to the input tangents, zeros standing in for absent ones."""
    if len(tangents) == 1:
        return ctx.fn.apply(tangents[0], **ctx.attrs)
    from .tensor import Tensor
    ts = [t if t is not None else Tensor._zeros_meta(*meta) for t, meta in zip(tangents, ctx.in_meta)]
    return ctx.fn.apply(*ts, **ctx.attrs)


def elementwise_jvp(ctx, *tangents):
    """An elementwise op: input i's Jacobian is diagonal, so backward(t_i)'s part for input i
    is J_i t_i (broadcasting as the output does). Backward is asked for input i alone."""
    if len(tangents) == 1:
        return ctx.fn.backward(ctx, tangents[0])
    prev = ctx.needs_input_grad
    total = None
    try:
        for i, t in enumerate(tangents):
            if t is None:
                continue
            ctx.needs_input_grad = [k == i for k in range(len(tangents))]
            part = ctx.fn.backward(ctx, t)[i]
            if part is not None:
                total = part if total is None else total + part
    finally:
        ctx.needs_input_grad = prev
    return total


def vjp_jvp(ctx, *tangents):
    """The double-vjp identity as an op's own rule, without the missing-rule warning: for an
    op whose backward is the robust formula (cumprod through zeros, logcumsumexp at -inf)
    and whose tangent written directly would lose that."""
    return _double_vjp(ctx.fn, ctx, tangents, warn=False)


def zero_jvp(ctx, *tangents):
    """A piecewise-constant op (floor, sign, a comparison): its tangent is zero."""
    return (None,) * len(ctx.out_meta) if len(ctx.out_meta) > 1 else None
