"""Eager matmuls on the C pool (compiler/eager_gemm.py): big float ones run as the pool's
gemm jobs and give NumPy's products to rounding; the rest, and layouts BLAS cannot read,
run NumPy's matmul; gradients flow as before."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler import eager_gemm
from tinytensor.compiler.codegen import threads
from tinytensor.kernels import c_eager

from .test_threads import _gemm_cases


@pytest.fixture
def two_threads(monkeypatch):
    """Eager code sees 2 threads configured (the tests run OpenBLAS at one)."""
    if threads.blas() is None or not c_eager.enabled():
        pytest.skip("needs NumPy's OpenBLAS and a C compiler")
    monkeypatch.setattr(threads, "default_threads", lambda: 2)
    c_eager.calls.pop("matmul", None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_matmuls_run_on_the_pool_and_give_numpys_products(two_threads, dtype):
    rng = np.random.default_rng(7)
    eps = np.finfo(dtype).eps
    for name, fn, arrays in _gemm_cases(rng, dtype):
        before = c_eager.calls.get("matmul", 0)
        got = fn(*[tt.tensor(a) for a in arrays]).numpy()
        ran = c_eager.calls.get("matmul", 0) - before
        prev = c_eager.set_enabled(False)   # NumPy's matmul, the reference
        try:
            want = fn(*[tt.tensor(a) for a in arrays]).numpy()
        finally:
            c_eager.set_enabled(prev)
        k = arrays[0].shape[-1]
        atol = 8 * eps * k * max(float(np.abs(a).max()) for a in arrays) ** 2
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=name)
        assert ran == (0 if "not BLAS" in name else 1), name


def test_small_matmuls_and_other_dtypes_stay_numpys(two_threads):
    a = tt.randn(8, 8)
    assert eager_gemm.matmul(a.numpy(), a.numpy()) is None                      # too small
    big = np.ones((256, 256), np.int64)
    assert eager_gemm.matmul(big, big) is None                                  # not float
    x = np.ones((256, 256), np.float32)
    assert eager_gemm.matmul(x, x.astype(np.float64)) is None                   # mixed
    assert eager_gemm.matmul(x, x) is not None


def test_a_big_endian_matmul_stays_numpys(two_threads):
    """'>f8' has dtype.char 'd' too: the gemm job would read its bytes as native doubles."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((256, 256)).astype(">f8") for _ in range(2))
    assert eager_gemm.matmul(a, b) is None
    np.testing.assert_allclose((tt.tensor(a) @ tt.tensor(b)).numpy(), a.astype(np.float64) @ b, rtol=0, atol=1e-12)


def test_gradients_through_pool_matmuls_match_torch(two_threads):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((2, 128, 96)), rng.standard_normal((96, 200))
    ta, tb = tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)
    (tt.tanh(ta @ tb)).sum().backward()
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.tanh(xa @ xb).sum().backward()
    assert c_eager.calls.get("matmul", 0) >= 3   # forward and both gradients' products
    np.testing.assert_allclose(ta.grad.numpy(), xa.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tb.grad.numpy(), xb.grad.numpy(), rtol=1e-10, atol=1e-10)
