"""Graph -> DOT statements: styles per kind and derivative order, module clusters, legend.

The statements are plain text lines, handed to `graphviz.Digraph(body=...)` when the
`graphviz` package is installed and to a small stand-in otherwise, so export never
needs more than this module.
"""
from collections import Counter

from . import labels

# kind -> node attributes; op colours come per derivative order
STYLE = {
    "input": 'shape=ellipse, style=filled, fillcolor="#d6eaf8", color="#2874a6"',
    "param": 'shape=box, style=filled, fillcolor="#fcf3cf", color="#b7950b"',
    "output": 'shape=ellipse, style=filled, fillcolor="#d5f5e3", color="#1e8449", penwidth=2, peripheries=2',
    "grad": 'shape=ellipse, style=filled, peripheries=2',
    "box": 'shape=box3d, style=filled',
}
ORDER_FILL = ["#eceff1", "#fadbd8", "#e8daef", "#d1f2eb", "#fdebd0"]
ORDER_LINE = ["#566573", "#c0392b", "#7d3c98", "#138d75", "#b9770e"]
SAVED = "#e67e22"
CLUSTER_FILL = ["#f8f9fb", "#eef2f7", "#e4eaf2", "#dae2ee"]
BIG = 1000  # vertices above which dot's layout effort is capped


def _color(order, table):
    return table[min(order, len(table) - 1)]


def q(s):
    """A DOT double-quoted string; newlines become centred line breaks."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dominant_dtype(graph):
    c = Counter(v.node.out_meta[0][1] for v in graph.vertices.values()
                if v.kind == "op" and v.node.out_meta)
    return c.most_common(1)[0][0] if c else None


def vertex_stmt(v, show_scope, annotate, default_dtype, repeats):
    label = labels.vertex_label(v, show_scope, annotate, default_dtype, repeats)
    attrs = [f"label={q(label)}", f"tooltip={q(labels.vertex_tooltip(v))}"]
    if v.kind == "op":
        attrs.append(f'fillcolor="{_color(v.order, ORDER_FILL)}", color="{_color(v.order, ORDER_LINE)}"')
    else:
        attrs.append(STYLE[v.kind])
        if v.kind in ("grad", "box"):
            attrs.append(f'fillcolor="{_color(v.order, ORDER_FILL)}", color="{_color(v.order, ORDER_LINE)}"')
        if v.saved:
            attrs.append(f'color="{SAVED}", penwidth=2.5')
    return f"{q(v.id)} [{', '.join(attrs)}]"


def _want_label(e, mode, verts, group):
    if mode == "all":
        return True
    if mode == "none":
        return False
    s, d = verts[e.src], verts[e.dst]
    if s.kind in ("input", "param"):
        return False  # their own label says the shape
    if s.kind == "box" or d.kind == "box":
        return True
    if s.kind == "op" and len(s.node.out_meta) > 1:
        return True
    return group and s.scope != d.scope  # entering or leaving a module


def edge_stmt(e, verts, mode, group, default_dtype):
    d = verts[e.dst]
    order = d.order if d.kind in ("op", "box") else verts[e.src].order
    attrs = []
    if _want_label(e, mode, verts, group):
        attrs.append(f"xlabel={q(labels.shape_text(e.shape, e.dtype, default_dtype))}")
    if e.saved:
        attrs.append(f'color="{SAVED}", penwidth=1.8')
        if order:
            attrs.append("style=dashed")
    elif order:
        attrs.append(f'color="{_color(order, ORDER_LINE)}"')
    return f"{q(e.src)} -> {q(e.dst)}" + (f" [{', '.join(attrs)}]" if attrs else "")


def dot_lines(graph, group_by_module=True, annotate=True, edge_labels="auto", legend=False,
              title=None, rankdir="TB"):
    """The body of the DOT digraph for `graph`."""
    default_dtype = dominant_dtype(graph)
    # dot's crossing minimisation and network simplex dominate on big graphs; capping
    # their iterations keeps a 2000-op backward graph at seconds instead of minutes
    limits = ", mclimit=0.2, nslimit=2, nslimit1=2" if len(graph.vertices) > BIG else ""
    lines = [
        f'graph [rankdir={rankdir}, fontname="Helvetica", fontsize=11, ranksep=0.28, '
        f'nodesep=0.18, labelloc=t, label={q(labels.graph_label(title, graph.totals, annotate))}'
        f'{limits}]',
        'node [fontname="Helvetica", fontsize=9, shape=box, style="rounded,filled", height=0.3, '
        'margin="0.08,0.03"]',
        'edge [fontname="Helvetica", fontsize=8, arrowsize=0.6, color="#566573"]',
    ]
    verts = graph.vertices
    show_scope = not group_by_module
    stmts = {v.id: vertex_stmt(v, show_scope, annotate, default_dtype, graph.repeats)
             for v in verts.values()}
    if group_by_module:
        lines += _clusters(graph, stmts, annotate)
    else:
        lines += stmts.values()
    lines += [edge_stmt(e, verts, edge_labels, group_by_module, default_dtype) for e in graph.edges]
    if legend:
        lines += legend_lines(graph)
    return ["\t" + ln + "\n" for ln in lines]


def _clusters(graph, stmts, annotate):
    """Nested `subgraph cluster_<path>` blocks, one per module path, written with a stack."""
    members, children = {}, {}
    for v in graph.vertices.values():
        members.setdefault(v.scope, []).append(v.id)
        parts = v.scope.split(".") if v.scope else []
        for d in range(len(parts), 0, -1):
            path, parent = ".".join(parts[:d]), ".".join(parts[:d - 1])
            kids = children.setdefault(parent, {})
            if path in kids:
                break
            kids[path] = None
    out = [stmts[i] for i in members.get("", ())]
    stack = [(p, 0) for p in reversed(list(children.get("", {})))]
    while stack:
        path, state = stack.pop()
        depth = path.count(".")
        pad = "\t" * (depth + 1)
        if state == 1:
            out.append(pad[:-1] + "}")
            continue
        fill = CLUSTER_FILL[min(depth, len(CLUSTER_FILL) - 1)]
        rep = path in graph.repeats
        out.append(pad[:-1] + f"subgraph {q('cluster_' + path)} {{")
        out.append(pad + f"label={q(labels.cluster_label(path, graph.totals, graph.repeats, annotate))}; "
                   f'style="rounded,filled"; fillcolor="{fill}"; '
                   f'color="{"#2e86c1" if rep else "#95a5a6"}"; penwidth={2.5 if rep else 1}; '
                   'fontsize=10; labeljust=l')
        if rep:
            out.append(pad + "peripheries=1")
        out += [pad + stmts[i] for i in members.get(path, ())]
        stack.append((path, 1))
        stack += [(p, 0) for p in reversed(list(children.get(path, {})))]
    return out


def legend_lines(graph):
    orders = [o for o in graph.orders() if o > 0]
    items = [
        ("lg_in", "input / constant", STYLE["input"]),
        ("lg_param", "parameter", STYLE["param"]),
        ("lg_op", "op (forward)", f'fillcolor="{ORDER_FILL[0]}", color="{ORDER_LINE[0]}"'),
    ]
    for o in orders:
        items.append((f"lg_op{o}", f"op ({labels.order_name(o)})",
                      f'fillcolor="{_color(o, ORDER_FILL)}", color="{_color(o, ORDER_LINE)}"'))
    if any(v.kind == "box" for v in graph.vertices.values()):
        items.append(("lg_box", "folded module", STYLE["box"] + f', fillcolor="{ORDER_FILL[0]}"'))
    items.append(("lg_out", "output", STYLE["output"]))
    if any(v.kind == "grad" for v in graph.vertices.values()):
        items.append(("lg_grad", "gradient", STYLE["grad"] + f', fillcolor="{ORDER_FILL[1]}", '
                      f'color="{ORDER_LINE[1]}"'))
    out = ['subgraph "cluster_legend" {', 'label="legend"; style="rounded"; color="#bbbbbb"; fontsize=10',
           "{ rank=same"]
    out += [f"\t{q(i)} [label={q(t)}, {s}]" for i, t, s in items]
    out += [f'\t"lg_saved" [label="orange edge or border:\\nsaved for backward", shape=plaintext, '
            f'style="", fontcolor="{SAVED}"]', "}"]
    chain = [i for i, _, _ in items] + ["lg_saved"]
    out += [f'\t{q(a)} -> {q(b)} [style=invis]' for a, b in zip(chain, chain[1:])]
    out.append("}")
    return out
