"""diff, gradient, trapezoid / trapz, cumulative_trapezoid, cov, corrcoef, renorm and equal
against PyTorch: values, gradients and double backward in float64 (each case is
fn(m, *inputs), m tinytensor or torch)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import check

X = np.array([0.0, 0.5, 1.5, 1.75, 3.0])

CASES = {
    "diff": (lambda m, x: m.diff(x), [(3, 5)]),
    "diff_n2_dim0": (lambda m, x: m.diff(x, 2, 0), [(5, 3)]),
    "diff_prepend_append": (lambda m, x, p, a: m.diff(x, 1, 1, p, a), [(2, 3), (2, 1), (2, 2)]),
    "gradient": (lambda m, x: m.gradient(x), [(4, 5)]),
    "gradient_spacing_edge2": (lambda m, x: m.gradient(x, spacing=[0.5, 2.0], edge_order=2), [(4, 5)]),
    "gradient_coordinates": (lambda m, x, c: m.gradient(x, spacing=(c,), dim=1, edge_order=2),
                             [(2, 5), X]),
    "gradient_coordinates_edge1": (lambda m, x, c: m.gradient(x, spacing=(c,), dim=0), [(5, 2), X]),
    "trapezoid": (lambda m, y: m.trapezoid(y), [(3, 4)]),
    "trapezoid_x": (lambda m, y, x: m.trapezoid(y, x, dim=0), [(5, 2), X]),
    "trapezoid_dx": (lambda m, y: m.trapezoid(y, dx=0.3, dim=1), [(2, 4)]),
    "trapz": (lambda m, y, x: m.trapz(y, x), [(2, 5), X]),
    "cumulative_trapezoid": (lambda m, y, x: m.cumulative_trapezoid(y, x), [(2, 5), X]),
    "cov": (lambda m, x: m.cov(x), [(3, 6)]),
    "cov_correction0_1d": (lambda m, x: m.cov(x, correction=0), [(6,)]),
    "cov_aweights": (lambda m, x, w: m.cov(x, aweights=w.exp()), [(2, 5), (5,)]),
    "corrcoef": (lambda m, x: m.corrcoef(x), [(3, 6)]),
    "renorm": (lambda m, x: m.renorm(x, 2, 0, 1.5), [(3, 4)]),
    # p=3, not 1: torch's double backward of a 1-norm renorm imports torch._dynamo (6 s)
    "renorm_p3_dim1": (lambda m, x: m.renorm(x, 3, 1, 2.0), [(3, 4)]),
}
test_series_stats, test_series_stats_float32, test_series_stats_cuda = table_tests(
    CASES, ["diff", "gradient", "cov", "trapezoid_x"], check)


def test_cov_frequency_weights_and_diff_bool():
    x, f = np.random.default_rng(0).normal(size=(2, 4)), np.array([1, 3, 0, 2])
    np.testing.assert_allclose(tt.cov(tt.tensor(x), fweights=tt.tensor(f)).numpy(),
                               torch.cov(torch.tensor(x), fweights=torch.tensor(f)).numpy(), rtol=1e-12)
    b = np.array([True, False, False, True])
    assert tt.diff(tt.tensor(b)).tolist() == torch.diff(torch.tensor(b)).tolist()


def test_equal():
    a = tt.tensor([1.0, 2.0])
    assert tt.equal(a, tt.tensor([1.0, 2.0])) is True
    assert tt.equal(a, tt.tensor([1.0, 3.0])) is False
    assert tt.equal(a, tt.tensor([[1.0, 2.0]])) is False


def test_errors_name_the_op():
    with pytest.raises(ValueError, match=r"gradient: each dim needs at least edge_order \+ 1 = 3"):
        tt.gradient(tt.ones(2), edge_order=2)
    with pytest.raises(ValueError, match=r"cov: expected a 1-d or 2-d input, got shape \(1, 2, 3\)"):
        tt.cov(tt.ones(1, 2, 3))
    with pytest.raises(ValueError, match=r"trapezoid: x has 3 entries but y has 4"):
        tt.trapezoid(tt.ones(4), tt.ones(3))
