"""tinytensor.functional against torch.nn.functional: forward, gradients and (where torch
supports it) gradients of gradients, in float64, plus a float32 pass and bad-input errors.

One helper, `check`, runs an F function by name in both libraries; each case is one line."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.testing import compare_with_torch

R = np.random  # seeded before every test by conftest


def _conv(v, lib, dtype, device):
    """kwargs that are arrays become constants of the right library (floats in `dtype`)."""
    if not isinstance(v, np.ndarray):
        return v
    if v.dtype.kind == "f":
        v = v.astype(dtype)
    return tt.tensor(v, device=device) if lib == "tt" else torch.tensor(v)


def check(name, inputs, double=False, dtype="float64", low=-2.0, high=2.0, atol=None, rtol=None,
          grad=True, device="cpu", **kw):
    """compare F.<name>(*inputs, **kw) with torch.nn.functional.<name>(*inputs, **kw)."""
    tt_kw = {k: _conv(v, "tt", dtype, device) for k, v in kw.items()}
    th_kw = {k: _conv(v, "torch", dtype, device) for k, v in kw.items()}
    return compare_with_torch(lambda *a: getattr(F, name)(*a, **tt_kw),
                              lambda *a: getattr(TF, name)(*a, **th_kw),
                              inputs, dtype=dtype, grad=grad, double_backward=double, low=low, high=high,
                              atol=atol, rtol=rtol, device=device)


def ints(shape, high, low=0):
    return R.randint(low, high, size=shape).astype(np.int64)


def probs(shape, dim=1):
    e = np.exp(R.standard_normal(shape))
    return e / e.sum(axis=dim, keepdims=True)


# ------------------------------------------------------------------ softmax / log_softmax
SOFTMAX_CASES = [((5,), 0), ((5,), -1), ((3, 4), -1), ((3, 4), 0), ((3, 4), -2),
                 ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), -3), ((2, 1, 3, 4), 2)]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
def test_softmax(name, shape, dim):
    check(name, [shape], double=True, dim=dim, low=-5, high=5)


def test_softmax_dtype_arg():
    compare_with_torch(lambda x: F.softmax(x, -1, dtype=tt.float64), lambda x: TF.softmax(x, -1, dtype=torch.float64),
                       [(3, 4)], dtype="float32", atol=1e-12, rtol=1e-9, grad=False)
    compare_with_torch(lambda x: F.log_softmax(x, 0, dtype=tt.float64), lambda x: TF.log_softmax(x, 0, dtype=torch.float64),
                       [(3, 4)], dtype="float32", atol=1e-12, rtol=1e-9, grad=False)


# ------------------------------------------------------------------ normalization
@pytest.mark.parametrize("inputs,extra", [
    ([(4, 6), [6]], {}),
    ([(2, 3, 6), [6], (6,)], {}),                             # weight
    ([(2, 3, 6), [6], (6,), (6,)], {}),                       # weight and bias
    ([(2, 3, 6), [6], None, (6,)], {"double": False}),        # bias only (torch can't double-backward it)
    ([(2, 3, 4), [3, 4]], {}),                                # 2-d normalized_shape
    ([(2, 3, 4), [3, 4], (3, 4), (3, 4)], {}),
    ([(2, 3, 4), [2, 3, 4], (2, 3, 4), (2, 3, 4)], {}),      # everything normalized
    ([(3, 5), [5], (5,), (5,)], {"eps": 1e-2}),
    ([(3, 5), [5]], {"eps": 0.5}),
    ([(3, 1), [1], (1,), (1,)], {}),                          # a single element: xhat = 0
])
def test_layer_norm(inputs, extra):
    check("layer_norm", inputs, **{"double": True, **extra})


def test_layer_norm_int_shape():
    compare_with_torch(lambda x, w: F.layer_norm(x, 5, w), lambda x, w: TF.layer_norm(x, (5,), w),
                       [(3, 5), (5,)], double_backward=True)


@pytest.mark.parametrize("inputs,extra", [
    ([(4, 6), [6]], {}),
    ([(2, 3, 6), [6], (6,)], {}),
    ([(2, 3, 4), [3, 4]], {}),
    ([(2, 3, 4), [3, 4], (3, 4)], {}),
    ([(3, 5), [5], (5,)], {"eps": 1e-3}),
    ([(3, 5), [5]], {"eps": 0.5}),
    ([(3, 5), [5], None], {"eps": None}),
])
def test_rms_norm(inputs, extra):
    check("rms_norm", inputs, double=True, **extra)


# ------------------------------------------------------------------ linear
@pytest.mark.parametrize("inputs", [
    [(4, 3), (5, 3)], [(4, 3), (5, 3), (5,)], [(2, 4, 3), (5, 3), (5,)], [(3,), (5, 3), (5,)],
    [(3,), (5, 3)], [(2, 2, 4, 3), (1, 3), (1,)], [(4, 3), (5, 3), ()], [(4, 3), (3,)],
])
def test_linear(inputs):
    check("linear", inputs, double=True)


# ------------------------------------------------------------------ cross_entropy / nll_loss
def _targets(shape, c, ignore):
    """class indices for an input of `shape`; with `ignore` some are set to the ignored value."""
    tshape = (shape[0],) + tuple(shape[2:]) if len(shape) > 1 else ()
    t = ints(tshape, c)
    if ignore is not None and t.ndim:
        t.reshape(-1)[::3] = ignore
    return t


CE_SHAPES = [(4, 5), (2, 3, 2, 2), (5,)]
CE_IGNORE = [None, -100, 2]           # None: leave ignore_index at its default and use none
CE_SMOOTH = [0.0, 0.2]
REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("shape,ignore,weighted,smooth,reduction",
                         list(itertools.product(CE_SHAPES, CE_IGNORE, [False, True], CE_SMOOTH, REDUCTIONS)), ids=str)
def test_cross_entropy_indices(shape, ignore, weighted, smooth, reduction):
    c = shape[1] if len(shape) > 1 else shape[0]
    kw = {"reduction": reduction, "label_smoothing": smooth}
    if ignore is not None:
        kw["ignore_index"] = ignore
    if weighted:
        kw["weight"] = R.uniform(0.2, 2.0, size=c)
    check("cross_entropy", [shape, _targets(shape, c, ignore)], double=True, **kw)


@pytest.mark.parametrize("shape,weighted,smooth,reduction",
                         list(itertools.product(CE_SHAPES, [False, True], CE_SMOOTH, REDUCTIONS)), ids=str)
def test_cross_entropy_probabilities(shape, weighted, smooth, reduction):
    c = shape[1] if len(shape) > 1 else shape[0]
    kw = {"reduction": reduction, "label_smoothing": smooth}
    if weighted:
        kw["weight"] = R.uniform(0.2, 2.0, size=c)
    # the probability target is an input too: torch differentiates with respect to it
    check("cross_entropy", [shape, probs(shape, dim=1 if len(shape) > 1 else 0)], double=True, **kw)


def test_cross_entropy_scalar_target_ignored():
    # one sample, ignored: mean is 0/0 = nan in torch; match it
    check("cross_entropy", [(5,), np.array(-100)], grad=False)


@pytest.mark.parametrize("shape,ignore,weighted,reduction",
                         list(itertools.product(CE_SHAPES, CE_IGNORE, [False, True], REDUCTIONS)), ids=str)
def test_nll_loss(shape, ignore, weighted, reduction):
    c = shape[1] if len(shape) > 1 else shape[0]
    kw = {"reduction": reduction}
    if ignore is not None:
        kw["ignore_index"] = ignore
    if weighted:
        kw["weight"] = R.uniform(0.2, 2.0, size=c)
    check("nll_loss", [shape, _targets(shape, c, ignore)], double=True, **kw)


def test_cross_entropy_is_log_softmax_then_nll():
    x = tt.randn(6, 4, requires_grad=True)
    t = tt.tensor(np.array([0, 3, 1, 2, 3, 0]))
    a = F.cross_entropy(x, t)
    b = F.nll_loss(F.log_softmax(x, dim=1), t)
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)


# ------------------------------------------------------------------ mse / bce / one_hot
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss(shape, reduction):
    check("mse_loss", [shape, shape], double=True, reduction=reduction)


@pytest.mark.parametrize("weighted,pos_weighted,reduction",
                         list(itertools.product([False, True], [False, True], REDUCTIONS)))
def test_bce_with_logits(weighted, pos_weighted, reduction):
    shape = (4, 3)
    kw = {"reduction": reduction}
    if weighted:
        kw["weight"] = R.uniform(0.2, 2.0, size=shape)
    if pos_weighted:
        kw["pos_weight"] = R.uniform(0.2, 3.0, size=shape[-1:])
    check("binary_cross_entropy_with_logits", [shape, R.uniform(0, 1, size=shape)], double=True,
          low=-6, high=6, **kw)


@pytest.mark.parametrize("shape,wshape", [((5,), (5,)), ((2, 3), (3,)), ((2, 2, 3), (2, 1, 3)), ((2, 3), ())])
def test_bce_with_logits_broadcast_weight(shape, wshape):
    # torch does not differentiate with respect to weight or pos_weight: they are constants
    check("binary_cross_entropy_with_logits", [shape, R.uniform(0, 1, size=shape)], double=True,
          weight=R.uniform(0.2, 2, size=wshape), pos_weight=R.uniform(0.2, 2, size=shape[-1:]))


def test_bce_with_logits_large_logits():
    x = np.array([[-800.0, -30.0, 0.0, 30.0, 800.0]])
    check("binary_cross_entropy_with_logits", [x, np.array([[0.0, 1.0, 0.5, 0.0, 1.0]])],
          double=True, reduction="none")


@pytest.mark.parametrize("t,num_classes", [
    (np.array([0, 2, 1, 4]), -1), (np.array([0, 2, 1]), 5), (np.array([[1, 0], [2, 3]]), -1),
    (np.array(3), 4), (np.zeros((0,), np.int64), 3),
])
def test_one_hot(t, num_classes):
    compare_with_torch(lambda a: F.one_hot(a, num_classes), lambda a: TF.one_hot(a, num_classes),
                       [t.astype(np.int64)], grad=False)


# ------------------------------------------------------------------ dropout
def test_dropout_train_statistics():
    x = tt.ones(200, 500, dtype=tt.float64, requires_grad=True)
    p = 0.3
    y = F.dropout(x, p, training=True)
    yd = np.asarray(y.detach())
    kept = yd != 0
    assert abs(1 - kept.mean() - p) < 0.01
    np.testing.assert_allclose(yd[kept], 1 / (1 - p), rtol=1e-12)
    w = tt.tensor(R.standard_normal(x.shape))
    (y * w).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad.detach()), kept * np.asarray(w.detach()) / (1 - p), rtol=1e-12)


def test_dropout_double_backward():
    x = tt.randn(20, 30, dtype=tt.float64, requires_grad=True)
    y = F.dropout(x, 0.5)
    (g,) = tt.grad((y * y).sum(), [x], create_graph=True)  # 2 x mask^2 scale^2
    (gg,) = tt.grad(g.sum(), [x])
    kept = np.asarray(y.detach()) != 0
    np.testing.assert_allclose(np.asarray(gg.detach()), 2 * kept * 4.0, rtol=1e-12)


@pytest.mark.parametrize("training,p", [(False, 0.5), (False, 1.0), (True, 0.0)])
def test_dropout_identity(training, p):
    check("dropout", [(3, 4)], double=True, p=p, training=training)


def test_dropout_p_one():
    check("dropout", [(3, 4)], double=True, p=1.0, training=True)


def test_dropout_seeded():
    x = tt.randn(50, 40)
    tt.manual_seed(7)
    a = np.asarray(F.dropout(x, 0.4).detach())
    tt.manual_seed(7)
    b = np.asarray(F.dropout(x, 0.4).detach())
    c = np.asarray(F.dropout(x, 0.4).detach())
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_bad_p(p):
    with pytest.raises(ValueError, match="dropout"):
        F.dropout(tt.randn(3), p)


# ------------------------------------------------------------------ attention
B, H, L, S, E = 2, 3, 4, 6, 5
QKV = [(B, H, L, E), (B, H, S, E), (B, H, S, E)]


def _bool_mask(shape, seed):
    m = np.random.default_rng(seed).uniform(size=shape) > 0.4
    m[..., 0] = True  # every row attends somewhere (fully masked rows: test_stability.py)
    return m


def _float_mask(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("inputs,kw", [
    (QKV, {}),
    ([(L, E), (S, E), (S, E)], {}),                                        # no batch
    ([(B, L, E), (B, S, E), (B, S, 7)], {}),                              # value dim != E
    ([(B, H, L, E), (B, H, L, E), (B, H, L, E)], {"is_causal": True}),
    (QKV, {"is_causal": True}),                                           # L != S, top-left causal
    ([(B, H, S, E), (B, H, L, E), (B, H, L, E)], {"is_causal": True}),    # L > S
    (QKV, {"attn_mask": _bool_mask((L, S), 0)}),                          # broadcast over B, H
    (QKV, {"attn_mask": _bool_mask((B, 1, L, S), 1)}),                    # over heads
    (QKV, {"attn_mask": _bool_mask((1, H, L, S), 2)}),                    # over batch
    (QKV, {"attn_mask": _bool_mask((B, H, L, S), 3)}),
    (QKV, {"attn_mask": _float_mask((L, S), 4)}),
    (QKV, {"attn_mask": _float_mask((B, 1, 1, S), 5)}),
    (QKV, {"scale": 0.3}),
    (QKV, {"scale": 2.0, "attn_mask": _bool_mask((L, S), 6)}),
    (QKV, {"scale": 0.5, "is_causal": True}),
    ([(B, 6, L, E), (B, 2, S, E), (B, 2, S, E)], {"enable_gqa": True}),
    ([(B, 6, L, E), (B, 3, S, E), (B, 3, S, 4)], {"enable_gqa": True, "is_causal": True}),
    ([(B, 4, L, E), (B, 1, S, E), (B, 1, S, E)], {"enable_gqa": True, "attn_mask": _bool_mask((L, S), 7)}),
    ([(B, 4, L, E), (B, 4, S, E), (B, 4, S, E)], {"enable_gqa": True}),  # gqa flag, equal heads
])
def test_sdpa(inputs, kw):
    check("scaled_dot_product_attention", inputs, **kw)


def test_sdpa_float_mask_differentiable():
    compare_with_torch(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       QKV + [(B, 1, L, S)])


def _sdpa_math(q, k, v, mask=None, causal=False):
    """the math reference in torch ops (torch's fused kernels have no double backward)"""
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"mask": _bool_mask((L, S), 8)},
                                {"mask": _float_mask((L, S), 9)}])
def test_sdpa_double_backward(kw):
    def conv(lib):
        m = kw.get("mask")
        return None if m is None else (tt.tensor(m) if lib == "tt" else torch.tensor(m))
    compare_with_torch(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=conv("tt"), is_causal=kw.get("causal", False)),
        lambda q, k, v: _sdpa_math(q, k, v, conv("torch"), kw.get("causal", False)),
        QKV, double_backward=True)


def test_sdpa_dropout_shape_and_seed():
    q, k, v = (tt.randn(*s) for s in QKV)
    tt.manual_seed(3)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    tt.manual_seed(3)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    c = F.scaled_dot_product_attention(q, k, v)
    assert a.shape == (B, H, L, E)
    np.testing.assert_array_equal(np.asarray(a.detach()), np.asarray(b.detach()))
    assert not np.allclose(np.asarray(a.detach()), np.asarray(c.detach()))


# ------------------------------------------------------------------ empty tensors
@pytest.mark.parametrize("name,inputs,kw", [
    ("softmax", [(0, 3)], {"dim": 0}),
    ("log_softmax", [(0, 3)], {"dim": 0}),
    ("softmax", [(0, 3)], {"dim": 1}),
    ("layer_norm", [(0, 4), [4], (4,), (4,)], {}),
    ("rms_norm", [(0, 4), [4]], {}),
    ("cross_entropy", [(0, 4), np.zeros(0, np.int64)], {"reduction": "sum"}),
    ("cross_entropy", [(0, 4), np.zeros(0, np.int64)], {}),                  # mean of nothing: nan
    ("cross_entropy", [(0, 4), np.zeros((0, 4))], {}),
    ("scaled_dot_product_attention", [(1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 4)], {}),  # no keys
    ("scaled_dot_product_attention", [(1, 2, 0, 4), (1, 2, 3, 4), (1, 2, 3, 4)], {}),  # no queries
])
def test_empty(name, inputs, kw):
    check(name, inputs, double=True, **kw)


# ------------------------------------------------------------------ float32 pass
F32 = [
    ("softmax", [(3, 7)], {"dim": -1}),
    ("log_softmax", [(2, 3, 4)], {"dim": 1}),
    ("layer_norm", [(2, 3, 8), [8], (8,), (8,)], {}),
    ("rms_norm", [(2, 3, 8), [8], (8,)], {}),
    ("rms_norm", [(2, 3, 8), [3, 8]], {"eps": 1e-6}),
    ("linear", [(4, 6), (3, 6), (3,)], {}),
    ("cross_entropy", [(4, 5), np.array([1, 0, 4, -100])], {}),
    ("cross_entropy", [(4, 5), np.array([1, 0, 4, 2])], {"label_smoothing": 0.1, "weight": np.linspace(0.5, 1.5, 5)}),
    ("cross_entropy", [(2, 3, 2, 2), np.array([[[0, 1], [2, 0]], [[1, 1], [2, 2]]])], {"reduction": "sum"}),
    ("nll_loss", [(4, 5), np.array([1, 0, 4, 2])], {"reduction": "none"}),
    ("mse_loss", [(3, 4), (3, 4)], {}),
    ("binary_cross_entropy_with_logits", [(3, 4), np.full((3, 4), 0.25)], {"pos_weight": np.ones(4) * 2}),
    ("scaled_dot_product_attention", QKV, {"is_causal": True}),
    ("scaled_dot_product_attention", QKV, {"attn_mask": _bool_mask((L, S), 10)}),
]


@pytest.mark.parametrize("name,inputs,kw", F32)
def test_float32(name, inputs, kw, device):
    out = check(name, inputs, dtype="float32", device=device, **kw)
    assert out.dtype == tt.float32


# ------------------------------------------------------------------ bad input
def _t(shape, dtype=np.float64):
    return tt.tensor(np.zeros(shape, dtype=dtype))


@pytest.mark.parametrize("fn,err,match", [
    (lambda: F.cross_entropy(_t((4, 5)), _t((3,), np.int64)), ValueError, r"cross_entropy: target shape \(3,\)"),
    (lambda: F.cross_entropy(_t((4, 5, 2)), _t((4, 5), np.int64)), ValueError, r"cross_entropy: target shape"),
    (lambda: F.cross_entropy(_t((4, 5)), _t((4, 3))), ValueError, r"cross_entropy: probability targets"),
    (lambda: F.cross_entropy(_t((4, 5)), _t((4,), np.bool_)), TypeError, r"cross_entropy: target"),
    (lambda: F.cross_entropy(_t((4, 5)), tt.tensor(np.array([0, 1, 5, 2]))), IndexError, r"cross_entropy: target 5 is out of range for 5 classes"),
    (lambda: F.cross_entropy(_t((4, 5)), tt.tensor(np.array([0, -1, 1, 2]))), IndexError, r"cross_entropy: target -1"),
    (lambda: F.cross_entropy(_t((4, 5)), _t((4,), np.int64), reduction="avg"), ValueError, r"cross_entropy: reduction"),
    (lambda: F.cross_entropy(_t((4, 5)), _t((4,), np.int64), label_smoothing=1.5), ValueError, r"cross_entropy: label_smoothing"),
    (lambda: F.cross_entropy(_t((4, 5)), _t((4,), np.int64), weight=_t((4,))), ValueError, r"cross_entropy: weight"),
    (lambda: F.nll_loss(_t((4, 5)), _t((4,))), TypeError, r"nll_loss: target"),
    (lambda: F.nll_loss(_t((4, 5)), tt.tensor(np.array([0, 9, 1, 2]))), IndexError, r"nll_loss: target 9"),
    (lambda: F.nll_loss(_t((4, 5)), _t((5,), np.int64)), ValueError, r"nll_loss: target shape"),
    (lambda: F.layer_norm(_t((2, 3, 4)), [3]), ValueError, r"layer_norm: normalized_shape \(3,\)"),
    (lambda: F.layer_norm(_t((2, 3, 4)), [2, 4]), ValueError, r"layer_norm: normalized_shape"),
    (lambda: F.layer_norm(_t((2, 3, 4)), [4], weight=_t((3,))), ValueError, r"layer_norm: weight"),
    (lambda: F.rms_norm(_t((2, 3, 4)), [5]), ValueError, r"rms_norm: normalized_shape"),
    (lambda: F.linear(_t((2, 3)), _t((5, 4))), ValueError, r"linear: input shape \(2, 3\)"),
    (lambda: F.linear(_t((2, 3)), _t((5, 3)), _t((4,))), ValueError, r"linear: bias"),
    (lambda: F.linear(_t((2, 3)), _t((2, 5, 3))), ValueError, r"linear: input shape"),
    (lambda: F.scaled_dot_product_attention(_t((2, 4, 5)), _t((2, 6, 4)), _t((2, 6, 5))), ValueError, r"scaled_dot_product_attention: shapes"),
    (lambda: F.scaled_dot_product_attention(_t((2, 4, 5)), _t((2, 6, 5)), _t((2, 7, 5))), ValueError, r"scaled_dot_product_attention: shapes"),
    (lambda: F.scaled_dot_product_attention(_t((2, 3, 4, 5)), _t((2, 2, 6, 5)), _t((2, 2, 6, 5)), enable_gqa=True), ValueError, r"scaled_dot_product_attention: 3 query heads"),
    (lambda: F.scaled_dot_product_attention(_t((2, 3, 4, 5)), _t((2, 2, 6, 5)), _t((2, 2, 6, 5))), ValueError, r"scaled_dot_product_attention: query, key and value batch"),
    (lambda: F.scaled_dot_product_attention(_t((2, 4, 5)), _t((2, 6, 5)), _t((2, 6, 5)), attn_mask=_t((4, 5), np.bool_)), ValueError, r"scaled_dot_product_attention: attn_mask"),
    (lambda: F.scaled_dot_product_attention(_t((2, 4, 5)), _t((2, 6, 5)), _t((2, 6, 5)), attn_mask=_t((4, 6), np.bool_), is_causal=True), ValueError, r"scaled_dot_product_attention"),
    (lambda: F.mse_loss(_t((2, 3)), _t((3, 2))), ValueError, r"mse_loss: input shape"),
    (lambda: F.binary_cross_entropy_with_logits(_t((2, 3)), _t((2,))), ValueError, r"binary_cross_entropy_with_logits"),
    (lambda: F.one_hot(tt.tensor(np.array([0, 3])), 3), IndexError, r"one_hot"),
    (lambda: F.one_hot(_t((2,))), TypeError, r"one_hot"),
    (lambda: F.softmax(_t((2, 3)), dim=2), IndexError, r"softmax: dimension 2"),
])
def test_bad_input(fn, err, match):
    with pytest.raises(err, match=match):
        fn()
