"""The tape and the reverse-mode engine.

Every differentiable op that runs appends one `Node` to the graph: op name, attributes,
input edges, output metadata and the module path it ran under. That one record is what
backward walks, what `record()` collects in order, and what graph export draws.

Nodes are numbered in creation order, so sorting the nodes reachable from the outputs by
decreasing number is a valid reverse topological order: backward needs no recursion and
no dependency counting, and 100k-node graphs are fine.
"""
import contextlib
import functools
import inspect
import itertools
from heapq import heappop, heappush

import numpy as np

_seq = itertools.count()
Tensor = None  # set by tensor.py once the class exists (avoids a circular import)


class _State:
    grad_enabled = True
    scope = []            # module path parts pushed by nn.Module.__call__
    scope_path = ""
    tapes = []            # active record() tapes
    anomaly = False
    order = 0             # derivative order of the backward being recorded (0: forward)


STATE = _State()


# --------------------------------------------------------------------------- grad modes
class _GradMode:
    """Base for context managers that are also decorators."""
    mode = True

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev
        return False

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            # the body of a generator runs at each next(), after a plain wrapper has returned:
            # enter the mode around every step instead
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                value = None
                while True:
                    with self.__class__():
                        try:
                            item = gen.send(value)
                        except StopIteration as stop:
                            return stop.value
                    value = yield item
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class _NoParamGradMode(_GradMode):
    """Also usable as a bare decorator, `@tt.no_grad`, like torch."""

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        return cls()(fn)


class no_grad(_NoParamGradMode):
    """Ops inside record nothing and produce tensors that do not require grad."""
    mode = False


class inference_mode(no_grad):
    """torch.inference_mode's name for no_grad (tinytensor has no faster inference path)."""


class enable_grad(_NoParamGradMode):
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode  # takes effect as a function call too, like torch

    def __enter__(self):
        pass

    def __call__(self, fn):
        STATE.grad_enabled = self.prev
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = STATE.grad_enabled
            STATE.grad_enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.grad_enabled = prev
        return wrapper


def is_grad_enabled():
    return STATE.grad_enabled


# --------------------------------------------------------------------------- module scope
@contextlib.contextmanager
def module_scope(name, absolute=False):
    """Run ops under a module path: `name` is appended to the current path, or replaces
    it with absolute=True (nn.Module passes its full path, `blocks.3.attn`)."""
    prev = STATE.scope_path
    if absolute:
        path = name
    else:
        path = f"{prev}.{name}" if prev and name else (name or prev)
    STATE.scope.append(name)
    STATE.scope_path = path
    try:
        yield
    finally:
        STATE.scope.pop()
        STATE.scope_path = prev


def current_module_path():
    return STATE.scope_path


# --------------------------------------------------------------------------- anomaly mode
class detect_anomaly(_GradMode):
    """Raise at the first op whose forward or backward produces NaN or Inf."""

    def __init__(self, enabled=True):
        self.enabled = enabled

    def __enter__(self):
        self.prev = STATE.anomaly
        STATE.anomaly = self.enabled

    def __exit__(self, *exc):
        STATE.anomaly = self.prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.enabled):
                return fn(*args, **kwargs)
        return wrapper


class AnomalyError(RuntimeError):
    pass


def plain(v):
    """v for a message: NumPy scalars, also inside tuples, lists and dicts, become the Python
    values they hold, so that errors print 3 and (2, 3) rather than np.int64(3)."""
    if isinstance(v, np.generic):
        return v.item()
    if v.__class__ in (tuple, list):
        return v.__class__(plain(e) for e in v)
    if v.__class__ is dict:
        return {plain(k): plain(e) for k, e in v.items()}
    return v


def _type_name(v):
    """`numpy.ndarray`, `float`: the type of a wrong value, as an error names it."""
    t = type(v)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def check_anomaly(node, arrays, phase):
    for i, a in enumerate(arrays):
        if a is None or a.dtype.kind != "f":
            continue
        xp = np if isinstance(a, (np.ndarray, np.generic)) else __import__("cupy")
        if not bool(xp.isfinite(a).all()):
            what = "NaN" if bool(xp.isnan(a).any()) else "Inf"
            shapes = ", ".join(str(tuple(m[0])) for m in node.in_meta)
            where = f" in {node.scope}" if node.scope else ""
            raise AnomalyError(
                f"detect_anomaly: {phase} of op '{node.name}'{where} produced {what} "
                f"in {'output' if phase == 'forward' else 'gradient for input'} {i} "
                f"(input shapes: {shapes}; attributes: {plain(node.attrs)})")


# --------------------------------------------------------------------------- the record
class Node:
    """One op application. Also the `ctx` handed to a Function's forward and backward.

    edges[i] says where the gradient for tensor input i goes: `(node, out_index)` for an
    input produced by another op, the leaf Tensor itself, or None (no grad needed).
    in_meta[i] / out_meta[j] are (shape, dtype, device) of inputs / outputs.
    """

    # defaults live on the class so that creating a node sets only what differs
    edges = ()
    in_meta = ()
    out_meta = ()
    inputs = ()           # input Tensors, kept only while a record() is active
    saved = None          # list of SavedTensor
    to_save = None        # arrays passed to save_for_backward during forward
    freed = False
    out_hooks = None      # {out_index: [hook]}
    retained = None       # {out_index: weakref(Tensor)}
    needs_input_grad = ()
    non_differentiable = None
    order = 0             # set while recording: 1 for ops a first backward ran, 2 for its backward, ...

    def __init__(self, fn, name, attrs):
        self.fn = fn
        self.name = name
        self.attrs = attrs
        self.seq = next(_seq)
        self.scope = STATE.scope_path

    # ---- the ctx API used inside Function.forward/backward
    def save_for_backward(self, *arrays):
        self.to_save = arrays

    @property
    def saved_tensors(self):
        if self.freed:
            raise RuntimeError(
                f"backward through op '{self.name}' a second time: its saved tensors were "
                "freed after the first backward. Pass retain_graph=True to the first "
                "backward (or tt.grad) if you need to backward twice.")
        return tuple([unpack_saved(self, k, e) for k, e in enumerate(self.saved)])

    @property
    def saved_arrays(self):
        """The saved values as raw arrays (version-checked): for first-order fast paths."""
        if self.freed:
            return self.saved_tensors  # raises the freed-graph error
        out = []
        for k, e in enumerate(self.saved):
            cell = e[3]
            if cell is not None and cell[0] != e[4]:
                unpack_saved(self, k, e)  # raises the in-place modification error
            out.append(e[0])
        return out

    def saved_tensor(self, k):
        """Saved value k alone: version-checks only what a backward really uses (x * 2.0
        needs only the 2.0, so modifying x in place afterwards is fine, as in torch)."""
        if self.freed:
            return self.saved_tensors  # raises the freed-graph error
        return unpack_saved(self, k, self.saved[k])

    def saved_array(self, k):
        """saved_tensor(k) as a raw array, for first-order fast paths."""
        if self.freed:
            return self.saved_tensors
        e = self.saved[k]
        cell = e[3]
        if cell is not None and cell[0] != e[4]:
            unpack_saved(self, k, e)  # raises the in-place modification error
        return e[0]

    def mark_non_differentiable(self, *arrays):
        self.non_differentiable = arrays

    def __repr__(self):
        where = f" @ {self.scope}" if self.scope else ""
        return f"<Node #{self.seq} {self.name}{where}>"


# A saved tensor is the tuple (data, edge, leaf, version_cell, version, requires_grad, device):
# `edge` is (node, out_index) for a tensor produced by an op (node None: this op's own
# output, stored that way to avoid a reference cycle), `leaf` the Tensor itself for a
# leaf, and `version` the version it had when saved.
def unpack_saved(node, k, entry):
    data, edge, leaf, cell, version, requires_grad, device = entry
    if cell is not None and cell[0] != version:
        raise RuntimeError(
            f"one of the tensors needed to compute the gradient of op '{node.name}'"
            + (f" in {node.scope}" if node.scope else "")
            + f" was modified by an in-place operation: saved tensor {k} of shape "
            f"{tuple(data.shape)} was at version {version} and is now at version {cell[0]}. "
            "Use an out-of-place op (x = x + y instead of x.add_(y)) or clone() before "
            "modifying it.")
    if leaf is not None:
        return leaf
    t = Tensor._make(data, device, requires_grad)
    if edge is not None:
        producer, t._out_index = edge
        t.grad_fn = node if producer is None else producer
    if cell is not None:
        t._version = cell
    return t


class Tape:
    """The ops recorded inside `with tt.record() as tape:`, in execution order.

    `tape.nodes[k]` is the k-th op's Node (its `inputs` are kept while recording);
    `tape.outputs[k]` are the Tensors it produced, and `tape.producer(t)` says which op
    and output produced tensor `t` (None for tensors made outside the tape).
    """

    def __init__(self):
        self.nodes = []
        self.outputs = []
        self._producer = {}  # id(tensor) -> (op index, output index); outputs keep ids valid

    def add(self, node, results):
        order = STATE.order  # an op on gradients is part of that derivative order too
        for t in node.inputs:
            f = t.grad_fn
            if f is not None and f.order > order:
                order = f.order
        if order:
            node.order = order
        k = len(self.nodes)
        self.nodes.append(node)
        self.outputs.append(results)
        for j, r in enumerate(results):
            self._producer[id(r)] = (k, j)

    def producer(self, t):
        return self._producer.get(id(t))

    def __iter__(self):
        return iter(self.nodes)

    def __len__(self):
        return len(self.nodes)

    def __getitem__(self, i):
        return self.nodes[i]

    def _ref(self, t):
        p = self.producer(t)
        if p is not None:
            k, j = p
            return f"%{k}" + (f".{j}" if len(self.outputs[k]) > 1 else "")
        if t.name:
            return t.name
        if t.requires_grad:
            return "param"
        if t.ndim == 0:
            return repr(t.item())  # a constant such as the 2.0 in x * 2.0
        return "input"

    def __repr__(self):
        lines = [f"Tape with {len(self.nodes)} ops:"]
        for k, node in enumerate(self.nodes):
            args = ", ".join(self._ref(t) + ("" if t.ndim == 0 and self.producer(t) is None and
                                             not t.requires_grad and not t.name
                                             else str(list(t.shape)))
                             for t in node.inputs)
            attrs = "".join(f", {a}={_short(v)}" for a, v in node.attrs.items())
            outs = ", ".join(f"{list(m[0])} {m[1].name}" for m in node.out_meta)
            where = f"   @ {node.scope}" if node.scope else ""
            lines.append(f"  %{k} = {node.name}({args}{attrs}) -> {outs}{where}")
        return "\n".join(lines)

    __str__ = __repr__


def _short(v, limit=40):
    r = repr(plain(v))
    return r if len(r) <= limit else r[:limit - 3] + "..."


@contextlib.contextmanager
def record():
    """Record every op run inside (also those needing no grad) onto a Tape."""
    tape = Tape()
    STATE.tapes.append(tape)
    try:
        yield tape
    finally:
        STATE.tapes.remove(tape)


# --------------------------------------------------------------------------- the engine
def _accumulate(store, key, g):
    prev = store.get(key)
    store[key] = g if prev is None else add_grads(prev, g)


def add_grads(a, b):
    """a + b for two gradients of one shape; straight on the arrays unless recording."""
    if STATE.grad_enabled or a.requires_grad or b.requires_grad:
        return a + b
    return Tensor._make(a.data + b.data, a._device, False)


def run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs=None, allow_unused=False):
    """Propagate `grad_outputs` from `outputs` back through the graph.

    With `inputs=None` gradients accumulate into the `.grad` of every leaf reached
    (Tensor.backward); otherwise they are returned for `inputs` only (tt.grad).
    """
    from .ops.movement import sum_to

    # Nodes are processed in decreasing creation order, taken from a heap holding
    # exactly the nodes that have received a gradient: every consumer of a node was
    # created after it, so its gradient is complete when it comes off the heap.
    node_grads = {}   # node -> [grad per output]
    heap = []
    leaf_grads = {}   # id(leaf) -> grad
    leaves = {}
    for out, g in zip(outputs, grad_outputs):
        if out.grad_fn is None:
            if not out.requires_grad:
                raise RuntimeError(
                    f"backward: tensor of shape {tuple(out.shape)} does not require grad and has "
                    "no grad_fn; call requires_grad_() on the leaves you differentiate with respect to")
            leaves[id(out)] = out
            _accumulate(leaf_grads, id(out), g)
            continue
        node = out.grad_fn
        slot = node_grads.get(node)
        if slot is None:
            slot = node_grads[node] = [None] * len(node.out_meta)
            heappush(heap, (-node.seq, node))
        i = out._out_index
        slot[i] = g if slot[i] is None else slot[i] + g

    wanted = None
    if inputs is not None:
        wanted = {}
        for t in inputs:
            if t.grad_fn is not None:
                wanted[(t.grad_fn, t._out_index)] = None
        run = _nodes_leading_to(list(node_grads), {n for n, _ in wanted},
                                {id(t) for t in inputs if t.grad_fn is None})

    prev_mode = STATE.grad_enabled
    STATE.grad_enabled = create_graph
    # while recording, the ops a backward runs carry the module path of the op being
    # differentiated and a derivative order, so graph export can place and colour them
    recording = bool(STATE.tapes)
    pass_order = 0
    if recording:
        prev_scope, prev_order = STATE.scope_path, STATE.order
        pass_order = STATE.order = 1 + max([o.grad_fn.order for o in outputs if o.grad_fn is not None],
                                           default=0)
    pop_grads, get_grads = node_grads.pop, node_grads.get
    try:
        while heap:
            node = heappop(heap)[1]
            if recording:
                STATE.scope_path = node.scope
            grads = pop_grads(node)
            if node.out_hooks or node.retained:
                grads = _apply_output_hooks(node, grads)
            if wanted is not None:
                for i, g in enumerate(grads):
                    k = (node, i)
                    if k in wanted:
                        wanted[k] = g if wanted[k] is None else wanted[k] + g
                if node not in run:  # nothing wanted lies below: like torch, neither run nor free it
                    continue
            if node.freed:
                raise RuntimeError(
                    f"backward through op '{node.name}'{_in_scope(node)} a second time, but its "
                    "saved tensors were already freed. Pass retain_graph=True to the first "
                    "backward() if you need to backward twice.")
            in_grads = _call_backward(node, grads)
            if not retain_graph:
                node.saved = None
                node.freed = True
            for edge, g, meta in zip(node.edges, in_grads, node.in_meta):
                if edge is None or g is None:
                    continue
                if g.__class__ is not Tensor and not isinstance(g, Tensor):
                    _not_a_tensor(node, g, meta)
                data = g.data
                if data.shape != meta[0]:
                    _check_grad_shape(node, meta, data.shape)
                    g = sum_to(g, meta[0])  # undo broadcasting: the one shared place
                    data = g.data
                if data.dtype != meta[1].np:
                    g = g.to(meta[1])
                if edge.__class__ is tuple:
                    n, j = edge
                    slot = get_grads(n)
                    if slot is None:
                        slot = node_grads[n] = [None] * len(n.out_meta)
                        heappush(heap, (-n.seq, n))
                    prev = slot[j]
                    slot[j] = g if prev is None else add_grads(prev, g)
                else:
                    leaves[id(edge)] = edge
                    _accumulate(leaf_grads, id(edge), g)
    finally:
        STATE.grad_enabled = prev_mode
        if recording:
            STATE.scope_path, STATE.order = prev_scope, prev_order

    # arrays already visible to the caller: a gradient sharing memory with one is copied
    handed = {id(_owner(g.data)) for g in grad_outputs}
    if wanted is not None:
        result = []
        for t in inputs:
            g = wanted.get((t.grad_fn, t._out_index)) if t.grad_fn is not None \
                else leaf_grads.get(id(t))
            if g is not None and t.grad_fn is None and t._hooks:
                g = _run_hooks(t._hooks, g, t)
            if g is None and not allow_unused:
                raise RuntimeError(
                    f"grad: one of the inputs (shape {tuple(t.shape)}) was not used to compute "
                    "the outputs; pass allow_unused=True to get None for it")
            if g is not None and not create_graph:
                g = _owned(g, handed)
            result.append(g)
        return tuple(result)

    with _GradModeSet(create_graph), _OrderSet(recording, pass_order):
        for key, leaf in leaves.items():
            g = leaf_grads[key]
            if leaf._hooks:
                g = _run_hooks(leaf._hooks, g, leaf)
            if leaf.grad is None:
                leaf.grad = g if create_graph else _owned(g, handed)  # _owned detaches
            else:
                leaf.grad = leaf.grad + g
                if not create_graph:
                    leaf.grad = leaf.grad.detach()
    return None


def _in_scope(node):
    return f" in {node.scope}" if node.scope else ""


def _position(node, meta):
    """Which input `meta` describes; found only for an error, to keep the engine loop lean."""
    return next(k for k, m in enumerate(node.in_meta) if m is meta)


def _check_grad_shape(node, meta, got):
    """A gradient may be broadcast over its input (summed back below), nothing else."""
    shape = meta[0]
    lead = len(got) - len(shape)
    if lead < 0 or any(s != 1 and s != t for s, t in zip(shape, got[lead:])):
        raise RuntimeError(
            f"backward of op '{node.name}'{_in_scope(node)} returned a gradient of shape "
            f"{tuple(got)} for an input of shape {tuple(shape)} at position {_position(node, meta)}; "
            f"{node.fn.__qualname__}.backward must return the input's shape there (or one the "
            "input broadcasts to)")


def _owner(a):
    return a if a.base is None else a.base


def _owned(g, handed):
    """g detached, with an array of its own: backward may hand one array to two inputs
    (x and y in x + y), a read-only broadcast view (x in x.sum()) or the caller's own
    output gradient, and an in-place update of one .grad must not change the others."""
    d = g.data
    b = d.base
    key = id(d if b is None else b)
    if key in handed or (b is not None and not getattr(d.flags, "writeable", True)):
        d = d.copy()
        key = id(d)
    handed.add(key)
    return Tensor._make(d, g._device, False)


def _nodes_leading_to(starts, wanted_nodes, wanted_leaves):
    """The nodes reachable from `starts` whose backward leads to a wanted node or leaf."""
    reach, stack = set(starts), list(starts)
    while stack:
        for e in stack.pop().edges:
            if e.__class__ is tuple and e[0] not in reach:
                reach.add(e[0])
                stack.append(e[0])
    run = set()
    for n in sorted(reach, key=lambda n: n.seq):  # inputs of a node come before it
        for e in n.edges:
            if e is None:
                continue
            if (e[0] in run or e[0] in wanted_nodes) if e.__class__ is tuple else id(e) in wanted_leaves:
                run.add(n)
                break
    return run


class _GradModeSet:
    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class _OrderSet:
    """While recording, the .grad accumulation of a backward carries its derivative order."""

    def __init__(self, recording, order):
        self.recording, self.order = recording, order

    def __enter__(self):
        if self.recording:
            self.prev, STATE.order = STATE.order, self.order

    def __exit__(self, *exc):
        if self.recording:
            STATE.order = self.prev


def _run_hooks(hooks, g, owner):
    """Each hook sees the gradient so far; one it returns must be a drop-in replacement
    (torch's rules), else the error would surface later, blamed on an op, or not at all."""
    for hook in hooks:
        r = hook(g)
        if r is not None:
            if not isinstance(r, Tensor):
                raise TypeError(
                    f"{_hook_and_owner(hook, owner)} returned {_type_name(r)}; a hook must return "
                    f"None or a Tensor of the gradient's shape {tuple(g.shape)}, dtype "
                    f"{g.dtype.name} and device {g.device}")
            if r.shape != g.shape:
                got, keep = f"of shape {tuple(r.shape)}", f"shape {tuple(g.shape)}"
            elif r.dtype is not g.dtype:
                got, keep = f"of dtype {r.dtype.name}", f"dtype {g.dtype.name}"
            elif r._device is not g._device:
                got, keep = f"on device {r.device}", f"device {g.device}"
            else:
                g = r
                continue
            raise RuntimeError(f"{_hook_and_owner(hook, owner)} returned a gradient {got}; "
                               f"it must keep the gradient's {keep}")
    return g


def _hook_and_owner(hook, owner):
    """`hook 'scale' registered on leaf tensor 'fc.weight' (shape (3,), float32)`; `owner`
    is the leaf, or (node, output index) for a tensor an op produced."""
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    if owner.__class__ is tuple:
        node, i = owner
        shape, dtype, _ = node.out_meta[i]
        which = f"output {i} of" if len(node.out_meta) > 1 else "the output of"
        tensor = f"{which} op '{node.name}'{_in_scope(node)}"
    else:
        shape, dtype = owner.shape, owner.dtype
        tensor = f"leaf tensor '{owner.name}'" if owner.name else "a leaf tensor"
    return f"hook '{name}' registered on {tensor} (shape {tuple(shape)}, {dtype.name})"


def _apply_output_hooks(node, grads):
    grads = list(grads)
    for i, g in enumerate(grads):
        if g is None:
            continue
        if node.out_hooks and i in node.out_hooks:
            grads[i] = g = _run_hooks(node.out_hooks[i], g, (node, i))
        if node.retained and i in node.retained:
            t = node.retained[i]()
            if t is not None:
                gd = Tensor._make(g.data.copy(), g._device, False)  # its own memory, as .grad
                t.grad = gd if t.grad is None else t.grad + gd
    return grads


def _call_backward(node, grads):
    # a slot exists only once a gradient arrived, so single-output nodes never miss one
    if len(grads) > 1 and any(g is None for g in grads):  # outputs with no gradient get zeros
        grads = [g if g is not None else Tensor._zeros_meta(*m) for g, m in zip(grads, node.out_meta)]
    if STATE.anomaly:
        # the ops inside a backward are checked as that backward's result below, so a NaN
        # is reported against the op being differentiated, not against e.g. a `div` in it
        STATE.anomaly = False
        try:
            result = node.fn.backward(node, *grads)
        finally:
            STATE.anomaly = True
    else:
        result = node.fn.backward(node, *grads)
    if result.__class__ is not tuple:
        result = tuple(result) if isinstance(result, list) else (result,)
    n_in = len(node.edges)
    if len(result) != n_in:
        _bad_backward_result(node, f"{len(result)} gradient{'s' if len(result) != 1 else ''}, "
                             f"expected {n_in}", RuntimeError)
    if STATE.anomaly:
        for g, meta in zip(result, node.in_meta):  # the engine checks later; this reads .data now
            if g is not None and not isinstance(g, Tensor):
                _not_a_tensor(node, g, meta)
        check_anomaly(node, [None if g is None else g.data for g in result], "backward")
    return result


def _not_a_tensor(node, g, meta):
    _bad_backward_result(node, f"{_type_name(g)} at position {_position(node, meta)}", TypeError,
                         " (compute gradients with tinytensor ops on the incoming grads, or wrap "
                         "an array as tt.tensor(array))")


def _bad_backward_result(node, what, exc, hint=""):
    raise exc(f"backward of op '{node.name}'{_in_scope(node)} returned {what}: "
              f"{node.fn.__qualname__}.backward must return a Tensor or None for each of the "
              f"{len(node.edges)} tensor inputs of forward, in order{hint}")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Gradients of `outputs` with respect to `inputs`, returned rather than accumulated."""
    from .tensor import Tensor
    single_out = isinstance(outputs, Tensor)
    outputs = [outputs] if single_out else list(outputs)
    single_in = isinstance(inputs, Tensor)
    inputs = [inputs] if single_in else list(inputs)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError(f"grad: an input of shape {tuple(t.shape)} does not require grad")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    gos = [_default_grad(o, g, "grad") for o, g in zip(outputs, grad_outputs)]
    if retain_graph is None:
        retain_graph = create_graph
    return run_backward(outputs, gos, retain_graph, create_graph, inputs=inputs, allow_unused=allow_unused)


def _default_grad(out, g, op):
    from .tensor import Tensor
    if g is None:
        if out.numel() != 1:
            raise RuntimeError(
                f"{op}: gradient can be implicitly created only for scalar outputs, but the "
                f"output has shape {tuple(out.shape)}; pass gradient= (a tensor of that shape) "
                "or reduce the output first (e.g. out.sum())")
        return Tensor._ones_meta(out.shape, out.dtype, out.device)
    if not isinstance(g, Tensor):
        g = Tensor._make(out.device.xp.asarray(g, dtype=out.dtype.np), out.device, False)
    if g.shape != out.shape:
        raise RuntimeError(f"{op}: gradient has shape {tuple(g.shape)} but the output has shape "
                           f"{tuple(out.shape)}")
    return g
