"""Which path a fused family ran, and why: `tt.kernels.report()`, the graph labels, and the
layout the paths come from (one ops file per family; no fused op looks at the grad mode)."""
import os
import re

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F

R = np.random.default_rng(0)
HERE = os.path.dirname(__file__)
PKG = os.path.join(HERE, "..", "..", "tinytensor")


def _t(*shape, grad=True, dtype=tt.float64):
    return tt.tensor(R.standard_normal(shape), dtype=dtype, requires_grad=grad)


def _qkv(lq=4, lk=5, e=3):
    return _t(2, lq, e), _t(2, lk, e), _t(2, lk, e)


# (what runs, family, path, reason): one line per rule of each family
CASES = [
    ("softmax last dim", lambda: F.softmax(_t(3, 5), -1), "softmax", "fused", None),
    ("softmax dim 0", lambda: F.softmax(_t(3, 5), 0), "softmax", "reference", "dim 0 is not the last axis (1)"),
    ("log_softmax empty", lambda: F.log_softmax(_t(0, 5), -1), "softmax", "reference", "empty input"),
    ("layer_norm", lambda: F.layer_norm(_t(3, 5), (5,), _t(5), _t(5)), "layer_norm", "fused", None),
    ("layer_norm float32 weight", lambda: F.layer_norm(_t(3, 5), (5,), _t(5, dtype=tt.float32)),
     "layer_norm", "reference", "weight dtype float32 differs from the input's float64"),
    # rms_norm casts a weight of another dtype to its compute dtype first (as torch's composite)
    ("rms_norm float32 weight", lambda: F.rms_norm(_t(3, 5), (5,), _t(5, dtype=tt.float32)),
     "layer_norm", "fused", None),
    ("cross_entropy", lambda: F.cross_entropy(_t(4, 5), tt.tensor([0, 1, 2, 3])), "cross_entropy", "fused", None),
    ("cross_entropy probabilities", lambda: F.cross_entropy(_t(4, 5), F.softmax(_t(4, 5, grad=False), -1)),
     "cross_entropy", "reference", "probability targets (the fused op takes class indices)"),
    ("cross_entropy weight with grad", lambda: F.cross_entropy(_t(4, 5), tt.tensor([0, 1, 2, 3]), weight=_t(5)),
     "cross_entropy", "reference", "weight requires grad (the fused op gives none for it)"),
    ("attention", lambda: F.scaled_dot_product_attention(*_qkv(), is_causal=True), "attention", "fused", None),
    ("attention dropout", lambda: F.scaled_dot_product_attention(*_qkv(), dropout_p=0.1), "attention",
     "reference", "dropout_p > 0 (the fused op has no dropout)"),
    ("attention mask with grad", lambda: F.scaled_dot_product_attention(*_qkv(), attn_mask=_t(4, 5)),
     "attention", "reference", "attn_mask requires grad (the fused op gives none for it)"),
    ("attention broadcast batch", lambda: F.scaled_dot_product_attention(_t(2, 4, 3), _t(1, 5, 3), _t(1, 5, 3)),
     "attention", "reference", "batch dims of query (2, 4, 3), key (1, 5, 3), value (1, 5, 3) broadcast "
     "(the fused op takes them equal)"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_report_says_which_path_ran_and_why(case):
    _, run, family, path, why = case
    with tt.kernels.report() as r:
        run()
    assert r[family] == (path, why)
    with tt.kernels.use_fusion(False), tt.kernels.report() as off:
        run()
    assert off[family] == ("reference", "fusion off")


def test_report_counts_every_outcome_and_stops_at_the_end_of_its_block():
    x = _t(3, 5)
    with tt.kernels.report() as outer:
        F.softmax(x, -1)
        with tt.kernels.report() as inner, tt.kernels.use_fusion(False, ops="softmax"):
            F.softmax(x, -1)
        F.softmax(x, 0)
        F.log_softmax(x, -1)
    F.softmax(x, 0)  # after the block: heard by no report
    assert inner == {"softmax": ("reference", "fusion off")} and len(inner.counts) == 1
    assert outer["softmax"] == ("fused", None)  # the last call
    assert outer.counts == {("softmax", "fused", None): 2, ("softmax", "reference", "fusion off"): 1,
                            ("softmax", "reference", "dim 0 is not the last axis (1)"): 1}


def _labels(g):
    """{vertex id: (label, tooltip)} of the drawn ops, from the DOT source."""
    out = {}
    for vid, label, tip in re.findall(r'"(n\d+)" \[label="((?:[^"\\]|\\.)*)", tooltip="((?:[^"\\]|\\.)*)"',
                                      g.source):
        out[vid] = (label.replace("\\n", "\n"), tip)
    return out


def _by_name(tape, g):
    labels = _labels(g)
    return [(n.name,) + labels[f"n{n.seq}"] for n in tape.nodes]


def test_graph_labels_fused_and_reference_nodes():
    x = _t(3, 5)
    with tt.record() as tape:
        F.softmax(x * 2.0, -1)
        F.softmax(x * 2.0, 0)
    rows = _by_name(tape, tt.viz.graph(tape))
    (m1, l1, _), (sm1, l2, t2), (m2, l3, _), (sm2, l4, t4) = rows
    assert (m1, m2, sm1, sm2) == ("mul", "mul", "softmax", "softmax")
    assert l2.split("\n")[0] == "softmax (fused)" and "softmax (fused)" in t2
    assert l4.split("\n")[:2] == ["softmax(dim=0)", "(reference: dim 0 is not the last axis (1))"]
    assert "softmax (reference: dim 0 is not the last axis (1))" in t4
    assert "fused" not in l1 + l3 and "reference" not in l1 + l3  # the input's producer is not tagged


def test_graph_from_outputs_shows_the_reference_decomposition_of_attention():
    """No tape: the graph is walked from the output; every op of the reference attention
    carries its reason, except the softmax inside it, which ran fused."""
    q, k, v = _qkv()
    out = F.scaled_dot_product_attention(q * 1.0, k, v, dropout_p=0.5)
    g = tt.viz.graph(out)
    ops = [v for v in g.graph.vertices.values() if v.kind == "op"]
    labels = _labels(g)
    why = "(scaled_dot_product_attention reference: dropout_p > 0 (the fused op has no dropout))"
    tagged = sorted(v.name for v in ops if why in labels[v.id][0])
    assert tagged == ["matmul", "matmul", "mul", "mul", "permute"]  # (the dropout mask is a constant here)
    assert [labels[v.id][0].split("\n")[0] for v in ops if v.name == "softmax"] == ["softmax (fused)"]
    assert [v.name for v in ops if why not in labels[v.id][0]] == ["mul", "softmax"]  # q * 1.0, softmax


def test_reference_layer_norm_tags_its_affine_ops_under_no_grad():
    x, w, b = _t(3, 5, grad=False), _t(5, grad=False, dtype=tt.float32), _t(5, grad=False)
    with tt.no_grad(), tt.record() as tape:
        F.layer_norm(x, (5,), w, b)
    paths = [(n.name, tt.kernels.fusion.path_of(n)) for n in tape.nodes]
    why = "reference: weight dtype float32 differs from the input's float64"
    assert paths[0] == ("layer_norm", why)
    assert all(p == f"layer_norm {why}" for _, p in paths[1:]) and len(paths) >= 3


def _sources(*parts):
    d = os.path.join(PKG, *parts)
    return {f: open(os.path.join(d, f)).read() for f in sorted(os.listdir(d)) if f.endswith(".py")}


def test_fused_ops_live_beside_their_reference_and_never_read_the_grad_mode():
    ops = _sources("ops")
    kernels = _sources("kernels")
    for f, fused in (("softmax.py", "FusedSoftmax"), ("norms.py", "FusedNorm"),
                     ("cross_entropy.py", "FusedCrossEntropy"), ("attention.py", "FlashAttention")):
        src = ops[f]
        assert f"class {fused}(" in src and "_why_not_fused" in src and "backward_arrays" in src, f
        assert "grad_enabled" not in src, f"ops/{f} reads the grad mode"
    for f, src in kernels.items():
        assert "grad_enabled" not in src and "Function" not in src, f"kernels/{f} holds an op or reads the grad mode"
