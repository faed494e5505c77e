"""The tape: one `Node` per op application, and `record()` to collect them in order.

Every differentiable op that runs appends one `Node` to the graph: op name, attributes,
input edges, output metadata and the module path it ran under. That one record is what
backward walks, what `record()` collects in order, and what graph export draws.
"""
import contextlib
import itertools

from ..messages import plain
from .grad_mode import STATE
from .tensor import Tensor

_seq = itertools.count()


class Node:
    """One op application. Also the `ctx` handed to a Function's forward and backward.

    edges[i] says where the gradient for tensor input i goes: `(node, out_index)` for an
    input produced by another op, the leaf Tensor itself, or None (no grad needed).
    in_meta[i] / out_meta[j] are (shape, dtype, device) of inputs / outputs.
    """
    records = True   # as a ctx: what forward saves is kept (function.py `_Ctx` does not keep it)

    # defaults live on the class so that creating a node sets only what differs
    edges = ()
    in_meta = ()
    out_meta = ()
    inputs = ()           # input Tensors, kept only while a record() is active
    saved = None          # saved tensors: tuples laid out as SAVED_* below says
    to_save = None        # arrays passed to save_for_backward during forward
    freed = False
    out_hooks = None      # {out_index: [hook]}
    retained = None       # {out_index: weakref(Tensor)}
    needs_input_grad = ()
    non_differentiable = None
    saved_fw = None       # forward mode: the tangent dict of each saved tensor (core/forward_ad.py)
    order = 0             # set while recording: 1 for ops a first backward ran, 2 for its backward, ...
    transform = ()        # set while recording: ("tangent",) for a jvp rule's ops, ("batched",) for a
                          # vmap batching rule's (STATE.transform when the op ran; graph labels)

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
            cell = e[SAVED_CELL]
            if cell is not None and cell[0] != e[SAVED_VERSION]:
                unpack_saved(self, k, e)  # raises the in-place modification error
            out.append(e[SAVED_DATA])
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
        cell = e[SAVED_CELL]
        if cell is not None and cell[0] != e[SAVED_VERSION]:
            unpack_saved(self, k, e)  # raises the in-place modification error
        return e[SAVED_DATA]

    def mark_non_differentiable(self, *arrays):
        self.non_differentiable = arrays

    def __repr__(self):
        where = f" @ {self.scope}" if self.scope else ""
        return f"<Node #{self.seq} {self.name}{where}>"


# A saved tensor is the tuple (data, edge, leaf, version_cell, version, requires_grad, device),
# read by the positions below: `edge` is (node, out_index) for a tensor produced by an op
# (node None: this op's own output, stored that way to avoid a reference cycle), `leaf` the
# Tensor itself for a leaf, `version` the version it had when saved, and version_cell None
# for an intermediate array (a constant for backward). A plain tuple because every eager op
# builds one per saved value: a class with slots or a NamedTuple takes 3-5x as long to make
# (0.25-0.37 vs 0.08 us, timeit, 2026-12-02, 2-core AMD EPYC).
SAVED_DATA, SAVED_EDGE, SAVED_LEAF, SAVED_CELL, SAVED_VERSION, SAVED_REQUIRES_GRAD, SAVED_DEVICE = range(7)


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
    if node.saved_fw is not None:
        t._fw = node.saved_fw[k]
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
        if STATE.transform:
            node.transform = STATE.transform
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
            role = f"   [{transform_text(node.transform)}]" if node.transform else ""
            lines.append(f"  %{k} = {node.name}({args}{attrs}) -> {outs}{where}{role}")
        return "\n".join(lines)

    __str__ = __repr__


def transform_text(labels):
    """("batched", "batched", "tangent") -> "batched \u00d72, tangent": what tt.func made an
    op compute, in the order the rules that ran it were called."""
    out = []
    for word in labels:
        if out and out[-1][0] == word:
            out[-1][1] += 1
        else:
            out.append([word, 1])
    return ", ".join(w + (f" \u00d7{n}" if n > 1 else "") for w, n in out)


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
