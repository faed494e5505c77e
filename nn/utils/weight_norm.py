"""torch.nn.utils.weight_norm / remove_weight_norm: the older hook form of weight
normalization (Salimans & Kingma, 2016). `weight` becomes `weight_g` (the norms) and
`weight_v` (the directions), and a forward pre-hook recomputes weight = g * v / ||v||
before every call. torch deprecates it for nn.utils.parametrizations.weight_norm, and
says so with the same FutureWarning."""
import warnings

from ..module import Parameter
from ._norms import norm_except_dim, weight_from


class _WeightNormHook:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        return weight_from(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"),
                           self.dim)

    def __call__(self, module, args):
        setattr(module, self.name, self.compute(module))


def _hooks(module):
    return module.__dict__.setdefault("_weight_norm_hooks", {})


def weight_norm(module, name="weight", dim=0):
    warnings.warn("nn.utils.weight_norm is deprecated in favor of "
                  "nn.utils.parametrizations.weight_norm.", FutureWarning, stacklevel=2)
    if name in _hooks(module):
        raise RuntimeError(f"weight_norm: cannot register two weight_norm hooks on the same "
                           f"parameter {name}")
    if dim is None:
        dim = -1
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: {type(module).__name__} has no parameter '{name}'")
    hook = _WeightNormHook(name, dim)
    delattr(module, name)
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, hook.compute(module))
    _hooks(module)[name] = (hook, module.register_forward_pre_hook(hook))
    return module


def remove_weight_norm(module, name="weight"):
    if name not in _hooks(module):
        raise ValueError(f"weight_norm of '{name}' not found in {type(module).__name__}")
    hook, handle = _hooks(module).pop(name)
    weight = hook.compute(module).detach()
    handle.remove()
    delattr(module, name)
    delattr(module, name + "_g")
    delattr(module, name + "_v")
    setattr(module, name, Parameter(weight))
    return module
