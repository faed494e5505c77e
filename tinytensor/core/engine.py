"""The reverse-mode engine: backward, grad, hooks.

Nodes are numbered in creation order, so sorting the nodes reachable from the outputs by
decreasing number is a valid reverse topological order: backward needs no recursion and
no dependency counting, and 100k-node graphs are fine.
"""
import operator
from heapq import heappop, heappush

import numpy as np

from ..messages import type_name
from .grad_mode import STATE, check_anomaly, set_grad_enabled
from .primitives import cast, sum_to, sum_to_array
from .tensor import Tensor

_ndarray = np.ndarray
BATCHED_BACKWARD = [None]   # filled in by func/batching.py


def run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs=None, allow_unused=False,
                 graph=None):
    """Propagate `grad_outputs` from `outputs` back through the graph.

    With `inputs=None` gradients accumulate into the `.grad` of every leaf reached
    (Tensor.backward); otherwise they are returned for `inputs` only (tt.grad).
    `graph` (default: create_graph) says whether the gradient ops, which create_graph runs
    as Tensor ops, build a graph of their own: tt.compile's capture records them as ops
    (create_graph) without one (graph=False) unless the step asked for create_graph.
    """
    if STATE.hooks.capturing and not create_graph:
        # tt.compile records gradients as ops whoever asks for them (tt.func.grad, vjp, a
        # backward inside vmap), as Tensor.backward and tt.grad do: gradients computed on raw
        # arrays would be constants of the captured program, frozen at the first call's values
        graph, create_graph = False, True
    if STATE.vmap:   # inside tt.func.vmap: on the physical (batched) tensors (func/batching.py)
        return BATCHED_BACKWARD[0](outputs, grad_outputs, retain_graph, create_graph, inputs,
                                   allow_unused, graph)
    if graph is None:
        graph = create_graph
    # Nodes are processed in decreasing creation order, taken from a heap holding
    # exactly the nodes that have received a gradient: every consumer of a node was
    # created after it, so its gradient is complete when it comes off the heap.
    # Without create_graph the gradients travel as raw arrays (`fast`): no Tensor is made
    # between two ops, only where a hook, a Tensor-level backward or the caller sees one.
    # Inside an open jvp level the backward runs as Tensor ops too, so that the gradient
    # carries its tangents (forward-over-reverse); create_graph still decides the graph.
    fast = not create_graph and not STATE.fw_levels
    add = _add_arrays if fast else operator.add
    node_grads = {}   # node -> [grad per output]
    heap = []
    leaf_grads = {}   # id(leaf) -> grad
    leaves = {}
    for out, g in zip(outputs, grad_outputs):
        if fast:
            g = g.data
        if out.grad_fn is None:
            if not out.requires_grad:
                raise RuntimeError(
                    f"backward: tensor of shape {tuple(out.shape)} does not require grad and has "
                    "no grad_fn; call requires_grad_() on the leaves you differentiate with respect to")
            leaves[id(out)] = out
            prev = leaf_grads.get(id(out))
            leaf_grads[id(out)] = g if prev is None else add(prev, g)
            continue
        node = out.grad_fn
        slot = node_grads.get(node)
        if slot is None:
            slot = node_grads[node] = [None] * len(node.out_meta)
            heappush(heap, (-node.seq, node))
        i = out._out_index
        slot[i] = g if slot[i] is None else add(slot[i], g)

    wanted = None
    if inputs is not None:
        wanted = {}
        for t in inputs:
            if t.grad_fn is not None:
                wanted[(t.grad_fn, t._out_index)] = None
        run = _nodes_leading_to(list(node_grads), {n for n, _ in wanted},
                                {id(t) for t in inputs if t.grad_fn is None})

    prev_mode = STATE.grad_enabled
    STATE.grad_enabled = graph
    # while recording, the ops a backward runs carry the module path of the op being
    # differentiated and a derivative order, so graph export can place and colour them
    recording = bool(STATE.tapes)
    pass_order = 0
    if recording:
        prev_scope, prev_order = STATE.scope_path, STATE.order
        pass_order = STATE.order = 1 + max([o.grad_fn.order for o in outputs if o.grad_fn is not None],
                                           default=0)
    pop_grads, get_grads = node_grads.pop, node_grads.get
    get_leaf = leaf_grads.get
    try:
        while heap:
            node = heappop(heap)[1]
            if recording:
                STATE.scope_path = node.scope
            grads = pop_grads(node)
            if node.out_hooks or node.retained:
                grads = _apply_output_hooks(node, grads, fast)
            if wanted is not None:
                for i, g in enumerate(grads):
                    k = (node, i)
                    if k in wanted:
                        wanted[k] = g if wanted[k] is None else add(wanted[k], g)
                if node not in run:  # nothing wanted lies below: like torch, neither run nor free it
                    continue
            if node.freed:
                raise RuntimeError(
                    f"backward through op '{node.name}'{_in_scope(node)} a second time, but its "
                    "saved tensors were already freed. Pass retain_graph=True to the first "
                    "backward() if you need to backward twice.")
            in_grads = _call_backward(node, grads, fast)
            if not retain_graph:
                node.saved = None
                node.freed = True
            for edge, g, meta in zip(node.edges, in_grads, node.in_meta):
                if edge is None or g is None:
                    continue
                if fast:
                    if g.__class__ is not _ndarray and isinstance(g, np.generic):
                        g = np.asarray(g)  # NumPy returns scalars for 0-d operands
                    if g.shape != meta[0]:
                        _check_grad_shape(node, meta, g.shape)
                        g = sum_to_array(g, meta[0])  # undo broadcasting: the one shared place
                    if g.dtype != meta[1].np:
                        # a complex gradient of a real input is its real part, as in torch
                        g = (g.real if g.dtype.kind == "c" else g).astype(meta[1].np)
                else:
                    if g.__class__ is not Tensor and not isinstance(g, Tensor):
                        _not_a_tensor(node, g, meta)
                    data = g.data
                    if g.shape != meta[0]:  # g.shape: a capture's formulas (tt.compile dynamic=True)
                        _check_grad_shape(node, meta, g.shape)
                        g = sum_to(g, meta[0])
                        data = g.data
                    if data.dtype != meta[1].np:
                        g = cast(g, meta[1])
                if edge.__class__ is tuple:
                    n, j = edge
                    slot = get_grads(n)
                    if slot is None:
                        slot = node_grads[n] = [None] * len(n.out_meta)
                        heappush(heap, (-n.seq, n))
                    prev = slot[j]
                    slot[j] = g if prev is None else add(prev, g)
                else:
                    key = id(edge)
                    leaves[key] = edge
                    prev = get_leaf(key)
                    leaf_grads[key] = g if prev is None else add(prev, g)
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
            if g is not None and fast:
                g = Tensor._make(g, t._device, False)
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

    with set_grad_enabled(graph), _OrderSet(recording, pass_order):
        for key, leaf in leaves.items():
            g = leaf_grads[key]
            if fast:
                g = Tensor._make(g, leaf._device, False)
            if leaf._hooks:
                g = _run_hooks(leaf._hooks, g, leaf)
            if leaf.grad is None:
                leaf.grad = g if create_graph else _owned(g, handed)  # _owned detaches
            else:
                leaf.grad = leaf.grad + g
                if not create_graph:
                    leaf.grad = leaf.grad.detach()
    return None


def _add_arrays(a, b):
    s = a + b
    return s if s.__class__ is _ndarray or not isinstance(s, np.generic) else np.asarray(s)


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
    t = Tensor._make(d, g._device, False)
    t._fw = g._fw   # detached from the tape, not from an open jvp level
    return t


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
                    f"{_hook_and_owner(hook, owner)} returned {type_name(r)}; a hook must return "
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


def _apply_output_hooks(node, grads, fast):
    """Hooks and retain_grad() see Tensors; with `fast` the gradients are arrays, so they
    are wrapped for the hooks and unwrapped after."""
    grads = list(grads)
    for i, g in enumerate(grads):
        if g is None:
            continue
        if fast:
            g = Tensor._make(g, node.out_meta[i][2], False)
        if node.out_hooks and i in node.out_hooks:
            g = _run_hooks(node.out_hooks[i], g, (node, i))
        if node.retained and i in node.retained:
            t = node.retained[i]()
            if t is not None:
                if not STATE.hooks.capturing:
                    gd = Tensor._make(g.data.copy(), g._device, False)  # its own memory, as .grad
                else:   # a recorded copy: a raw one would be a constant of the captured program
                    with set_grad_enabled(False):
                        gd = g.clone()
                t.grad = gd if t.grad is None else t.grad + gd
        grads[i] = g.data if fast else g
    return grads


def _call_backward(node, grads, fast):
    """The op's backward. With `fast` (no graph of the gradient is built) the gradients are
    arrays: an op's `backward_arrays` takes them as they are (no Tensors, no ops recorded),
    its `backward` gets them wrapped and its result unwrapped. Else `backward` in
    tinytensor ops, on Tensors."""
    # a slot exists only once a gradient arrived, so single-output nodes never miss one
    fn = node.fn
    if fn.complex_rule == "holomorphic" and node.out_meta[0][1].category == 3:
        return _conjugated_backward(node, grads, fast)
    return _plain_backward(node, grads, fast)


def _plain_backward(node, grads, fast):
    fn = node.fn
    if len(grads) > 1 and fn.materialize_grads and any(g is None for g in grads):
        # outputs with no gradient get zeros
        grads = [g if g is not None else _zeros(m, fast) for g, m in zip(grads, node.out_meta)]
    if fast:
        # NotImplemented: this call's arrays are not the ones the fast form serves (a CuPy
        # array, a shape it does not handle): the op's `backward` on Tensors, below
        if fn.backward_arrays is not None and (
                result := fn.backward_arrays(node, *grads)) is not NotImplemented:
            if result.__class__ is not tuple:
                result = (result,)
            if len(result) != len(node.edges):
                _bad_backward_result(node, f"{len(result)} gradient arrays, expected {len(node.edges)}",
                                     RuntimeError, method="backward_arrays")
            if STATE.anomaly:
                check_anomaly(node, result, "backward")
            return result
        make = Tensor._make
        # an absent gradient of a materialize_grads=False op stays None, not a Tensor of None
        grads = [None if g is None else make(g, m[2], False) for g, m in zip(grads, node.out_meta)]
    if STATE.anomaly:
        # the ops inside a backward are checked as that backward's result below, so a NaN
        # is reported against the op being differentiated, not against e.g. a `div` in it
        STATE.anomaly = False
        try:
            result = fn.backward(node, *grads)
        finally:
            STATE.anomaly = True
    else:
        result = fn.backward(node, *grads)
    if result.__class__ is not tuple:
        result = tuple(result) if isinstance(result, list) else (result,)
    n_in = len(node.edges)
    if len(result) != n_in:
        _bad_backward_result(node, f"{len(result)} gradient{'s' if len(result) != 1 else ''}, "
                             f"expected {n_in}", RuntimeError)
    if STATE.anomaly or fast:
        for g, meta in zip(result, node.in_meta):  # the engine checks later; this reads .data now
            if g is not None and not isinstance(g, Tensor):
                _not_a_tensor(node, g, meta)
        arrays = [None if g is None else g.data for g in result]
        if STATE.anomaly:
            check_anomaly(node, arrays, "backward")
        if fast:
            return arrays
    return result


def _conjugated_backward(node, grads, fast):
    """torch's convention for an op holomorphic in its inputs (ops/complex_rules.py): its
    backward, written for reals, computes g * f'(z); torch's gradient is g * conj(f'(z)),
    which is conj(backward(conj(g))). Recorded as conj ops, so create_graph differentiates it."""
    if fast:
        conj = lambda a: a if a is None or a.dtype.kind != "c" else a.conj()  # noqa: E731
    else:
        conj = lambda t: t if t is None or t.data.dtype.kind != "c" else t.conj_physical()  # noqa: E731
    result = _plain_backward(node, [conj(g) for g in grads], fast)
    return tuple(conj(g) for g in result)


def _zeros(meta, fast):
    shape, dtype, device = meta
    return device.xp.zeros(shape, dtype=dtype.np) if fast else Tensor._zeros_meta(shape, dtype, device)


def _not_a_tensor(node, g, meta):
    _bad_backward_result(node, f"{type_name(g)} at position {_position(node, meta)}", TypeError,
                         " (compute gradients with tinytensor ops on the incoming grads, or wrap "
                         "an array as tt.tensor(array))")


def _bad_backward_result(node, what, exc, hint="", method="backward"):
    raise exc(f"{method} of op '{node.name}'{_in_scope(node)} returned {what}: "
              f"{node.fn.__qualname__}.{method} must return a Tensor or None for each of the "
              f"{len(node.edges)} tensor inputs of forward, in order{hint}")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Gradients of `outputs` with respect to `inputs`, returned rather than accumulated."""
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
    graph = None
    if STATE.hooks.capturing:  # the compiler records gradients as ops, as create_graph does
        graph, create_graph = create_graph, True
    return run_backward(outputs, gos, retain_graph, create_graph, inputs=inputs, allow_unused=allow_unused,
                        graph=graph)


def _default_grad(out, g, op):
    if g is None:
        if out.numel() != 1:
            raise RuntimeError(
                f"{op}: gradient can be implicitly created only for scalar outputs, but the "
                f"output has shape {tuple(out.shape)}; pass gradient= (a tensor of that shape) "
                "or reduce the output first (e.g. out.sum())")
        if out.dtype.category == 3:
            raise RuntimeError(f"{op}: gradient can be implicitly created only for real scalar "
                               f"outputs, but the output is {out.dtype.name} (as in torch); take "
                               ".real, .abs() or pass gradient=")
        return Tensor._ones_meta(out.shape, out.dtype, out.device)
    if not isinstance(g, Tensor):
        g = Tensor._make(out.device.xp.asarray(g, dtype=out.dtype.np), out.device, False)
    if g.shape != out.shape:
        raise RuntimeError(f"{op}: gradient has shape {tuple(g.shape)} but the output has shape "
                           f"{tuple(out.shape)}")
    return g
