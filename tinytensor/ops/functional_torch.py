"""torch.nn.functional's signatures for ops tinytensor has under its own: the `inplace=`
flags of relu, leaky_relu, silu and dropout, and the implicit `dim` of softmax, log_softmax and
softmin (torch's legacy rule, with its warning, instead of the last axis).

`tt.relu`, `tt.softmax` and the Tensor methods keep torch.relu's and torch.softmax's own
signatures; these are what `tinytensor.functional` exports.
"""

from .elementwise import leaky_relu as _leaky_relu, relu as _relu, silu as _silu
from .activations import implicit_softmax_dim
from .inplace import apply_inplace
from .nn import dropout as _dropout
from .softmax import log_softmax as _log_softmax, softmax as _softmax

__all__ = ["relu", "relu_", "leaky_relu", "leaky_relu_", "silu", "dropout", "softmax",
           "log_softmax"]


def relu(input, inplace=False):
    return apply_inplace(input, "relu_", _relu) if inplace else _relu(input)


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    fn = lambda t: _leaky_relu(t, negative_slope)  # noqa: E731
    return apply_inplace(input, "leaky_relu_", fn) if inplace else fn(input)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def silu(input, inplace=False):
    return apply_inplace(input, "silu_", _silu) if inplace else _silu(input)


def dropout(input, p=0.5, training=True, inplace=False):
    fn = lambda t: _dropout(t, p, training)  # noqa: E731
    if inplace and training and p > 0:
        return apply_inplace(input, "dropout_", fn)
    return fn(input)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = implicit_softmax_dim("softmax", input.ndim, _stacklevel)
    return _softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = implicit_softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _log_softmax(input, dim, dtype)
