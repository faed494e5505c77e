"""isclose / allclose and var_mean / std_mean against PyTorch: the moments with gradients and
double backward in float64 (each case is fn(m, *inputs), m tinytensor or torch)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import check

CASES = {
    "var_mean": (lambda m, x: m.var_mean(x), [(3, 4)]),
    "var_mean_dim": (lambda m, x: m.var_mean(x, 1), [(3, 4)]),
    "var_mean_dims_keepdim": (lambda m, x: m.var_mean(x, (0, 2), keepdim=True), [(2, 3, 4)]),
    "var_mean_correction0": (lambda m, x: m.var_mean(x, -1, correction=0), [(3, 4)]),
    "var_mean_correction2": (lambda m, x: m.var_mean(x, 0, correction=2), [(5, 2)]),
    "var_mean_unbiased_false": (lambda m, x: m.var_mean(x, 1, False), [(3, 4)]),
    "std_mean": (lambda m, x: m.std_mean(x), [(3, 4)]),
    "std_mean_dim_keepdim": (lambda m, x: m.std_mean(x, 0, keepdim=True), [(3, 4)]),
    "std_mean_correction0": (lambda m, x: m.std_mean(x, (0, 1), correction=0), [(2, 3, 2)]),
}
test_stats, test_stats_float32, test_stats_cuda = table_tests(CASES, ["var_mean_dim", "std_mean"], check)

A = np.array([1.0, 1.0 + 1e-6, np.inf, -np.inf, np.nan, 0.0, 1e-9, 100.0, np.inf])
B = np.array([1.0, 1.0, np.inf, np.inf, np.nan, 1e-8, 0.0, 100.001, np.nan])


@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 1e-4}, {"atol": 0.0, "rtol": 0.0},
                                {"atol": 1e-1}], ids=str)
def test_isclose(kw):
    got = tt.tensor(A).isclose(tt.tensor(B), **kw)
    want = torch.tensor(A).isclose(torch.tensor(B), **kw)
    assert got.dtype is tt.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for i in range(len(A)):  # allclose on every entry alone, so both answers occur
        assert tt.tensor(A[i:i + 1]).allclose(tt.tensor(B[i:i + 1]), **kw) is \
            torch.tensor(A[i:i + 1]).allclose(torch.tensor(B[i:i + 1]), **kw)


def test_isclose_broadcasts_and_takes_integers():
    a, b = np.arange(6).reshape(2, 3), np.array([0, 1, 3])
    np.testing.assert_array_equal(tt.isclose(tt.tensor(a), tt.tensor(b)).numpy(),
                                  torch.isclose(torch.tensor(a), torch.tensor(b)).numpy())
    assert tt.allclose(tt.tensor(a[:, :2]), tt.tensor(b[:2])) is False
    assert tt.allclose(tt.tensor(a[:1, :2]), tt.tensor(b[:2])) is True


def test_isclose_errors():
    with pytest.raises(TypeError, match=r"isclose: float32 did not match int64"):
        tt.isclose(tt.tensor([1.0]), tt.tensor([1]))
    with pytest.raises(ValueError, match=r"isclose: rtol and atol must be non-negative, got rtol=-1.0"):
        tt.isclose(tt.tensor([1.0]), tt.tensor([1.0]), rtol=-1.0)
