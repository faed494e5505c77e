"""Tapes and output tensors -> a neutral graph of vertices and edges (no Graphviz here).

Op vertices are the tape's nodes, one each; tensor vertices are the graph's boundary:
leaves (parameters, inputs, constants), outputs and gradients. Intermediate tensors are
the edges between ops. Everything is read from the record the backward engine reads
(`Node.edges`, `in_meta`, `out_meta`, `saved`, `scope`, `order`), nothing else.

All walks are loops over lists, never recursion: a 12-layer GPT-2 with its backward is
tens of thousands of nodes.
"""
import warnings

from ..core.node import SAVED_DATA, Tape
from ..core.tensor import Tensor


class Vertex:
    """One box in the picture. kind: op, param, input, output, grad, or box (folded module).
    `about`: what a gradient is the gradient of, for its tooltip."""
    __slots__ = ("id", "kind", "name", "scope", "order", "seq", "node", "attrs", "consts",
                 "shape", "dtype", "device", "saved", "flops", "out_bytes", "saved_bytes",
                 "members", "about")

    def __init__(self, id, kind, name, scope="", order=0, seq=0, node=None):
        self.id, self.kind, self.name, self.scope, self.order = id, kind, name, scope, order
        self.seq, self.node = seq, node
        self.attrs, self.consts = {}, None
        self.shape = self.dtype = self.device = None
        self.saved = False          # a tensor some op saved for backward
        self.flops = self.out_bytes = self.saved_bytes = 0
        self.members = 1            # ops folded into a box
        self.about = None

    def __repr__(self):
        return f"<Vertex {self.id} {self.kind} {self.name}" + (f" @ {self.scope}>" if self.scope else ">")


class Edge:
    """A tensor flowing from output `out` of src to input `inp` of dst."""
    __slots__ = ("src", "dst", "out", "inp", "shape", "dtype", "saved")

    def __init__(self, src, dst, out, inp, shape, dtype, saved=False):
        self.src, self.dst, self.out, self.inp = src, dst, out, inp
        self.shape, self.dtype, self.saved = shape, dtype, saved

    def __repr__(self):
        return f"<Edge {self.src}:{self.out} -> {self.dst}:{self.inp} {self.shape}>"


class Graph:
    """vertices (id -> Vertex, ops in creation order), edges, and what later passes add:
    `totals` (module path -> per-order sums, from annotate) and `repeats` (collapsed
    block path -> (count, first, last index))."""

    def __init__(self):
        self.vertices = {}
        self.edges = []
        self.totals = {}
        self.repeats = {}
        self.max_depth = None

    def add(self, v):
        self.vertices[v.id] = v
        return v

    def ops(self):
        return [v for v in self.vertices.values() if v.kind == "op"]

    def orders(self):
        return sorted({v.order for v in self.vertices.values()})


class Sources:
    """The nodes to draw, gathered from tapes and/or by walking back from output tensors."""

    def __init__(self, items, names=None):
        self.tapes, self.outputs = [], []
        for it in _flatten(items):
            if isinstance(it, Tape):
                self.tapes.append(it)
            elif isinstance(it, Tensor):
                self.outputs.append(it)
            else:
                raise TypeError(f"viz.graph: expected Tensors or tapes from tt.record(), got "
                                f"{type(it).__name__}")
        if not self.tapes and not self.outputs:
            raise ValueError("viz.graph: pass the output tensors (or a tape from tt.record())")
        self.names = {id(t): n for n, t in (names or {}).items()}  # id(tensor) -> label
        self.given_names = dict(names or {})
        self.keep = list((names or {}).values())                      # keeps those ids valid
        self.producer = {}   # id(tensor) -> (node, out index), for tensors made on a tape
        self.results = {}    # node -> output tensors (tapes only)
        self.nodes = {}      # node -> None, insertion-ordered set
        for tape in self.tapes:
            self.add_tape(tape)
        if not self.tapes:
            self._walk([t.grad_fn for t in self.outputs if t.grad_fn is not None])
            for t in self.outputs:
                if t.grad_fn is None and not t.requires_grad:
                    raise ValueError(
                        f"viz.graph: an output of shape {tuple(t.shape)} has no graph behind it "
                        "(no input required grad, or it ran under no_grad); record the ops with "
                        "`with tt.record() as tape:` and pass the tape")
        self.explicit_outputs = bool(self.outputs)

    def add_tape(self, tape):
        for node, results in zip(tape.nodes, tape.outputs):
            self.nodes[node] = None
            self.results[node] = results
            for j, r in enumerate(results):
                self.producer[id(r)] = (node, j)

    def _walk(self, start):
        stack = [n for n in start if n not in self.nodes]
        seen = set(stack)
        while stack:
            node = stack.pop()
            self.nodes[node] = None
            for e in node.edges:
                if e.__class__ is tuple and e[0] not in seen:
                    seen.add(e[0])
                    stack.append(e[0])

    def sorted_nodes(self):
        return sorted(self.nodes, key=lambda n: n.seq)

    def leaves(self):
        """Leaf tensors requiring grad that the drawn ops read, in first-use order."""
        out, seen = [], set()
        for node in self.sorted_nodes():
            ins = node.inputs if len(node.inputs) == len(node.in_meta) else node.edges
            for t in ins:
                if isinstance(t, Tensor) and t.grad_fn is None and t.requires_grad and id(t) not in seen:
                    seen.add(id(t))
                    out.append(t)
        for t in self.outputs:
            if t.grad_fn is None and t.requires_grad and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
        return out

    def final_outputs(self):
        """The given output tensors, or else every tape result no drawn op consumed."""
        if self.outputs:
            return list(self.outputs)
        used = set()
        for node in self.nodes:
            for t in node.inputs:
                p = self.producer.get(id(t))
                used.add(p if p is not None else (t.grad_fn, t._out_index))
        return [r for node in self.sorted_nodes() for j, r in enumerate(self.results.get(node, ()))
                if (node, j) not in used]


def _flatten(items):
    stack = [list(items)[::-1]]
    while stack:
        top = stack[-1]
        if not top:
            stack.pop()
            continue
        it = top.pop()
        if isinstance(it, (list, tuple)):
            stack.append(list(it)[::-1])
        else:
            yield it


def _module_of(name):
    return name.rsplit(".", 1)[0] if name and "." in name else ""


def build(src, extra_outputs=None):
    """Sources -> Graph. extra_outputs: (tensor, label, module path, kind, about) drawn as
    outputs too (the gradients a backward produced; `about` goes into the tooltip)."""
    g = Graph()
    nodes = src.sorted_nodes()
    vid = {}
    for node in nodes:
        v = g.add(Vertex(f"n{node.seq}", "op", node.name, node.scope, node.order, node.seq, node))
        v.attrs = node.attrs
        vid[node] = v.id
    tensor_vid = {}   # id(tensor) or (node seq, input) -> vertex id
    alive = []        # tensors whose ids key tensor_vid
    array_key = {}    # id(array) -> (vertex id, out index): finds saved constants by identity
    named = {id(t.data): t for t in src.given_names.values()
             if isinstance(t, Tensor) and not t.requires_grad and t.grad_fn is None}

    def saved_named_input(node, i):
        """The named tensor behind input i that needs no grad, for a node recorded off a tape:
        such a node keeps no reference to it, only the array if it saved that for backward.
        Taken only when unambiguous: one named tensor saved, one grad-less input slot of its
        shape and dtype."""
        meta = node.in_meta[i]
        hits = {id(t): t for entry in node.saved or () for t in (named.get(id(entry[SAVED_DATA])),)
                if t is not None and tuple(t.shape) == tuple(meta[0]) and t.dtype == meta[1]}
        slots = [k for k, e in enumerate(node.edges) if e is None
                 and tuple(node.in_meta[k][0]) == tuple(meta[0]) and node.in_meta[k][1] == meta[1]]
        return next(iter(hits.values())) if len(hits) == 1 and len(slots) == 1 else None

    def leaf_vertex(t):
        key = id(t)
        v_id = tensor_vid.get(key)
        if v_id is not None:
            return v_id
        alive.append(t)
        name = src.names.get(key) or t.name
        if t.grad_fn is not None:
            kind, name = "input", name or "tensor from outside the tape"
        elif t.requires_grad and (name or type(t).__name__ == "Parameter"):
            kind = "param"
        else:
            kind = "input"
        v = g.add(Vertex(f"t{len(tensor_vid)}", kind, name or "input",
                         _module_of(name) if kind == "param" else ""))
        v.shape, v.dtype, v.device = tuple(t.shape), t.dtype, t.device
        tensor_vid[key] = v.id
        array_key[id(t.data)] = (v.id, 0)
        return v.id

    def source(node, i, t):
        """(vertex id, out index, shape, dtype), or a scalar constant to fold into the label."""
        if t is not None:
            p = src.producer.get(id(t))
            if p is None and t.grad_fn is not None and t.grad_fn in vid:
                p = (t.grad_fn, t._out_index)
            if p is not None and p[0] in vid:
                meta = p[0].out_meta[p[1]]
                return vid[p[0]], p[1], meta[0], meta[1]
            if not t.requires_grad and t.grad_fn is None and id(t) not in tensor_vid:
                # a backward reading a saved value gets a fresh tensor on the same array
                same = array_key.get(id(t.data)) if node is not None and node.order else None
                if same is not None:
                    return same[0], same[1], tuple(t.shape), t.dtype
                if t.ndim == 0 and not t.name and id(t) not in src.names:
                    return _scalar(t)
            return leaf_vertex(t), 0, tuple(t.shape), t.dtype
        e = node.edges[i] if i < len(node.edges) else None
        meta = node.in_meta[i]
        if e.__class__ is tuple:
            return vid[e[0]], e[1], meta[0], meta[1]
        if e is not None:
            return leaf_vertex(e), 0, meta[0], meta[1]
        t = saved_named_input(node, i) if named else None
        if t is not None:
            return leaf_vertex(t), 0, meta[0], meta[1]
        if len(meta[0]) == 0:
            return "const"
        key = (node.seq, i)  # an input that needed no grad: only its metadata is on the node
        v = g.add(Vertex(f"c{node.seq}_{i}", "input", "input"))
        v.shape, v.dtype, v.device = tuple(meta[0]), meta[1], meta[2]
        tensor_vid[key] = v.id
        return v.id, 0, meta[0], meta[1]

    for node in nodes:
        v = g.vertices[vid[node]]
        use_inputs = len(node.inputs) == len(node.in_meta)
        consts = []
        for i in range(len(node.in_meta)):
            s = source(node, i, node.inputs[i] if use_inputs else None)
            if s.__class__ is not tuple:
                consts.append((i, s))
                continue
            g.edges.append(Edge(s[0], v.id, s[1], i, tuple(s[2]), s[3]))
        if consts:
            v.consts = consts
        for j, r in enumerate(src.results.get(node, ())):
            array_key[id(r.data)] = (v.id, j)

    outs = [(t, src.names.get(id(t)), "", "output", None) for t in src.final_outputs()]
    for k, (t, label, scope, kind, about) in enumerate(outs + list(extra_outputs or ())):
        p = src.producer.get(id(t))
        if p is None and t.grad_fn is not None:
            p = (t.grad_fn, t._out_index)
        if p is not None and p[0] in vid:
            s = (vid[p[0]], p[1])
        else:
            s = (leaf_vertex(t), 0)
        order = g.vertices[s[0]].order
        if kind == "output" and order and not src.explicit_outputs:
            # what a recorded backward left behind; the tape does not say of what
            about = "gradient" + (f" {label}" if label else "") + " (left by the recorded backward)"
            kind, label = "grad", label or "gradient"
        o = g.add(Vertex(f"o{k}", kind, label or ("output" if k == 0 else f"output {k}"),
                         scope, order))
        o.about = about
        o.shape, o.dtype, o.device = tuple(t.shape), t.dtype, t.device
        g.edges.append(Edge(s[0], o.id, s[1], 0, o.shape, t.dtype))

    _mark_saved(g, nodes, vid, tensor_vid, array_key)
    if not src.tapes:
        _warn_unplaced_names(src, tensor_vid)
    return g


def _warn_unplaced_names(src, tensor_vid):
    lost = [n for n, t in src.given_names.items() if isinstance(t, Tensor) and id(t) not in tensor_vid
            and not t.requires_grad and t.grad_fn is None]
    if lost:
        warnings.warn(
            f"viz.graph: names {lost} label tensors that need no grad, and no drawn op saved them "
            "for backward: drawn from output tensors, the graph keeps no other trace of such "
            "inputs (they are drawn unnamed, if at all). Record the ops with "
            "`with tt.record() as tape:` and pass the tape to name them.", stacklevel=3)


class _ScalarConst(str):
    pass


def _scalar(t):
    v = t.data.item()
    if isinstance(v, float):
        text = f"{v:.4g}"
    else:
        text = repr(v)
    return _ScalarConst(text)


def _mark_saved(g, nodes, vid, tensor_vid, array_key):
    """A tensor some op saved for backward: its leaf vertex and every edge carrying it."""
    saved = set()
    for node in nodes:
        for entry in node.saved or ():
            data, edge, leaf = entry[SAVED_DATA], entry[1], entry[2]
            if leaf is not None and id(leaf) in tensor_vid:
                key = (tensor_vid[id(leaf)], 0)
            elif edge is not None:
                prod = node if edge[0] is None else edge[0]
                key = (vid[prod], edge[1]) if prod in vid else None
            else:
                key = array_key.get(id(data))
            if key is not None:
                saved.add(key)
    for e in g.edges:
        if (e.src, e.out) in saved:
            e.saved = True
    for v_id, j in saved:
        v = g.vertices[v_id]
        if v.kind != "op":
            v.saved = True
