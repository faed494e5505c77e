"""Fold modules deeper than `max_depth` into single boxes.

Depth counts path parts: with max_depth=1, `h` is drawn as a cluster and `h.0`, `h.1`,
... become one box each (all their ops and parameters inside, with summed FLOPs and
bytes); with max_depth=0 every top-level module is a box. Forward and gradient ops of
one module get separate boxes (one per derivative order). Inputs, outputs and
gradients stay visible and move to the box's parent.
"""
from .build import Edge, Vertex


def fold(graph, max_depth):
    graph.max_depth = max_depth
    if max_depth is None:
        return graph
    box_of = {}
    boxes = {}
    for v in list(graph.vertices.values()):
        parts = v.scope.split(".") if v.scope else []
        if len(parts) <= max_depth:
            continue
        path = ".".join(parts[:max_depth + 1])
        parent = ".".join(parts[:max_depth])
        if v.kind in ("input", "output", "grad"):
            v.scope = parent
            continue
        key = (path, v.order)
        b = boxes.get(key)
        if b is None:
            b = boxes[key] = Vertex(f"b{len(boxes)}", "box", path, parent, v.order, v.seq)
            b.members = 0
        b.members += v.kind == "op"
        b.flops += v.flops
        b.out_bytes += v.out_bytes
        b.saved_bytes = None if (b.saved_bytes is None or v.saved_bytes is None) \
            else b.saved_bytes + v.saved_bytes
        box_of[v.id] = b.id
        del graph.vertices[v.id]
    for b in boxes.values():
        t = graph.totals.get((b.name, b.order))
        if t is not None:
            # module totals were taken before collapsing (a box holding h.0 x12 costs all
            # twelve) and count an array two ops saved once
            b.members, b.flops, b.out_bytes, b.saved_bytes = t.ops, t.flops, t.out_bytes, t.saved_bytes
        graph.vertices[b.id] = b
    edges, seen = [], set()
    for e in graph.edges:
        src, dst = box_of.get(e.src, e.src), box_of.get(e.dst, e.dst)
        if src == dst and src != e.src:
            continue  # wiring inside one box
        key = (src, dst) if (src != e.src or dst != e.dst) else (src, e.out, dst, e.inp)
        if key in seen:
            continue
        seen.add(key)
        edges.append(reattached(e, src, dst))
    graph.edges = edges
    return graph


def reattached(e, src, dst):
    """Edge e with its ends moved to vertices src and dst (e itself when they are its own)."""
    if (src, dst) == (e.src, e.dst):
        return e
    return Edge(src, dst, e.out, e.inp, e.shape, e.dtype, e.saved)
