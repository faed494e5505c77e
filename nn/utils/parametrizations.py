"""nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations (torch's
current form; the state-dict keys are torch's: `parametrizations.weight.original0/1`, and
`parametrizations.weight.original` with `parametrizations.weight.0._u/_v`)."""
import tinytensor as tt

from ..module import Module
from ._norms import (assign, default_spectral_dim, norm_except_dim, normalize, sigma,
                     weight_from, weight_matrix)
from .parametrize import register_parametrization

__all__ = ["weight_norm", "spectral_norm"]


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
