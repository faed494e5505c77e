"""nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations (torch's
current form; the state-dict keys are torch's: `parametrizations.weight.original0/1`, and
`parametrizations.weight.original` with `parametrizations.weight.0._u/_v`)."""
import tinytensor as tt

from ..module import Module
from ._norms import (assign, default_spectral_dim, norm_except_dim, normalize, sigma,
                     weight_from, weight_matrix)
from .parametrize import register_parametrization

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_from(weight_g, weight_v, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """weight = g * v / ||v|| with g (`original0`) and v (`original1`) trained."""
    register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma from power iteration on the weight as a matrix (u first, then
    v, as torch's parametrization; 15 steps when created, n_power_iterations per training
    call). A 1-D weight is just normalized."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, got "
                             f"{n_power_iterations}")
        ndim = weight.ndim
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"spectral_norm: dim {dim} is out of range for a {ndim}-d weight")
        self.dim = dim % ndim if ndim else 0
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if ndim > 1:
            with tt.no_grad():
                w_mat = weight_matrix(weight, self.dim)
                h, w = w_mat.shape
                kw = dict(dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", normalize(tt.randn(h, **kw), eps))
                self.register_buffer("_v", normalize(tt.randn(w, **kw), eps))
                self._power_method(w_mat, 15)

    def _power_method(self, w_mat, steps):
        with tt.no_grad():
            for _ in range(steps):
                assign(self._u, normalize((w_mat @ self._v.reshape(-1, 1)).reshape(-1), self.eps))
                assign(self._v, normalize((w_mat.mT @ self._u.reshape(-1, 1)).reshape(-1),
                                          self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, self.eps)
        w_mat = weight_matrix(weight, self.dim)
        if self.training:
            self._power_method(w_mat, self.n_power_iterations)
        return weight / sigma(self._u.clone(), w_mat, self._v.clone())

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    weight = getattr(module, name, None)
    if not isinstance(weight, tt.Tensor):
        raise ValueError(f"spectral_norm: module {type(module).__name__} has no parameter or "
                         f"buffer with name '{name}'")
    dim = default_spectral_dim(module) if dim is None else dim
    register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---------------------------------------------------------------------- orthogonal
_ORTH_MAPS = ("matrix_exp", "cayley", "householder")


def _linalg():
    """tt.linalg (issue 23's namespace), looked up at call time."""
    linalg = getattr(tt, "linalg", None)
    if linalg is None or not hasattr(linalg, "matrix_exp"):
        raise NotImplementedError("orthogonal: needs tt.linalg (matrix_exp, solve, qr, "
                                  "householder_product), which this build does not have")
    return linalg


def _make_orthogonal(A):
    """The Q of A = QR with diag(R) >= 0 (A tall)."""
    q, r = _linalg().qr(A)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _is_orthogonal(Q):
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * (2.220446049250313e-16 if Q.dtype == tt.float64 else 1.1920929e-07)
    eye = tt.eye(k, dtype=Q.dtype, device=Q.device)
    return bool(tt.allclose(Q.mT @ Q, eye, atol=eps))


class _Orthogonal(Module):
    """weight = base @ map(X): X starts at -I, so the weight starts at `base`, the original
    weight made orthogonal (completed by a random orthogonal block when not square); the map
    takes the lower triangle of X to an orthogonal matrix (matrix_exp or Cayley of X - X^T,
    or Householder reflectors). Real tensors; use_trivialization=True (torch's default)."""

    def __init__(self, weight, orthogonal_map):
        super().__init__()
        self.shape, self.orthogonal_map = tuple(weight.shape), orthogonal_map
        self.register_buffer("base", None)

    def forward(self, X):
        la = _linalg()
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:  # embed the tall matrix in a square one
                X = tt.cat([X, tt.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype,
                                        device=X.device)], dim=-1)
            A = X - X.mT  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                Q = la.matrix_exp(A)
            else:  # Cayley: (I - A/2)^-1 (I + A/2)
                eye = tt.eye(n, dtype=A.dtype, device=A.device)
                Q = la.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = la.householder_product(A, tau)
            # X's diagonal holds the +-1 signs; torch casts it to int (truncation), so it is a
            # constant without gradient: the same here
            Q = Q * X.detach().diagonal(dim1=-2, dim2=-1).trunc().unsqueeze(-2)
        Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"orthogonal: expected a matrix or batch of matrices of shape "
                             f"{self.shape}, got {tuple(Q.shape)}")
        with tt.no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            if n < k:
                Q, n, k = Q.mT, k, n
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete Q to an n x n orthogonal matrix
                extra = tt.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(tt.cat([Q, extra], dim=-1))
            self.base = Q
            # -I: every map sends it to I (Householder through its +-1 diagonal)
            eye = tt.eye(Q_init.shape[-2], Q_init.shape[-1], dtype=Q_init.dtype,
                         device=Q_init.device)
            return -eye.expand(*Q_init.shape).clone()


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep `module.<name>` orthogonal (rows or columns orthonormal), as torch's."""
    weight = getattr(module, name, None)
    if not isinstance(weight, tt.Tensor):
        raise ValueError(f"orthogonal: module {type(module).__name__} has no parameter or buffer "
                         f"with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"orthogonal: expected a matrix or batch of matrices, got a tensor of "
                         f"{weight.ndim} dimensions")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTH_MAPS:
        raise ValueError(f'orthogonal: orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder", got {orthogonal_map!r}')
    if not use_trivialization:
        raise NotImplementedError("orthogonal: use_trivialization=False is not supported (its "
                                  "Householder inverse needs geqrf's raw reflectors)")
    register_parametrization(module, name, _Orthogonal(weight, orthogonal_map), unsafe=True)
    return module
