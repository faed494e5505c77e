"""Small-head attention in C (kernels/c_attention.py): the forward and backward of the
flash path, heads split over the C pool, equal to the NumPy path to rounding and to torch."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.kernels import c_attention, c_eager
from tinytensor.ops import attention

CASES = [((2, 4, 64, 32), 64, 32, True, np.float32),     # nanoGPT's heads, causal
         ((2, 3, 50, 24), 70, 16, False, np.float64),    # more keys than queries, Ev != E
         ((1, 3, 90, 20), 70, 20, True, np.float32)]     # more queries than keys, causal


@pytest.fixture
def c_path(monkeypatch):
    if not c_eager.enabled():
        pytest.skip("no C compiler")
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1)   # the tests run one thread


def _arrays(rng, shape, S, Ev, dtype):
    q = rng.standard_normal(shape).astype(dtype)
    k = rng.standard_normal(shape[:-2] + (S, shape[-1])).astype(dtype)
    v = rng.standard_normal(shape[:-2] + (S, Ev)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("shape, S, Ev, causal, dtype", CASES)
def test_the_c_kernels_give_the_numpy_paths_results(c_path, monkeypatch, shape, S, Ev, causal, dtype):
    rng = np.random.default_rng(11)
    q, k, v = _arrays(rng, shape, S, Ev, dtype)
    scale = 1.0 / np.sqrt(shape[-1])
    before = dict(c_eager.calls)
    out, stats = attention._cpu_forward(q, k, v, None, scale, causal, 1)
    g = rng.standard_normal(out.shape).astype(dtype)
    grads = attention._cpu_backward(q, k, v, out, stats, g, None, scale, causal, 1)
    for name in ("attention_forward", "attention_backward"):
        assert c_eager.calls.get(name, 0) == before.get(name, 0) + 1, name
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1 << 30)   # the NumPy path
    ref_out, ref_stats = attention._cpu_forward(q, k, v, None, scale, causal, 1)
    ref_grads = attention._cpu_backward(q, k, v, ref_out, ref_stats, g, None, scale, causal, 1)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for got, want in zip((out, stats) + grads, (ref_out, ref_stats) + ref_grads):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_sdpa_through_the_c_kernels_matches_torch(c_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    q, k, v = _arrays(rng, (2, 4, 64, 32), 64, 32, np.float64)
    ours = [tt.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    before = c_eager.calls.get("attention_backward", 0)
    out = F.scaled_dot_product_attention(*ours, is_causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    g = rng.standard_normal(q.shape)
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    assert c_eager.calls.get("attention_backward", 0) == before + 1
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_masks_grouped_heads_and_one_thread_take_the_numpy_path(c_path, monkeypatch):
    rng = np.random.default_rng(13)
    q, k, v = _arrays(rng, (2, 4, 64, 32), 64, 32, np.float32)
    mask = np.ones((64, 64), bool)
    assert c_attention.forward(q, k, v, mask, 0.2, False, 1) is None
    assert c_attention.forward(q, k[:, :2], v[:, :2], None, 0.2, False, 2) is None
    assert c_attention.forward(q, k, v, None, 0.2, True, 1) is not None
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1 << 30)
    assert c_attention.forward(q, k, v, None, 0.2, True, 1) is None
