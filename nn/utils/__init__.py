"""nn.utils as torch.nn.utils: gradient clipping, parameters <-> one vector, weight and
spectral normalization (the older hook form here, the parametrization form in
`nn.utils.parametrizations`), `parametrize`, and skip_init.

Submodules (`nn.utils.rnn`, `nn.utils.parametrize`, ...) are imported on first use, so
`nn.utils.rnn.pad_sequence` works after `from tinytensor import nn`, as in torch.
"""
import importlib
import inspect

from ..clip import clip_grad_norm_, clip_grad_value_
from .clip_more import clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "skip_init", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def skip_init(module_cls, *args, **kwargs):
    """Build `module_cls(*args, **kwargs)` whose parameters' values are unspecified (the
    caller initialises them). tinytensor has no meta device to skip the work on, so the
    module's own initialisation runs; like torch, the class must take a `device` argument."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError(f"skip_init: {module_cls.__name__} must support a 'device' argument "
                           "to skip initialization")
    return module_cls(*args, **kwargs)


def __getattr__(name):  # nn.utils.rnn, nn.utils.parametrize, ... on first use
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module 'nn.utils' has no attribute '{name}'") from None
