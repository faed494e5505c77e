"""Collapse identical repeated blocks: 12 GPT blocks drawn once, marked x12.

Candidates are module paths ending in an index (`h.0`, `h.1`, ... children of a
ModuleList or Sequential). Consecutive siblings whose contents have the same signature
(ops, attributes, shapes, parameters and internal wiring, relative to the block) form a
run; the first block of a run stays, the others go, and edges that entered or left a
removed block are re-attached to the matching vertex of the kept block. Input tensors
are not part of the signature, so a block that happens to read the model input still
matches its siblings.
"""
from .fold import reattached


def _in_block(scope, path):
    return scope == path or scope.startswith(path + ".")


def _block_paths(graph):
    """parent path -> sorted child indices, for every path `parent.<int>` in some scope."""
    blocks = {}
    for v in graph.vertices.values():
        if not v.scope:
            continue
        parts = v.scope.split(".")
        for d in range(1, len(parts) + 1):
            if parts[d - 1].isdigit():
                blocks.setdefault(".".join(parts[:d - 1]), set()).add(int(parts[d - 1]))
    return {p: sorted(ix) for p, ix in blocks.items()}


def _members(graph, path):
    return [v for v in graph.vertices.values() if v.kind != "input" and _in_block(v.scope, path)]


def _signature(graph, path, members, edges_by_dst):
    cut = len(path) + 1
    index = {v.id: k for k, v in enumerate(members)}
    items = []
    for v in members:
        rel_scope = v.scope[cut:]
        name = v.name[cut:] if v.kind in ("param", "grad") and v.name.startswith(path + ".") \
            else v.name if v.kind == "op" else v.kind
        items.append((v.kind, rel_scope, name, v.order, v.shape,
                      repr(sorted(v.attrs.items())) if v.attrs else "",
                      tuple(tuple(m[0]) for m in v.node.out_meta) if v.node is not None else None,
                      repr(v.consts) if v.consts else ""))
        for e in edges_by_dst.get(v.id, ()):
            src = index.get(e.src)
            items.append(("e", src if src is not None else "ext", e.out, e.inp, e.shape))
    return tuple(items)


def collapse_repeats(graph):
    """Collapse runs of identical sibling blocks in place; fills graph.repeats."""
    paths = _block_paths(graph)
    # shallow parents first: once h.1..h.11 are gone, their inner repeats need no look
    for parent in sorted(paths, key=lambda p: (p.count(".") + bool(p), p)):
        edges_by_dst = {}
        for e in graph.edges:
            edges_by_dst.setdefault(e.dst, []).append(e)
        prefix = parent + "." if parent else ""
        blocks = []
        for i in paths[parent]:
            path = prefix + str(i)
            members = _members(graph, path)
            if members:
                blocks.append((i, path, members, _signature(graph, path, members, edges_by_dst)))
        k = 0
        while k < len(blocks):
            end = k + 1
            while (end < len(blocks) and blocks[end][0] == blocks[end - 1][0] + 1
                   and blocks[end][3] == blocks[k][3]):
                end += 1
            if end - k > 1:
                _collapse_run(graph, blocks[k:end])
            k = end
    return graph


def _collapse_run(graph, run):
    first_idx, first_path, first_members = run[0][0], run[0][1], run[0][2]
    counterpart = {}
    in_run = {v.id for v in first_members}
    for _, _, members, _ in run[1:]:
        for v, w in zip(members, first_members):
            counterpart[v.id] = w.id
            in_run.add(v.id)
    # input vertices read only inside the run stay only if the kept block reads them
    keep_edges, seen = [], set()
    for e in graph.edges:
        src_in, dst_in = e.src in in_run, e.dst in in_run
        if src_in and dst_in:
            if e.src in counterpart or e.dst in counterpart:
                continue  # wiring inside or between blocks of the run
        src, dst = counterpart.get(e.src, e.src), counterpart.get(e.dst, e.dst)
        if e.dst in counterpart and graph.vertices[e.src].kind == "input" and not src_in:
            continue  # an input of a removed block (its mask, ...): the kept block has its own
        key = (src, e.out, dst, e.inp)
        if key in seen:
            continue
        seen.add(key)
        keep_edges.append(reattached(e, src, dst))
    graph.edges = keep_edges
    for v_id in counterpart:
        del graph.vertices[v_id]
    used = {e.src for e in keep_edges} | {e.dst for e in keep_edges}
    for v in list(graph.vertices.values()):
        if v.kind == "input" and v.id not in used:
            del graph.vertices[v.id]
    graph.repeats[first_path] = (len(run), first_idx, run[-1][0])
