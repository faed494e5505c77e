"""float16 products on the CPU: float32 inside, rounded once (as torch), not NumPy's scalar loop."""

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F


def _pair(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float16)
    return tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


@pytest.mark.parametrize("sa, sb", [((33, 70), (70, 17)), ((2, 5, 64), (64, 9)), ((70,), (70, 3))])
def test_float16_matmul_and_its_gradients_match_torch(sa, sb):
    a, ta = _pair(sa, 0)
    b, tb = _pair(sb, 1)
    out, tout = a @ b, ta @ tb
    assert out.dtype is tt.float16
    # float32 sums in another order: equal up to a float16 ulp where the sum cancels
    ref = (a.detach().numpy().astype(np.float64) @ b.detach().numpy().astype(np.float64))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-3, atol=1e-2)
    assert np.abs(out.detach().numpy() - ref).max() <= np.abs(tout.detach().numpy() - ref).max() + 1e-2
    g = np.random.default_rng(2).standard_normal(tout.shape).astype(np.float16)
    out.backward(tt.tensor(g))
    tout.backward(torch.tensor(g))
    # torch reduces the broadcast batch of b's gradient in another order: a few float16 ulps
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=2e-3, atol=2e-3)


def test_float16_einsum_and_conv_match_torch():
    a, ta = _pair((4, 6, 8), 3)
    b, tb = _pair((8, 5), 4)
    np.testing.assert_allclose(tt.einsum("bij,jk->bik", a, b).detach().numpy(),
                               torch.einsum("bij,jk->bik", ta, tb).detach().numpy(), rtol=1e-3, atol=1e-2)
    x, tx = _pair((2, 3, 9, 9), 5)
    w, tw = _pair((4, 3, 3, 3), 6)
    np.testing.assert_allclose(F.conv2d(x, w).detach().numpy(),
                               torch.nn.functional.conv2d(tx, tw).detach().numpy(), rtol=2e-3, atol=2e-3)


def test_float16_matmul_is_blas_float32_rounded_once():
    # NumPy's float16 matmul is a scalar loop (40x float32 before the fix): the product must
    # be float32 BLAS's, rounded to float16 once. Bits, not time (no test depends on a clock)
    x16, w16 = tt.randn(128, 256).half(), tt.randn(256, 256).half()
    want = (x16.data.astype(np.float32) @ w16.data.astype(np.float32)).astype(np.float16)
    assert (x16 @ w16).data.tobytes() == want.tobytes()
