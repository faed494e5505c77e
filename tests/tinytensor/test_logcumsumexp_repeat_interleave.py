"""Two differences the OpInfo conformance run found (issue 25): logcumsumexp's float32
gradient with inputs near 1e4, and repeat_interleave's output_size."""
import numpy as np
import pytest
import torch

import tinytensor as tt


def test_logcumsumexp_float32_near_1e4_accumulates_like_torch():
    """A float32 running log-sum-exp near 1e4 is off by ~1e-3 per step; exp turned that into a
    0.1% gradient error. Accumulated in float64 (as torch does), it is float32-rounding close."""
    x = (1e4 + np.random.default_rng(0).normal(size=(40,))).astype(np.float32)
    g = np.random.default_rng(1).normal(size=(40,)).astype(np.float32)
    t = tt.tensor(x, requires_grad=True)
    (gx,) = tt.grad([tt.logcumsumexp(t, 0)], [t], [tt.tensor(g)])

    def torch_grad(dtype):
        r = torch.tensor(x, dtype=dtype, requires_grad=True)
        return torch.autograd.grad(torch.logcumsumexp(r, 0), r, torch.tensor(g, dtype=dtype))[0].numpy()
    exact, torch32 = torch_grad(torch.float64), torch_grad(torch.float32)
    floor = 8 * np.finfo(np.float32).eps * np.abs(exact).max()
    assert (np.abs(gx.numpy() - exact) <= 2 * np.abs(torch32 - exact) + floor).all()


def test_repeat_interleave_output_size():
    x = np.arange(8.0).reshape(4, 2)
    reps = np.array([1, 0, 3, 2])
    got = tt.repeat_interleave(tt.tensor(x), tt.tensor(reps), dim=0, output_size=6)
    want = torch.repeat_interleave(torch.tensor(x), torch.tensor(reps), dim=0, output_size=6)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tt.tensor(x).repeat_interleave(2, 1, output_size=4).shape == (4, 4)
    with pytest.raises(Exception, match=r"repeat_interleave: output_size=5 does not match the "
                                        r"repeated length 6 along dimension 0"):
        tt.repeat_interleave(tt.tensor(x), tt.tensor(reps), dim=0, output_size=5)
