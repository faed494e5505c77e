"""tt.linalg.eig / eigvals against torch (issue 23): values, and first and second order
gradients through gauge-invariant functions of the eigenvectors, real and complex A."""
import numpy as np
import pytest

import tinytensor as tt
from tests.tinytensor.complex_check import check, crandn, rrandn

A_REAL = rrandn(3, 3, seed=3)
A_COMPLEX = crandn(2, 3, 3, seed=3)


@pytest.mark.parametrize("a", [A_REAL, A_COMPLEX, rrandn(2, 4, 4, seed=8)], ids=["real", "complex", "batch"])
def test_eigvals(a):
    check(lambda m, x: m.linalg.eigvals(x), a)


@pytest.mark.parametrize("a", [A_REAL, A_COMPLEX], ids=["real", "complex"])
def test_eig_gauge_invariant_losses(a):
    check(lambda m, x: m.linalg.eig(x).eigenvectors.abs(), a)
    check(lambda m, x: (lambda r: r[1] * r[1].conj() * r[0].unsqueeze(-2))(m.linalg.eig(x)), a)


def test_eig_reconstructs_and_returns_named_pair():
    a = tt.tensor(A_REAL)
    L, V = tt.linalg.eig(a)
    assert L.dtype is tt.complex128 and V.dtype is tt.complex128
    rebuilt = V @ (L.unsqueeze(-1) * tt.linalg_eig.Inv.apply(V))
    np.testing.assert_allclose(rebuilt.numpy(), A_REAL, atol=1e-12)
    assert tt.linalg.eig(tt.tensor(A_REAL, dtype=tt.float32)).eigenvalues.dtype is tt.complex64


def test_refusals():
    with pytest.raises(tt.OpError, match="linalg.eig: A must be a batch of square matrices"):
        tt.linalg.eig(tt.ones(2, 3))
    with pytest.raises(TypeError, match="linalg.eigvals: expects a float32"):
        tt.linalg.eigvals(tt.ones(2, 2, dtype=tt.int64))
