"""torch.nn.utils.weight_norm / remove_weight_norm: the older hook form of weight
normalization (Salimans & Kingma, 2016). `weight` becomes `weight_g` (the norms) and
`weight_v` (the directions), and a forward pre-hook recomputes weight = g * v / ||v||
before every call. torch deprecates it for nn.utils.parametrizations.weight_norm, and
says so with the same FutureWarning."""
import warnings

from ..module import Parameter
from ._hook_form import check_new, install, original, remove
from ._norms import norm_except_dim, weight_from


class _WeightNormHook:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        return weight_from(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"),
                           self.dim)

    def __call__(self, module, args):
        setattr(module, self.name, self.compute(module))


def weight_norm(module, name="weight", dim=0):
    warnings.warn("nn.utils.weight_norm is deprecated in favor of "
                  "nn.utils.parametrizations.weight_norm.", FutureWarning, stacklevel=2)
    check_new(module, name, "weight_norm")
    if dim is None:
        dim = -1
    weight = original(module, name, "weight_norm")
    hook = _WeightNormHook(name, dim)
    delattr(module, name)
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, hook.compute(module))
    return install(module, name, "weight_norm", hook)


def remove_weight_norm(module, name="weight"):
    return remove(module, name, "weight_norm", ("_g", "_v"), lambda hook: hook.compute(module))
