"""Graph export (tt.viz): the DOT structure matches the tape, grouping/folding/collapsing
give the expected clusters, FLOP counts follow the formulas, rendering works (or falls
back to DOT with a one-line hint)."""
import re
import shutil
import sys
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tests.limits import cpu_seconds
import tinytensor.functional as F
from tinytensor.autograd import STATE
from tinytensor.viz import GraphvizNotFoundWarning, fmt_flops, op_flops
from tinytensor.viz import output as viz_output
from tinytensor.viz.render import ORDER_FILL, SAVED
from tinytensor.tools.graph import main as graph_main
from tinytensor.tools.lib.graph_models import build_model, trace

HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz 'dot' program not installed")

_NODE = re.compile(r'^\s*"([^"]+)" \[label="((?:[^"\\]|\\.)*)"(.*)\]$')
_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)"(?: \[(.*)\])?$')
_CLUSTER = re.compile(r'^\s*subgraph "cluster_([^"]+)" \{$')


def parse(source):
    """DOT source -> (nodes {id: (label, attrs, cluster path)}, edges [(src, dst, attrs)], clusters)."""
    nodes, edges, clusters, stack = {}, [], [], []
    for line in source.splitlines():
        m = _CLUSTER.match(line)
        if m:
            stack.append(m.group(1))
            clusters.append(m.group(1))
            continue
        if line.strip() == "}" and stack:
            stack.pop()
            continue
        m = _EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
            continue
        m = _NODE.match(line)
        if m and not m.group(1).startswith("lg_"):
            nodes[m.group(1)] = (m.group(2).replace("\\n", "\n"), m.group(3), stack[-1] if stack else "")
    return nodes, edges, clusters


def mlp_tape(layers=2, loss=True):
    model, inputs = build_model("mlp", layers=layers, d_model=8, batch=4)
    with tt.record() as tape:
        out = model(inputs["x"])
        if loss:
            out = (out * out).mean()
    return model, tape, out


def gpt_tape(layers=2, loss=False, **kw):
    sizes = dict(layers=layers, d_model=16, heads=2, vocab=32, seq_len=6, batch=2)
    sizes.update(kw)
    return trace("gpt2", loss=loss, **sizes)


def _folded_scalar(tape, t):
    return (t.ndim == 0 and not t.requires_grad and t.grad_fn is None and not t.name
            and tape.producer(t) is None)


# ------------------------------------------------------------------ structure matches the tape
def test_dot_nodes_and_edges_match_the_tape():
    model, tape, out = mlp_tape()
    g = tt.viz.graph(tape, group_by_module=False)
    nodes, edges, clusters = parse(g.source)
    assert clusters == []
    ops = {i for i in nodes if i.startswith("n")}
    assert ops == {f"n{n.seq}" for n in tape.nodes}
    expected = set()
    n_edges = 1  # the output
    for node in tape.nodes:
        for t in node.inputs:
            if _folded_scalar(tape, t):
                continue
            n_edges += 1
            p = tape.producer(t)
            if p is not None:
                expected.add((f"n{tape.nodes[p[0]].seq}", f"n{node.seq}"))
    assert len(edges) == n_edges == len(g.graph.edges)
    assert expected <= {(s, d) for s, d, _ in edges}
    kinds = sorted(v.kind for v in g.graph.vertices.values() if v.kind != "op")
    # x, 3 weights, 3 biases, output
    assert kinds == ["input"] + ["output"] + ["param"] * 6


def test_labels_carry_shapes_dtypes_devices_and_module_paths():
    model, tape, out = mlp_tape()
    nodes, _, _ = parse(tt.viz.graph(tape, group_by_module=False).source)
    labels = [lab for lab, _, _ in nodes.values()]
    assert "layers.0.weight\n(32, 8) float32 \u00b7 cpu" in labels
    assert "head.bias\n(10,) float32 \u00b7 cpu" in labels
    mm = [lab for lab in labels if lab.startswith("matmul\n(4, 32)")]
    assert mm and "@ layers.0" in mm[0] and "kFLOP" in mm[0]
    assert any(lab.startswith("permute(dims=(1, 0))\n(8, 32)\n@ layers.0") for lab in labels)
    assert any(lab.startswith("mul\n(4, 10)") for lab in labels)  # (out * out), no constant
    assert any(lab.startswith("output\n() float32") for lab in labels)


def test_scalar_constants_are_folded_into_the_op_label():
    x = tt.randn(3, requires_grad=True)
    with tt.record() as tape:
        _y = tt.where(x > 0.5, x * 2.0, -1.0)
    nodes, edges, _ = parse(tt.viz.graph(tape).source)
    labels = [lab.split("\n")[0] for lab, _, _ in nodes.values()]
    assert "mul(\u00b7, 2)" in labels and "gt(\u00b7, 0.5)" in labels
    assert "where(\u00b7, \u00b7, -1)" in labels


def test_graph_from_outputs_walks_the_same_ops_as_the_tape():
    model, tape, out = mlp_tape()
    g_out = tt.viz.graph(out)
    g_tape = tt.viz.graph(tape)
    ops = lambda g: {v.id for v in g.graph.vertices.values() if v.kind == "op"}  # noqa: E731
    op_edges = lambda g: {(e.src, e.dst, e.inp) for e in g.graph.edges if e.src[0] == "n"}  # noqa: E731
    assert ops(g_out) == ops(g_tape) and len(ops(g_out)) == len(tape)
    assert op_edges(g_out) == op_edges(g_tape)


def test_tape_sinks_become_outputs_and_names_label_inputs():
    a = tt.randn(2, 3)
    w = tt.randn(3, 3, requires_grad=True)
    with tt.record() as tape:
        h = a @ w
        _s1, _s2 = h.sum(), h.amax()
    g = tt.viz.graph(tape, names={"features": a})
    outs = [v for v in g.graph.vertices.values() if v.kind == "output"]
    assert len(outs) == 2
    assert sorted(g.graph.vertices[e.src].name for e in g.graph.edges if e.dst in {o.id for o in outs}) \
        == ["amax", "sum"]
    nodes, _, _ = parse(g.source)
    assert any(lab.startswith("features\n(2, 3) float32") for lab, _, _ in nodes.values())


def test_kinds_are_visually_distinct_and_saved_tensors_marked():
    tape, out, names = gpt_tape(layers=1)
    g = tt.viz.graph(tape, out, names=names)
    nodes, edges, _ = parse(g.source)
    style = {}
    for v in g.graph.vertices.values():
        style.setdefault(v.kind, set()).add(re.search(r'fillcolor="([^"]+)"', nodes[v.id][1]).group(1))
    fills = [style[k] for k in ("op", "input", "param", "output")]
    assert all(len(f) == 1 for f in fills) and len(set().union(*fills)) == 4
    # the fused layer_norm saves its weight; attention saves its own output
    ln_w = [v for v in g.graph.vertices.values() if v.name == "h.0.ln_1.weight"][0]
    assert ln_w.saved and "saved for backward" in nodes[ln_w.id][0] and SAVED in nodes[ln_w.id][1]
    attn = [v for v in g.graph.vertices.values() if v.name == "scaled_dot_product_attention"][0]
    attn_out = [e for e in g.graph.edges if e.src == attn.id]
    assert attn_out and all(e.saved for e in attn_out)
    assert any(s == attn.id and SAVED in a for s, d, a in edges)
    after = [e.dst for e in attn_out][0]  # the transpose back: nobody saves its output
    assert not any(e.saved for e in g.graph.edges if e.src == after)
    assert not any(SAVED in a for s, d, a in edges if s == after)


def test_graph_of_a_model_on_any_device(device):
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).to(device)
    x = tt.randn(3, 4, device=device)
    with tt.record() as tape:
        _loss = (model(x) * 0.5).square().mean()
    g = tt.viz.graph(tape, backward=True)
    nodes, _, _ = parse(g.source)
    labels = [lab for lab, _, _ in nodes.values()]
    assert f"0.weight\n(8, 4) float32 \u00b7 {x.device}" in labels
    assert any(lab.startswith("mul(\u00b7, 0.5)") for lab in labels)
    mm = [v for v in g.graph.vertices.values() if v.name == "matmul" and v.order == 0]
    assert mm[0].flops == 2 * 3 * 8 * 4 and mm[0].saved_bytes == (3 * 4 + 4 * 8) * 4
    assert g.graph.orders() == [0, 1]


def test_deep_chain_needs_no_recursion():
    n = 3 * sys.getrecursionlimit()
    x = tt.randn(2, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * 1.0001
    g = tt.viz.graph(y, annotate=False)
    assert sum(v.kind == "op" for v in g.graph.vertices.values()) == n
    assert len(g.graph.edges) == n + 1


# ------------------------------------------------------------------ grouping, folding, collapsing
def test_group_by_module_draws_one_cluster_per_module_path():
    tape, out, names = gpt_tape(layers=2)
    g = tt.viz.graph(tape)
    nodes, _, clusters = parse(g.source)
    scopes = {n.scope for n in tape.nodes if n.scope}
    prefixes = {".".join(s.split(".")[:d]) for s in scopes for d in range(1, s.count(".") + 2)}
    assert set(clusters) == prefixes
    assert {"h", "h.0", "h.1.attn.c_attn", "h.1.mlp.c_fc", "wte", "wpe", "ln_f"} <= prefixes
    for n in tape.nodes:  # each op sits in the innermost cluster of its own module
        assert nodes[f"n{n.seq}"][2] == n.scope
    params = [v for v in g.graph.vertices.values() if v.kind == "param"]
    assert all(nodes[v.id][2] == v.name.rsplit(".", 1)[0] for v in params)


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_max_depth_folds_deeper_modules_into_boxes(depth):
    tape, out, names = gpt_tape(layers=2)
    g = tt.viz.graph(tape, max_depth=depth)
    nodes, edges, clusters = parse(g.source)
    assert clusters and all(c.count(".") < depth for c in clusters) if depth else clusters == []
    boxes = {v.name: v for v in g.graph.vertices.values() if v.kind == "box"}
    for path, box in boxes.items():
        assert path.count(".") == depth
        inside = [n for n in tape.nodes if n.scope == path or n.scope.startswith(path + ".")]
        assert box.members == len(inside)
        assert box.flops == sum(op_flops(n.name, n.attrs, n.in_meta, n.out_meta) for n in inside)
        assert f"{len(inside)} ops" in nodes[box.id][0]
    expected = {".".join(n.scope.split(".")[:depth + 1]) for n in tape.nodes
                if n.scope.count(".") >= depth and n.scope}
    assert set(boxes) == expected
    assert all(not (s in boxes and s == d) for s, d, _ in edges)
    if depth == 1:
        assert {"h.0", "h.1"} <= set(boxes) and "h" in clusters


def test_collapse_draws_identical_blocks_once():
    tape, out, names = gpt_tape(layers=4)
    full = tt.viz.graph(tape)
    g = tt.viz.graph(tape, collapse=True)
    nodes, edges, clusters = parse(g.source)
    assert "h.0" in clusters and not any(c.startswith(("h.1", "h.2", "h.3")) for c in clusters)
    assert g.graph.repeats == {"h.0": (4, 0, 3)}
    label = re.search(r'label="([^"]*)"', g.source[g.source.index('cluster_h.0"'):]).group(1)
    assert "\u00d74" in label and "h.3" in label
    per_block = sum(n.scope.startswith("h.1") for n in tape.nodes)
    n_ops = lambda gr: sum(v.kind == "op" for v in gr.graph.vertices.values())  # noqa: E731
    assert n_ops(g) == n_ops(full) - 3 * per_block
    # the last block's output now leaves from the kept block: h.0 -> ln_f
    verts = g.graph.vertices
    assert any(verts[e.src].scope.startswith("h.0") and verts[e.dst].scope == "ln_f" for e in g.graph.edges)
    # the graph totals still count all four blocks
    assert g.graph.totals[("h", 0)].flops == 4 * g.graph.totals[("h.0", 0)].flops
    # folded: the kept block is one box marked x4 with one block's cost; the box of the
    # whole stack costs all four
    boxes = lambda gr: {v.name: v for v in gr.graph.vertices.values() if v.kind == "box"}  # noqa: E731
    b1 = boxes(tt.viz.graph(tape, collapse=True, max_depth=1))
    assert set(b1) >= {"h.0"} and not set(b1) & {"h.1", "h.2", "h.3"}
    assert b1["h.0"].members == per_block and b1["h.0"].flops == g.graph.totals[("h.0", 0)].flops
    g0 = tt.viz.graph(tape, collapse=True, max_depth=0)
    b0 = boxes(g0)
    assert b0["h"].members == 4 * per_block and b0["h"].flops == g.graph.totals[("h", 0)].flops
    assert "contains h.0 \u00d74" in parse(g0.source)[0][b0["h"].id][0]


def test_collapse_keeps_blocks_that_differ():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4))
    with tt.record() as tape:
        model(tt.randn(2, 8))
    g = tt.viz.graph(tape, collapse=True)
    _, _, clusters = parse(g.source)
    assert sorted(clusters) == ["0", "3"] and g.graph.repeats == {"0": (3, 0, 2)}


def test_collapse_with_backward_keeps_the_gradient_flowing_into_the_kept_block():
    tape, out, names = gpt_tape(layers=3, loss=True)
    g = tt.viz.graph(tape, out, backward=True, collapse=True)
    verts = g.graph.vertices
    assert set(g.graph.repeats) == {"h.0"}
    assert not any(v.scope.startswith(("h.1", "h.2")) for v in verts.values())
    into_block = [e for e in g.graph.edges if verts[e.dst].order == 1 and verts[e.dst].scope.startswith("h.0")
                  and not verts[e.src].scope.startswith("h.0") and verts[e.src].order == 1]
    assert into_block  # ln_f's gradient enters the drawn block


# ------------------------------------------------------------------ backward graphs
def test_backward_ops_carry_module_path_and_derivative_order():
    model, inputs = build_model("mlp", layers=1, d_model=4, batch=2)
    x = inputs["x"]
    with tt.record() as tape:
        loss = model(x).sum()
        n_fwd = len(tape)
        loss.backward(create_graph=True)
        g1 = model.head.weight.grad
        n_bwd = len(tape)
        (g1 * g1).sum().backward()
    assert STATE.scope_path == "" and STATE.order == 0
    orders = [n.order for n in tape.nodes]
    assert orders[:n_fwd] == [0] * n_fwd
    assert set(orders[n_fwd:n_bwd]) == {1}
    assert set(orders[n_bwd + 2:]) == {2} and orders[n_bwd:n_bwd + 2] == [1, 1]  # g1*g1, sum
    bwd_scopes = {n.scope for n in tape.nodes[n_fwd:n_bwd]}
    assert {"layers.0", "head", "act"} <= bwd_scopes
    y = model(x).sum()  # no tape: nothing stamped
    y.backward()
    assert STATE.scope_path == "" and STATE.order == 0


@pytest.mark.parametrize("orders", [1, 2, 3])
def test_backward_adds_the_gradient_graph_one_colour_per_order(orders):
    model, tape, loss = mlp_tape(layers=1)
    g = tt.viz.graph(loss, backward=orders)
    verts = g.graph.vertices
    assert g.graph.orders() == list(range(orders + 1))
    grads = sorted(v.name for v in verts.values() if v.kind == "grad" and v.order == 1)
    assert grads == sorted(f"grad {n}" for n, _ in model.named_parameters())
    nodes, _, _ = parse(g.source)
    for k in range(orders + 1):
        fill = {re.search(r'fillcolor="([^"]+)"', nodes[v.id][1]).group(1)
                for v in verts.values() if v.kind == "op" and v.order == k}
        assert fill == {ORDER_FILL[k]}
    fwd = sum(v.kind == "op" and v.order == 0 for v in verts.values())
    assert fwd == len(tape)
    assert any(v.kind == "input" and v.name == "ones (seed)" for v in verts.values()) or orders > 1
    # backward ops reading saved forward tensors are wired to the forward ops
    assert any(verts[e.src].order == 0 and verts[e.src].kind == "op" and verts[e.dst].order == 1
               for e in g.graph.edges)


def test_create_graph_option_means_second_order():
    model, tape, loss = mlp_tape(layers=1)
    assert tt.viz.graph(tape, create_graph=True).graph.orders() == [0, 1, 2]


def test_saved_tensors_show_freed_after_backward():
    model, tape, loss = mlp_tape(layers=1)
    loss.backward()
    nodes, _, _ = parse(tt.viz.graph(tape).source)
    mm = [lab for lab, _, _ in nodes.values() if lab.startswith("matmul")]
    assert mm and all("saved: freed" in lab for lab in mm)


# ------------------------------------------------------------------ FLOPs and bytes
MATMULS = [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((2, 4, 5, 7), (2, 4, 7, 3)), ((1, 5, 7), (3, 7, 2))]


@pytest.mark.parametrize("sa,sb", MATMULS)
def test_matmul_flops_are_2mnk(sa, sb):
    a, b = tt.randn(*sa, requires_grad=True), tt.randn(*sb, requires_grad=True)
    with tt.record() as tape:
        out = a @ b
    (node,) = tape.nodes
    m, k, n = sa[-2], sa[-1], sb[-1]
    batch = int(np.prod(out.shape[:-2]))
    assert op_flops(node.name, node.attrs, node.in_meta, node.out_meta) == 2 * batch * m * n * k
    v = tt.viz.graph(tape).graph.vertices[f"n{node.seq}"]
    assert v.flops == 2 * batch * m * n * k and v.out_bytes == out.numel() * 4
    assert v.saved_bytes == a.numel() * 4 + b.numel() * 4


def test_einsum_and_elementwise_flops():
    a, b = tt.randn(3, 4, 5), tt.randn(3, 5, 6)
    with tt.record() as tape:
        c = tt.einsum("bij,bjk->bik", a, b)
        d = (c.exp() + 1.0).sum()
        tt.softmax(c, -1)
    f = {n.name: op_flops(n.name, n.attrs, n.in_meta, n.out_meta) for n in tape.nodes}
    assert f["einsum"] == 2 * 3 * 4 * 5 * 6
    assert f["exp"] == f["add"] == f["sum"] == 3 * 4 * 6 and f["softmax"] == 5 * 3 * 4 * 6
    assert d.shape == ()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("T", [4, 8])
def test_attention_flops_grow_with_t_squared(T, fused):
    B, H, E = 2, 3, 8
    q, k, v = (tt.randn(B, H, T, E, requires_grad=True) for _ in range(3))
    with tt.kernels.use_fusion(fused), tt.record() as tape, tt.module_scope("attn"):
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = tt.viz.graph(tape)
    ops = [x for x in g.graph.vertices.values() if x.kind == "op"]
    total = g.graph.totals[("attn", 0)]
    # two matmuls, then scale + causal mask + softmax on the (B, H, T, T) scores
    assert total.flops == 4 * B * H * T * T * E + (1 + 1 + 5) * B * H * T * T
    if fused:
        (op,) = ops
        assert op.name == "scaled_dot_product_attention" and op.flops == total.flops
    else:
        assert sum(x.flops for x in ops if x.name == "matmul") == 4 * B * H * T * T * E
        sm = [x for x in ops if x.name == "softmax"][0]
        assert sm.saved_bytes == B * H * T * T * 4 and sm.flops == 5 * B * H * T * T
    assert fmt_flops(total.flops) in g.source  # the module's cluster shows its total


def gpt_block_formulas(B, T, C, H):
    S = B * H * T * T
    c_attn = 2 * B * T * C * 3 * C + B * T * 3 * C       # matmul + bias
    sdpa = 2 * 2 * S * (C // H) + S + S + 5 * S         # two matmuls, scale, mask, softmax
    c_proj = 2 * B * T * C * C + B * T * C
    mlp = 2 * B * T * C * 4 * C + B * T * 4 * C + B * T * 4 * C + 2 * B * T * 4 * C * C + B * T * C
    return c_attn, sdpa, c_proj, mlp


@pytest.mark.parametrize("fused", [True, False])
def test_module_totals_of_a_gpt_block(fused):
    B, T, C, H = 2, 6, 16, 2
    with tt.kernels.use_fusion(fused):
        tape, out, names = gpt_tape(layers=1, batch=B, seq_len=T, d_model=C, heads=H)
    g = tt.viz.graph(tape)
    totals = g.graph.totals
    c_attn, sdpa, c_proj, mlp = gpt_block_formulas(B, T, C, H)
    assert totals[("h.0.attn.c_attn", 0)].flops == c_attn
    # the unfused path checks for rows with no visible key with ops (any, all): recorded, so
    # a compiled replay checks its own mask (values stay on the tape)
    check = sum(v.flops for v in g.graph.vertices.values()
                if v.kind == "op" and v.scope == "h.0.attn" and v.name in ("any", "all"))
    assert (check > 0) == (not fused)
    assert totals[("h.0.attn", 0)].flops == c_attn + sdpa + c_proj + check
    assert totals[("h.0.mlp", 0)].flops == mlp
    assert totals[("h.0.ln_1", 0)].flops == 7 * B * T * C  # normalise (5) + weight + bias
    # an array two ops keep (the softmax output, saved by softmax and the matmul after it)
    # counts once in the module total
    per_op = sum(x.saved_bytes for x in g.graph.vertices.values()
                 if x.kind == "op" and x.scope.startswith("h.0.attn"))
    assert (totals[("h.0.attn", 0)].saved_bytes < per_op) == (not fused)


# ------------------------------------------------------------------ rendering and fallbacks
@needs_dot
def test_rendered_svg_parses_and_contains_the_labels(tmp_path):
    model, tape, loss = mlp_tape()
    path = tt.viz.graph(tape, legend=True).render(tmp_path / "g.svg")
    assert path == str(tmp_path / "g.svg")
    root = ET.parse(path).getroot()
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"layers.0.weight", "matmul", "(4, 32)", "legend", "output"} <= texts
    titles = {t.text for t in root.iter("{http://www.w3.org/2000/svg}title")}
    assert "cluster_layers.0" in titles


@needs_dot
def test_render_picks_the_format_from_the_suffix(tmp_path):
    model, tape, loss = mlp_tape(layers=1)
    g = tt.viz.graph(tape)
    assert open(g.render(tmp_path / "g.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert open(g.render(tmp_path / "g.pdf"), "rb").read(4) == b"%PDF"
    assert open(g.render(tmp_path / "g.dot")).read() == g.source
    assert "<svg" in g._repr_svg_()


def test_without_the_dot_program_the_dot_file_is_written_with_a_one_line_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(viz_output.shutil, "which", lambda name: None)
    model, tape, loss = mlp_tape(layers=1)
    g = tt.viz.graph(tape)
    with pytest.warns(GraphvizNotFoundWarning) as rec:
        path = g.render(tmp_path / "sub" / "g.svg")
    assert path == str(tmp_path / "sub" / "g.dot")
    assert open(path).read() == g.source
    msg = str(rec[0].message)
    assert "\n" not in msg and "apt-get install graphviz" in msg and "g.dot" in msg
    with pytest.raises(RuntimeError, match="install Graphviz"):
        g._repr_svg_()


def test_without_the_graphviz_package_a_stand_in_is_returned(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    monkeypatch.setattr(viz_output, "_TapeGraph", None)
    model, tape, loss = mlp_tape(layers=1)
    g = tt.viz.graph(tape)
    assert isinstance(g, tt.viz.DotGraph) and g.source.startswith("digraph tinytensor {")
    assert g.render(tmp_path / "g.dot") == str(tmp_path / "g.dot")
    assert open(tmp_path / "g.dot").read() == g.source
    monkeypatch.undo()
    import graphviz
    assert isinstance(tt.viz.graph(tape), graphviz.Digraph)


def test_edge_label_modes():
    tape, out, names = gpt_tape(layers=1)
    count = lambda mode: tt.viz.graph(tape, edge_labels=mode).source.count("xlabel=")  # noqa: E731
    n_edges = len(tt.viz.graph(tape).graph.edges)
    assert count("none") == 0 < count("auto") < count("all") == n_edges
    with pytest.raises(ValueError, match="edge_labels"):
        tt.viz.graph(tape, edge_labels="some")


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="output tensors"):
        tt.viz.graph()
    with pytest.raises(TypeError, match="expected Tensors"):
        tt.viz.graph(42)
    with pytest.raises(ValueError, match=r"tt\.record\(\)"):
        tt.viz.graph(tt.randn(3) * 2)
    with tt.record() as tape:
        tt.randn(3).exp()
    with pytest.raises(ValueError, match="no output requires grad"):
        tt.viz.graph(tape, backward=True)


# ------------------------------------------------------------------ big graphs and the tool
def test_gpt2_12_layers_exported_and_rendered_with_grouping_under_10s(tmp_path):
    tape, out, names = gpt_tape(layers=12, d_model=32, heads=4, vocab=64, seq_len=8)
    t0 = cpu_seconds()
    g = tt.viz.graph(tape, out, names=names, group_by_module=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphvizNotFoundWarning)
        path = g.render(tmp_path / "gpt2.svg")
    elapsed = cpu_seconds() - t0
    assert elapsed < 10, f"12-layer GPT-2 graph took {elapsed:.1f} s of CPU"
    _, _, clusters = parse(g.source)
    assert {f"h.{i}.attn" for i in range(12)} <= set(clusters)
    if HAS_DOT:
        ET.parse(path)


@needs_dot
def test_big_backward_graph_with_clusters_renders_cleanly(tmp_path):
    # 8 blocks with their backward: ~1600 vertices in nested clusters; labelled edges
    # across clusters used to make dot lose edges or stall, so shapes are xlabels
    tape, out, names = gpt_tape(layers=8, loss=True)
    t0 = cpu_seconds()
    g = tt.viz.graph(tape, out, backward=True)
    ET.parse(g.render(tmp_path / "gpt2_bwd.svg"))  # raises if dot reports an error
    assert cpu_seconds() - t0 < 10
    assert len(g.graph.vertices) > 1000 and g.graph.orders() == [0, 1]
    assert "mclimit" in g.source


@pytest.mark.parametrize("argv", [
    ["--model", "mlp", "--backward", "2"],
    ["--model", "attention", "--no-group", "--edge-labels", "all"],
    ["--model", "gpt2", "--layers", "3", "--collapse", "--max-depth", "2", "--loss"],
])
def test_tool_writes_the_graph(tmp_path, argv, capsys):
    out = tmp_path / ("g.svg" if HAS_DOT else "g.dot")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphvizNotFoundWarning)
        path = graph_main(argv + ["--out", str(out)])
    assert path == str(out) and out.stat().st_size > 0
    assert "wrote" in capsys.readouterr().out
    if HAS_DOT:
        ET.parse(path)
