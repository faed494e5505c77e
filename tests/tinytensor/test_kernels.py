"""Fused ops (tinytensor/ops/{softmax,norms,cross_entropy,attention}.py) against their reference decompositions (fusion off)
and against PyTorch: values, gradients and gradients of gradients, in float64 on the CPU;
the same ops on CUDA under the gpu marker (float32 / float16 against float64 on the CPU).

One helper, `check`, runs a function of tinytensor.functional three ways (fused, reference,
torch); each case is one line. Every case also asserts that the fused op really ran."""
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.ops import attention as k_attention
from tinytensor.ops.attention import FlashAttention
from tinytensor.ops.cross_entropy import FusedCrossEntropy
from tinytensor.ops.norms import FusedNorm, FusedRMSNorm
from tinytensor.ops.softmax import FusedLogSoftmax, FusedSoftmax
from tinytensor.testing import compare_with_torch

R = np.random  # seeded before every test by conftest


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    """Tiny CPU attention blocks, so that short sequences cross block edges (T not a
    multiple of the block, causal blocks skipped, queries split)."""
    monkeypatch.setattr(k_attention, "KEY_BLOCK", 8)
    monkeypatch.setattr(k_attention, "QUERY_BLOCK", 8)
    monkeypatch.setattr(k_attention, "BLOCK_ELEMS", 100)  # non-causal queries split too


def _to_tt(v, device, dtype, grad):
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            return tt.tensor(v.astype(dtype), device=device, requires_grad=grad)
        return tt.tensor(v, device=device)
    return v


def _run(fn, arrays, kw, device="cpu", dtype=np.float64, fused=True, cot_seed=1, double=False):
    """Outputs and input gradients (float64 NumPy) of fn(*arrays, **kw), and with `double`
    the gradients of those gradients; asserts which path ran."""
    ins = [_to_tt(a, device, dtype, True) for a in arrays]
    kws = {k: _to_tt(v, device, dtype, False) for k, v in kw.items()}
    with tt.kernels.use_fusion(fused), tt.record() as tape:
        out = fn(*ins, **kws)
    ran = {type(n.fn) if not isinstance(n.fn, type) else n.fn for n in tape.nodes}
    fused_ran = ran & FUSED
    assert bool(fused_ran) == fused, f"fused ops that ran: {fused_ran} (fusion {'on' if fused else 'off'})"
    cot = np.random.default_rng(cot_seed).standard_normal(out.shape)
    diff = [t for t in ins if isinstance(t, tt.Tensor) and t.requires_grad]
    res = [np.asarray(out.detach().to("cpu").numpy(), np.float64)]
    total = (out * tt.tensor(cot.astype(dtype), device=device)).sum()
    with tt.kernels.use_fusion(fused):
        # first order without create_graph: the fast (kernel) backward
        grads = tt.grad(total, diff, allow_unused=True, retain_graph=double)
        res += [np.zeros(t.shape) if g is None else np.asarray(g.to("cpu").numpy(), np.float64)
                for t, g in zip(diff, grads)]
        if double:  # create_graph: the backward in tinytensor ops, then its gradient
            grads = tt.grad(total, diff, allow_unused=True, create_graph=True)
            res += [np.zeros(t.shape) if g is None else np.asarray(g.detach().to("cpu").numpy(), np.float64)
                    for t, g in zip(diff, grads)]
        live = [g for g in grads if g is not None and g.requires_grad]
        if double and live:
            rng = np.random.default_rng(cot_seed + 1)
            total = sum((g * tt.tensor(rng.standard_normal(g.shape), device=device)).sum() for g in live)
            gg = tt.grad(total, diff, allow_unused=True)
            res += [np.zeros(t.shape) if g is None else np.asarray(g.to("cpu").numpy(), np.float64)
                    for t, g in zip(diff, gg)]
    return res


FUSED = {FusedSoftmax, FusedLogSoftmax, FusedNorm, FusedRMSNorm, FusedCrossEntropy, FlashAttention}


def _close(a, b, atol, rtol, what):
    for i, (x, y) in enumerate(zip(a, b)):
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, equal_nan=True,
                                   err_msg=f"{what}: {'output' if i == 0 else f'grad {i - 1}'}")


def check(name, arrays, double=True, torch_fn=None, atol=1e-9, rtol=1e-7, **kw):
    """F.<name>(*arrays, **kw): fused against reference (values, gradients), and fused
    against torch (values, gradients and, with `double`, gradients of gradients)."""
    fn = getattr(F, name)
    fused = _run(fn, arrays, kw, fused=True, double=double)
    ref = _run(fn, arrays, kw, fused=False, double=double)
    _close(fused, ref, atol, rtol, f"{name} fused vs reference")
    tf = torch_fn or getattr(TF, name)
    tt_kw = {k: _to_tt(v, "cpu", np.float64, False) for k, v in kw.items()}
    th_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    # torch's flash CPU backend has no double backward; its math backend has
    with tt.kernels.use_fusion(True), sdpa_kernel([SDPBackend.MATH]):
        compare_with_torch(lambda *a: fn(*a, **tt_kw), lambda *a: tf(*a, **th_kw),
                           [a.copy() for a in arrays], double_backward=double, atol=atol, rtol=rtol)


def rand(*shape, scale=1.0):
    return R.standard_normal(shape) * scale


# ------------------------------------------------------------------ softmax / log_softmax
SOFTMAX = [
    ("row", [rand(3, 7)]),
    ("one element", [rand(1, 1)]),
    ("vector", [rand(5)]),
    ("batched", [rand(2, 3, 33)]),
    ("long rows", [rand(3, 5000, scale=3)]),
    ("many rows", [rand(300, 257)]),
    ("extremes", [np.array([[-1000.0, 1.0, 1000.0], [-1000.0, -1000.0, -999.0], [1000.0, 1000.0, 0.0]])]),
]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("case,arrays", SOFTMAX, ids=[c[0] for c in SOFTMAX])
def test_softmax(name, case, arrays):
    check(name, arrays, dim=-1, double=arrays[0].size < 5000)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_other_dim_takes_reference(name):
    x = tt.randn(3, 4, requires_grad=True)
    with tt.record() as tape:
        getattr(F, name)(x, dim=0)
    assert not {n.fn for n in tape.nodes} & FUSED


def test_softmax_all_neg_inf_row_is_nan_like_torch():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    a = F.softmax(tt.tensor(x), -1).numpy()
    b = torch.softmax(torch.tensor(x), -1).numpy()
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a[1], b[1])


def test_softmax_float32_and_float16():
    x = R.standard_normal((64, 300)).astype(np.float32) * 4
    for dt, tol in ((np.float32, 1e-6), (np.float16, 2e-3)):
        a = F.softmax(tt.tensor(x.astype(dt)), -1)
        assert a.dtype.np == dt
        np.testing.assert_allclose(a.numpy().astype(np.float64),
                                   torch.softmax(torch.tensor(x, dtype=torch.float64), -1).numpy(), atol=tol)


# ------------------------------------------------------------------ layer_norm / rms_norm
def _ln(shape, w=True, b=True):
    n = shape[-1:]
    return [rand(*shape, scale=2) + 1.0] + ([rand(*n) + 1] if w else []) + ([rand(*n)] if b else [])


LAYER_NORM = [
    ("affine", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), lambda x, w, b: TF.layer_norm(x, (x.shape[-1],), w, b), _ln((4, 7))),
    ("weight only", lambda x, w: F.layer_norm(x, (x.shape[-1],), w), lambda x, w: TF.layer_norm(x, (x.shape[-1],), w), _ln((2, 3, 8), b=False)),
    ("bias only", lambda x, b: F.layer_norm(x, (x.shape[-1],), None, b), lambda x, b: TF.layer_norm(x, (x.shape[-1],), None, b), [_ln((5, 6))[0], rand(6)]),
    ("no affine", lambda x: F.layer_norm(x, (x.shape[-1],)), lambda x: TF.layer_norm(x, (x.shape[-1],)), _ln((3, 9), False, False)),
    ("two dims", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3), lambda x, w, b: TF.layer_norm(x, (3, 4), w, b, eps=1e-3), [rand(2, 3, 4), rand(3, 4), rand(3, 4)]),
    ("one element", lambda x, w, b: F.layer_norm(x, (1,), w, b), lambda x, w, b: TF.layer_norm(x, (1,), w, b), _ln((3, 1))),
    ("long rows", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), lambda x, w, b: TF.layer_norm(x, (x.shape[-1],), w, b), _ln((3, 3000))),
    ("offset 1000", lambda x: F.layer_norm(x, (x.shape[-1],)), lambda x: TF.layer_norm(x, (x.shape[-1],)), [rand(4, 16) + 1000.0]),
    ("rms", lambda x, w: F.rms_norm(x, (x.shape[-1],), w), lambda x, w: TF.rms_norm(x, (x.shape[-1],), w), _ln((4, 10), b=False)),
    ("rms no weight", lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6), lambda x: TF.rms_norm(x, (x.shape[-1],), eps=1e-6), [rand(3, 2, 5)]),
    ("rms two dims", lambda x, w: F.rms_norm(x, (2, 5), w), lambda x, w: TF.rms_norm(x, (2, 5), w), [rand(3, 2, 5), rand(2, 5)]),
]


@pytest.mark.parametrize("case,fn,tfn,arrays", LAYER_NORM, ids=[c[0] for c in LAYER_NORM])
def test_layer_norm(case, fn, tfn, arrays):
    fused = _run(fn, arrays, {}, fused=True, double=True)
    ref = _run(fn, arrays, {}, fused=False, double=True)
    _close(fused, ref, 1e-9, 1e-7, f"{case} fused vs reference")
    # torch has no double backward for a bias without a weight
    compare_with_torch(fn, tfn, [a.copy() for a in arrays], double_backward=case != "bias only",
                       atol=1e-8, rtol=1e-6)


def test_layer_norm_mixed_dtypes_take_reference():
    x = tt.randn(2, 4, dtype=tt.float32, requires_grad=True)
    w = tt.randn(4, dtype=tt.float64, requires_grad=True)
    with tt.record() as tape:
        F.layer_norm(x, (4,), w)
    assert not {n.fn for n in tape.nodes} & FUSED


# ------------------------------------------------------------------ cross_entropy
def _t(shape, c, ignore=None):
    t = R.randint(0, c, size=shape).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


CROSS_ENTROPY = [
    ("plain", [rand(6, 5), _t(6, 5)], {}),
    ("sum", [rand(6, 5), _t(6, 5)], {"reduction": "sum"}),
    ("none", [rand(6, 5), _t(6, 5)], {"reduction": "none"}),
    ("ignore", [rand(7, 4), _t(7, 4, -100)], {}),
    ("ignore 2", [rand(7, 4), _t(7, 4, 2)], {"ignore_index": 2, "reduction": "none"}),
    ("smoothing", [rand(6, 5), _t(6, 5, -100)], {"label_smoothing": 0.2}),
    ("weights", [rand(6, 5), _t(6, 5, -100)], {"weight": np.linspace(0.5, 2, 5)}),
    ("weights smoothing", [rand(6, 5), _t(6, 5, -100)], {"weight": np.linspace(0.5, 2, 5), "label_smoothing": 0.3}),
    ("weights smoothing sum", [rand(6, 5), _t(6, 5, -100)], {"weight": np.linspace(0.5, 2, 5), "label_smoothing": 0.1, "reduction": "sum"}),
    ("spatial", [rand(2, 4, 3, 2), _t((2, 3, 2), 4, -100)], {"label_smoothing": 0.1}),
    ("spatial none", [rand(2, 4, 3), _t((2, 3), 4)], {"reduction": "none", "weight": np.linspace(1, 2, 4)}),
    ("vector", [rand(5), np.array(3)], {}),
    ("long rows", [rand(3, 3000, scale=3), _t(3, 3000)], {"label_smoothing": 0.1}),
    ("extremes", [np.array([[-1000.0, 0.0, 1000.0], [1000.0, 1000.0, -1000.0]]), np.array([0, 2])], {"label_smoothing": 0.05}),
    ("smoothing one", [rand(4, 3), _t(4, 3)], {"label_smoothing": 1.0}),
]


@pytest.mark.parametrize("case,arrays,kw", CROSS_ENTROPY, ids=[c[0] for c in CROSS_ENTROPY])
def test_cross_entropy(case, arrays, kw):
    check("cross_entropy", arrays, double=arrays[0].size < 3000, **kw)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_all_ignored(reduction):
    arrays = [rand(3, 4), np.full(3, -100)]
    fused = _run(F.cross_entropy, arrays, {"reduction": reduction}, fused=True)
    ref = _run(F.cross_entropy, arrays, {"reduction": reduction}, fused=False)
    _close(fused, ref, 0, 0, "all ignored")
    assert np.all(fused[1] == 0)


def test_cross_entropy_probability_targets_take_reference():
    x = tt.randn(3, 4, requires_grad=True)
    with tt.record() as tape:
        F.cross_entropy(x, F.softmax(tt.randn(3, 4), -1))
    assert FusedCrossEntropy not in {n.fn for n in tape.nodes}


def test_cross_entropy_bad_target_raises():
    with pytest.raises(IndexError, match="out of range"):
        F.cross_entropy(tt.randn(2, 3), tt.tensor([0, 3]))


# ------------------------------------------------------------------ attention
def _qkv(b, h, l, s, e, hkv=None, scale=1.0):
    return [rand(b, h, l, e, scale=scale), rand(b, hkv or h, s, e), rand(b, hkv or h, s, e)]


def _pad_mask(b, s, lengths):
    m = np.zeros((b, 1, 1, s), bool)
    for i, n in enumerate(lengths):
        m[i, ..., :n] = True
    return m


_rows_dead = R.uniform(size=(2, 1, 9, 11)) < 0.5
_rows_dead[0, 0, 3] = False  # a query that sees no key: zeros, zero gradients
_rows_dead[1, 0, 8] = False
_float_mask = np.where(R.uniform(size=(9, 11)) < 0.3, -np.inf, R.standard_normal((9, 11)))
_float_mask[2] = -np.inf

ATTENTION = [
    ("plain", _qkv(2, 2, 9, 11, 4), {}),
    ("T not a multiple of the block", _qkv(1, 2, 19, 19, 8), {}),
    ("T=1", _qkv(2, 1, 1, 1, 4), {}),
    ("one query", _qkv(1, 2, 1, 13, 4), {}),
    ("causal", _qkv(1, 2, 21, 21, 4), {"is_causal": True}),
    ("causal L<S", _qkv(1, 1, 7, 20, 4), {"is_causal": True}),
    ("causal L>S", _qkv(1, 1, 20, 9, 4), {"is_causal": True}),
    ("bool mask", _qkv(2, 1, 9, 11, 4), {"attn_mask": R.uniform(size=(9, 11)) < 0.7}),
    ("fully masked rows", _qkv(2, 1, 9, 11, 4), {"attn_mask": _rows_dead}),
    ("float mask, dead row", _qkv(2, 2, 9, 11, 4), {"attn_mask": _float_mask}),
    ("key padding", _qkv(3, 2, 10, 17, 4), {"attn_mask": _pad_mask(3, 17, [17, 9, 0])}),
    ("large scores", _qkv(1, 2, 9, 10, 4, scale=300.0), {}),
    ("scale", _qkv(1, 2, 9, 10, 4), {"scale": 0.37}),
    ("value dim", [rand(2, 9, 4), rand(2, 10, 4), rand(2, 10, 6)], {}),
    ("unbatched", [rand(9, 4), rand(12, 4), rand(12, 4)], {"is_causal": True}),
    ("gqa", _qkv(2, 4, 9, 10, 4, hkv=2), {"enable_gqa": True}),
    ("gqa causal padding", _qkv(2, 6, 9, 9, 4, hkv=2), {"enable_gqa": True, "attn_mask": _pad_mask(2, 9, [9, 4])}),
]


@pytest.mark.parametrize("case,arrays,kw", ATTENTION, ids=[c[0] for c in ATTENTION])
def test_attention(case, arrays, kw):
    check("scaled_dot_product_attention", arrays, double=arrays[0].size <= 400, **kw)


def test_attention_dead_rows_are_zero_with_zero_grads():
    q, k, v = (tt.tensor(a, requires_grad=True) for a in _qkv(1, 1, 4, 6, 3))
    m = np.ones((4, 6), bool)
    m[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(m))
    out.sum().backward()
    assert np.all(out.detach().numpy()[0, 0, 1] == 0) and np.all(q.grad.numpy()[0, 0, 1] == 0)
    assert np.all(np.isfinite(k.grad.numpy())) and np.all(np.isfinite(v.grad.numpy()))


def test_attention_float16_on_cpu():
    q, k, v = _qkv(1, 2, 33, 33, 16)
    out = F.scaled_dot_product_attention(*(tt.tensor(a.astype(np.float16)) for a in (q, k, v)), is_causal=True)
    assert out.dtype == tt.float16
    ref = TF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), is_causal=True)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy(), atol=5e-3)


@pytest.mark.parametrize("kw", [{"dropout_p": 0.5}, {}])
def test_attention_paths(kw):
    """dropout and a mask that needs a gradient take the reference path."""
    q, k, v = (tt.tensor(a, requires_grad=True) for a in _qkv(1, 1, 4, 4, 2))
    m = tt.randn(4, 4, requires_grad=not kw)
    with tt.record() as tape:
        F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    assert FlashAttention not in {n.fn for n in tape.nodes}


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("causal", [False, True])
def test_attention_memory_is_linear_in_T(monkeypatch, causal):
    """Peak memory of forward + backward: the fused path grows linearly in T, the
    reference (T x T scores) quadratically. tools/bench.py shows T = 8192."""
    monkeypatch.setattr(k_attention, "KEY_BLOCK", 128)
    monkeypatch.setattr(k_attention, "QUERY_BLOCK", 256)
    monkeypatch.setattr(k_attention, "BLOCK_ELEMS", 1 << 22)

    def step(T, fused):
        q, k, v = (tt.tensor(R.standard_normal((1, 1, T, 32)).astype(np.float32), requires_grad=True)
                   for _ in range(3))
        with tt.kernels.use_fusion(fused):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()

    fused = [_peak(lambda: step(T, True)) for T in (512, 1024, 2048)]
    ref = _peak(lambda: step(2048, False))
    assert fused[2] < 2.5 * fused[1] < 6.25 * fused[0]  # about 2x per doubling: linear
    assert fused[2] * 8 < ref, (fused, ref)             # the reference holds several T x T arrays


# ------------------------------------------------------------------ the switch
def test_fusion_switch(monkeypatch):
    x = tt.randn(2, 3, requires_grad=True)

    def ops():
        with tt.record() as tape:
            F.softmax(x, -1)
        return {n.fn for n in tape.nodes} & FUSED

    assert ops() == {FusedSoftmax}
    with tt.kernels.use_fusion(False):
        assert not ops()
    with tt.kernels.use_fusion(False, ops="attention"):
        assert ops() == {FusedSoftmax}
    with tt.kernels.use_fusion(False, ops=["softmax"]):
        assert not ops()
    assert ops() == {FusedSoftmax}
    prev = tt.kernels.set_fusion(False)
    try:
        assert not ops()
    finally:
        tt.kernels.restore_fusion(prev)
    assert ops() == {FusedSoftmax}
    with pytest.raises(ValueError, match="unknown op family"):
        tt.kernels.use_fusion(False, ops="softmaxx")


def test_fusion_env_var():
    import subprocess
    import sys
    code = "import tinytensor as tt; print(tt.kernels.fusion_enabled())"
    env = {"TINYTENSOR_FUSION": "0", "PATH": ""}
    import os
    env = dict(os.environ, TINYTENSOR_FUSION="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------ CUDA (gpu marker)
GPU_TOL = {"float32": (2e-5, 1e-4), "float16": (3e-3, 1e-2)}


def gpu_check(fn, arrays, kw, dtype, tol=None):
    """fn on cuda in `dtype` (fused) against the CPU reference in float64."""
    atol, rtol = tol or GPU_TOL[dtype]
    got = _run(fn, arrays, kw, device="cuda", dtype=np.dtype(dtype).type, fused=True)
    # the reference sees the same rounded inputs
    rounded = [a.astype(dtype).astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    rkw = {k: (v.astype(dtype).astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
           for k, v in kw.items()}
    want = _run(fn, rounded, rkw, fused=False)
    for i, (a, b) in enumerate(zip(got, want)):
        scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
        np.testing.assert_allclose(a, b, atol=atol * scale, rtol=rtol, equal_nan=True,
                                   err_msg=f"{'output' if i == 0 else f'grad {i - 1}'}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(7, 5), (300, 128), (4, 1000), (3, 1024), (5, 1025), (2, 4097), (3, 30011)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_gpu_softmax(name, shape, dtype):
    gpu_check(lambda x: getattr(F, name)(x, -1), [rand(*shape, scale=3)], {}, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 7, 64, 1000, 4096, 12289])
@pytest.mark.parametrize("rms", [False, True])
def test_gpu_layer_norm(rms, n, dtype):
    if rms:
        gpu_check(lambda x, w: F.rms_norm(x, (n,), w, eps=1e-5), [rand(37, n), rand(n)], {}, dtype)
    else:
        gpu_check(lambda x, w, b: F.layer_norm(x, (n,), w, b), [rand(37, n) + 3, rand(n), rand(n)], {}, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case,arrays,kw", CROSS_ENTROPY + [
    ("vocab", [rand(64, 32003), _t(64, 32003, -100)], {"label_smoothing": 0.1}),
    ("vocab aligned", [rand(16, 32768), _t(16, 32768, -100)], {"weight": R.uniform(0.5, 1.5, 32768)})],
    ids=[c[0] for c in CROSS_ENTROPY] + ["vocab", "vocab aligned"])
def test_gpu_cross_entropy(case, arrays, kw, dtype):
    gpu_check(F.cross_entropy, arrays, kw, dtype)


GPU_ATTENTION = [
    ("plain", _qkv(2, 3, 100, 100, 64), {}),
    ("T=1", _qkv(1, 2, 1, 1, 64), {}),
    ("causal", _qkv(1, 2, 130, 130, 64), {"is_causal": True}),
    ("causal L<S", _qkv(1, 2, 70, 150, 64), {"is_causal": True}),
    ("d128", _qkv(1, 2, 129, 97, 128), {}),
    ("d128 causal", _qkv(1, 2, 200, 200, 128), {"is_causal": True}),
    ("key padding", _qkv(3, 2, 65, 77, 64), {"attn_mask": _pad_mask(3, 77, [77, 30, 0])}),
    ("gqa", _qkv(2, 4, 80, 80, 64, hkv=2), {"enable_gqa": True, "is_causal": True}),
    ("d40 simt", _qkv(1, 2, 50, 70, 40), {}),
    ("d96 simt causal", _qkv(1, 2, 70, 70, 96), {"is_causal": True}),
    ("large scores", _qkv(1, 1, 64, 64, 64, scale=30.0), {}),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case,arrays,kw", GPU_ATTENTION, ids=[c[0] for c in GPU_ATTENTION])
def test_gpu_attention(case, arrays, kw, dtype):
    tol = (2e-5, 1e-4) if dtype == "float32" else (1e-2, 2e-2)
    gpu_check(F.scaled_dot_product_attention, arrays, kw, dtype, tol)


@pytest.mark.gpu
def test_gpu_attention_general_mask_takes_reference():
    q, k, v = (tt.tensor(a.astype(np.float32), device="cuda") for a in _qkv(1, 1, 8, 8, 64))
    m = tt.tensor(R.uniform(size=(8, 8)) < 0.5, device="cuda")
    with tt.record() as tape:
        F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert FlashAttention not in {n.fn for n in tape.nodes}
