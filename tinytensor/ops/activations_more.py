"""The rest of torch.nn.functional's activations: glu, prelu, rrelu, hardshrink, softshrink,
tanhshrink, threshold.

Each is a composition of recorded ops (where, comparisons, products), so gradients of every
order come with them; the masks are the ones torch's kernels use (prelu and threshold keep
`x > t`, hardshrink zeroes the closed band [-lambd, lambd], rrelu draws slopes for x <= 0),
so the gradient at a corner is torch's. rrelu's random slopes are one recorded draw
(distributions.Draw), so a compiled replay draws afresh at each call.
"""
from ..core.tensor import Tensor
from .activations import _maybe_inplace
from .distributions import _draw
from .elementwise import absolute, gt, isnan, le, leaky_relu, sigmoid, sign, tanh, where
from .movement import _where, norm_dim

__all__ = ["glu", "prelu", "rrelu", "hardshrink", "softshrink", "tanhshrink", "threshold"]


def _tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def glu(input, dim=-1):
    """a * sigmoid(b), with a and b the two halves of `input` along `dim`."""
    _tensor(input, "glu")
    if input.ndim == 0:
        raise RuntimeError(f"glu: does not support 0-d (scalar) input{_where()}")
    d = norm_dim(dim, input.ndim, "glu")
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: halving dimension {dim} of input shape {tuple(input.shape)} "
                           f"must be even, got size {n}{_where()}")
    a, b = input.split(n // 2, d)
    return a * sigmoid(b)


def prelu(input, weight):
    """x if x > 0 else weight * x, with one weight or one per channel (dimension 1)."""
    _tensor(input, "prelu")
    _tensor(weight, "prelu")
    if weight.ndim > 1:
        raise ValueError(f"prelu: weight must be 0-d or 1-d, got shape {tuple(weight.shape)}{_where()}")
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if input.ndim == 0 or weight.numel() != channels:
            raise ValueError(f"prelu: weight has {weight.numel()} entries but input shape "
                             f"{tuple(input.shape)} has {channels} channels (dimension 1); give "
                             f"one weight or one per channel{_where()}")
    if input.ndim == 0:
        w = weight.reshape(())
    elif weight.ndim == 1 and input.ndim >= 2:
        w = weight.reshape((weight.shape[0],) + (1,) * (input.ndim - 2))   # (C, 1, ...)
    else:
        w = weight
    return where(gt(input, 0), input, input * w)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky relu: in training each x <= 0 is scaled by a slope drawn uniformly from
    [lower, upper]; in evaluation by their mean."""
    _tensor(input, "rrelu")
    if lower > upper:
        raise ValueError(f"rrelu: lower bound {lower} must be <= upper bound {upper}{_where()}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"rrelu: expected a floating input, got {input.dtype.name}{_where()}")
    if not training:
        slope = (lower + upper) / 2
        return _maybe_inplace(input, inplace, "rrelu", lambda t: leaky_relu(t, slope))

    def fn(t):
        r = _draw("uniform", t.shape, t.dtype, t.device, lower, upper)  # recorded draw
        return where(le(t, 0), t * r, t)
    return _maybe_inplace(input, inplace, "rrelu", fn)


def _nan_kept(x):
    """0 inside the shrink band, nan for nan, with gradient 0 for both: torch's vectorised
    loop (its scalar tail loop gives nan a gradient of 1; tinytensor follows the former)."""
    return where(isnan(x), x.detach(), 0.0)


def hardshrink(input, lambd=0.5):
    """x outside the band [-lambd, lambd], 0 inside it."""
    _tensor(input, "hardshrink")
    return where(gt(absolute(input), lambd), input, _nan_kept(input))


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _tensor(input, "softshrink")
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be >= 0, got {lambd}{_where()}")
    return where(gt(absolute(input), lambd), input - sign(input) * lambd, _nan_kept(input))


def tanhshrink(input):
    """x - tanh(x)."""
    _tensor(input, "tanhshrink")
    return input - tanh(input)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    _tensor(input, "threshold")
    return _maybe_inplace(input, inplace, "threshold",
                          lambda t: where(le(t, threshold), value, t))
