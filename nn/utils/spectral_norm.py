"""torch.nn.utils.spectral_norm / remove_spectral_norm: the hook form of spectral
normalization (Miyato et al., 2018). `weight` becomes `weight_orig`, with buffers
`weight_u`, `weight_v` (the power iteration's vectors); before each call the weight is
weight_orig / sigma, sigma = u . (W v), after `n_power_iterations` steps in training
mode (v first, then u, as torch's hook form does)."""
import tinytensor as tt

from ._hook_form import check_new, install, original, remove
from ._norms import assign, default_spectral_dim, normalize, sigma, weight_matrix


class _SpectralNormHook:
    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, got "
                             f"{n_power_iterations}")
        self.name, self.n, self.dim, self.eps = name, n_power_iterations, dim, eps

    def compute(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        w_mat = weight_matrix(weight, self.dim)
        if do_power_iteration:
            with tt.no_grad():
                for _ in range(self.n):
                    assign(v, normalize((w_mat.mT @ u.reshape(-1, 1)).reshape(-1), self.eps))
                    assign(u, normalize((w_mat @ v.reshape(-1, 1)).reshape(-1), self.eps))
            u, v = u.clone(), v.clone()
        return weight / sigma(u, w_mat, v)

    def __call__(self, module, args):
        setattr(module, self.name, self.compute(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    check_new(module, name, "spectral_norm")
    dim = default_spectral_dim(module) if dim is None else dim
    hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
    weight = original(module, name, "spectral_norm")
    with tt.no_grad():
        h, w = weight_matrix(weight, dim).shape
        kw = dict(dtype=weight.dtype, device=weight.device)
        u, v = normalize(tt.randn(h, **kw), eps), normalize(tt.randn(w, **kw), eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    return install(module, name, "spectral_norm", hook)


def remove_spectral_norm(module, name="weight"):
    return remove(module, name, "spectral_norm", ("_orig", "_u", "_v"),
                  lambda hook: hook.compute(module, do_power_iteration=False))
