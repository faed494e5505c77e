"""Numerical stability of softmax, log_softmax, logsumexp, cross_entropy, layer_norm and
attention on inputs that overflow a naive implementation (Chainer's [[-1000, 1]] on purpose),
rows with -inf entries, and attention rows whose keys are all masked.

Every tinytensor call here runs under np.errstate(invalid="raise"): any operation that turns
non-NaN values into NaN (0 * inf, inf - inf, 0 / 0), forward or backward, fails the test."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.testing import compare_with_torch

INF = float("inf")
HARD = {
    "minus1000": np.array([[-1000.0, 1.0]]),
    "pm1000": np.array([[1000.0, -1000.0], [-1000.0, 1000.0]]),
    "big": np.array([[1e4, 1e4 + 1.0, 1e4 - 2.0], [-3e5, -3e5 + 0.5, -3e5 - 1.0]]),
    "neginf": np.array([[-INF, 0.0, 1.0], [2.0, -INF, -INF], [0.5, -1.0, 3.0]]),
    "neginf_big": np.array([[-INF, 1000.0, -1000.0], [5.0, -1e4, -INF]]),
}


def stable(tt_fn, torch_fn, inputs, double=True, finite_out=True):
    """compare with torch; rerun under errstate(invalid=raise): outputs and gradients finite."""
    compare_with_torch(tt_fn, torch_fn, inputs, double_backward=double)
    with np.errstate(invalid="raise", over="raise"):
        args = [tt.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
        diff = [a for a in args if a.requires_grad]
        out = y = tt_fn(*args)
        gs = tt.grad(y, diff, tt.tensor(np.random.standard_normal(y.shape)), create_graph=double)
        for g in gs:
            assert np.isfinite(np.asarray(g.detach())).all(), "gradient is not finite"
        if double:
            ggs = tt.grad(sum((g * g).sum() for g in gs), diff, allow_unused=True)
            for gg in ggs:
                assert gg is None or np.isfinite(np.asarray(gg.detach())).all(), "double-backward gradient is not finite"
    if finite_out:
        assert np.isfinite(np.asarray(out.detach())).all(), "output is not finite"
    return out


@pytest.mark.parametrize("x", HARD.values(), ids=HARD.keys())
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax(x, dim):
    stable(lambda a: F.softmax(a, dim), lambda a: TF.softmax(a, dim), [x])


@pytest.mark.filterwarnings("ignore:invalid value")  # compare_with_torch sums -inf outputs
@pytest.mark.parametrize("x", HARD.values(), ids=HARD.keys())
def test_log_softmax(x):
    # log_softmax of a -inf logit is -inf, as in torch; its gradients stay finite
    stable(lambda a: F.log_softmax(a, -1), lambda a: TF.log_softmax(a, -1), [x],
           finite_out=not np.isinf(x).any())


@pytest.mark.parametrize("x", HARD.values(), ids=HARD.keys())
@pytest.mark.parametrize("dim", [-1, 0, (0, 1)])
def test_logsumexp(x, dim):
    stable(lambda a: tt.logsumexp(a, dim), lambda a: torch.logsumexp(a, dim), [x])


@pytest.mark.filterwarnings("ignore:invalid value")  # testing._compare subtracts -inf from -inf
def test_logsumexp_all_neginf_row():
    # a row of only -inf has logsumexp -inf (torch agrees); no NaN
    x = np.array([[-INF, -INF], [0.0, 1.0]])
    compare_with_torch(lambda a: tt.logsumexp(a, -1), lambda a: torch.logsumexp(a, -1), [x], grad=False)
    with np.errstate(invalid="raise"):
        tt.logsumexp(tt.tensor(x), -1)


CE_TARGETS = {"minus1000": [0], "pm1000": [1, 0], "big": [2, 1], "neginf": [2, 0, 1], "neginf_big": [1, 0]}


@pytest.mark.parametrize("name", HARD.keys())
@pytest.mark.parametrize("kw", [{}, {"reduction": "none"}, {"ignore_index": 1}, {"weight": "w"}],
                         ids=["mean", "none", "ignore", "weight"])
def test_cross_entropy(name, kw):
    x, t = HARD[name], np.array(CE_TARGETS[name])
    w = np.linspace(0.5, 2.0, x.shape[1])
    kw_tt = {k: (tt.tensor(w) if v == "w" else v) for k, v in kw.items()}
    kw_th = {k: (torch.tensor(w) if v == "w" else v) for k, v in kw.items()}
    stable(lambda a, b: F.cross_entropy(a, b, **kw_tt), lambda a, b: TF.cross_entropy(a, b, **kw_th), [x, t])


@pytest.mark.parametrize("name", ["minus1000", "pm1000", "big"])
def test_cross_entropy_label_smoothing(name):
    x, t = HARD[name], np.array(CE_TARGETS[name])
    stable(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1),
           lambda a, b: TF.cross_entropy(a, b, label_smoothing=0.1), [x, t])


@pytest.mark.parametrize("name", ["minus1000", "pm1000", "big"])
def test_cross_entropy_probabilities(name):
    x = HARD[name]
    p = np.full(x.shape, 1.0 / x.shape[1])
    stable(lambda a, b: F.cross_entropy(a, b), lambda a, b: TF.cross_entropy(a, b), [x, p])


@pytest.mark.parametrize("offset", [1e4, -1e6])
def test_layer_norm_large_mean(offset):
    # a large common offset must not eat the variance (two-pass, not E[x^2] - E[x]^2)
    x = np.random.default_rng(0).standard_normal((3, 8)) + offset
    stable(lambda a: F.layer_norm(a, [8]), lambda a: TF.layer_norm(a, [8]), [x])


def test_bce_with_logits_extreme():
    x = np.array([[-1000.0, -50.0, 0.0, 50.0, 1000.0]])
    y = np.array([[1.0, 0.0, 0.5, 1.0, 0.0]])
    stable(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"),
           lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction="none"), [x, y])


# ------------------------------------------------------------------ attention, fully masked rows
B, H, L, S, E = 2, 2, 4, 5, 3


def _masks():
    bool_mask = np.ones((B, 1, L, S), dtype=bool)
    bool_mask[0, 0, 1] = False          # query row 1 of batch 0 sees nothing
    bool_mask[1, 0, 3] = False
    bool_mask[1, 0, 0, 2:] = False      # partially masked
    add_mask = np.zeros((L, S))
    add_mask[2] = -INF                  # query row 2 sees nothing, in every batch and head
    add_mask[0, 1:3] = -INF
    return {"bool": bool_mask, "additive": add_mask}


MASKS = _masks()


def _dead_rows(mask):
    """(B, H, L) bool: query rows that may attend to no key."""
    allowed = mask if mask.dtype == bool else np.isfinite(mask)
    return np.broadcast_to(~allowed.any(-1), (B, H, L))


@pytest.mark.parametrize("kind", MASKS.keys())
def test_attention_fully_masked_rows_match_torch(kind):
    m = MASKS[kind]
    stable(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(m)),
           lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)),
           [np.random.standard_normal(s) for s in [(B, H, L, E), (B, H, S, E), (B, H, S, E)]],
           double=False)  # torch's fused CPU attention has no double backward


@pytest.mark.parametrize("kind", MASKS.keys())
def test_attention_fully_masked_rows(kind):
    m, dead = MASKS[kind], _dead_rows(MASKS[kind])
    rng = np.random.default_rng(1)
    q, k, v = (tt.tensor(rng.standard_normal(s), requires_grad=True)
               for s in [(B, H, L, E), (B, H, S, E), (B, H, S, E)])
    c = rng.standard_normal((B, H, L, E))
    c2 = c.copy()
    c2[dead] = rng.standard_normal(c2[dead].shape) * 100   # cotangent changes only on dead rows
    with np.errstate(invalid="raise", over="raise"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(m))
        assert np.all(np.asarray(out.detach())[dead] == 0.0)
        g1 = tt.grad((out * tt.tensor(c)).sum(), [q, k, v], create_graph=True)
        g2 = tt.grad((out * tt.tensor(c2)).sum(), [q, k, v], retain_graph=True)
        gg = tt.grad(sum((g * g).sum() for g in g1), [q, k, v], allow_unused=True)
    for a, b in zip(g1, g2):
        a, b = np.asarray(a.detach()), np.asarray(b.detach())
        assert np.isfinite(a).all() and np.isfinite(b).all()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)  # dead rows contribute nothing
    assert np.all(np.asarray(g1[0].detach())[dead] == 0.0)
    for g in gg:
        assert g is None or np.isfinite(np.asarray(g.detach())).all()


def test_attention_every_row_masked():
    m = np.zeros((L, S), dtype=bool)
    q, k, v = (tt.randn(B, H, n, E, dtype=tt.float64, requires_grad=True) for n in (L, S, S))
    with np.errstate(invalid="raise"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(m))
        out.sum().backward()
    assert np.all(np.asarray(out.detach()) == 0.0)
    for t in (q, k, v):
        assert np.all(np.asarray(t.grad.detach()) == 0.0)


def test_attention_large_scores():
    # scores around +-1e3 must not overflow the softmax inside attention
    rng = np.random.default_rng(2)
    q = rng.standard_normal((B, H, L, E)) * 40
    k = rng.standard_normal((B, H, S, E)) * 40
    stable(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
           [q, k, rng.standard_normal((B, H, S, E))], double=False)
