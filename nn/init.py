"""Parameter initializers, in place, as in torch.nn.init.

Every function writes new values into `tensor`'s array (outside the tape, like an
optimizer step), bumps its version counter and returns it. Random ones draw from the
generator of the tensor's device, so `tt.manual_seed` makes them reproducible.

Fans follow torch: a weight of shape (out, in, *kernel) has fan_in = in * prod(kernel) and
fan_out = out * prod(kernel); Linear.weight is (out_features, in_features).
"""
import math

import numpy as np

import tinytensor as tt
from tinytensor import random as _random
from tinytensor.autograd import plain

__all__ = ["calculate_gain", "uniform_", "normal_", "zeros_", "ones_", "constant_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "trunc_normal_", "eye_", "dirac_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity, param=None):
    """The gain that keeps activations' variance steady through `nonlinearity`."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative_slope must be an int or float, got "
                             f"{plain(param)!r} ({type(param).__name__})")
        return math.sqrt(2.0 / (1.0 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {plain(nonlinearity)!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor of at least 2 dimensions, got shape "
                         f"{tuple(tensor.shape)}")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= int(s)
    return int(tensor.shape[1]) * receptive, int(tensor.shape[0]) * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {plain(mode)!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check(tensor, op):
    if not isinstance(tensor, tt.Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(tensor).__name__}")


def _write(tensor, arr):
    """Store `arr` into tensor's memory without recording anything (views share the write)."""
    tensor.data[...] = arr.astype(tensor.data.dtype, copy=False)
    tensor._version[0] += 1
    return tensor


def _draw_dtype(tensor):
    # draw in the tensor's own precision where the generator supports it (float16 via float32)
    return tt.float64 if tensor.data.dtype == np.float64 else tt.float32


def _require_float(tensor, op):
    _check(tensor, op)
    if not tensor.is_floating_point():
        raise TypeError(f"{op}: needs a floating-point tensor, got {tensor.dtype.name}")


def uniform_(tensor, a=0.0, b=1.0):
    """Fill with U(a, b)."""
    _require_float(tensor, "uniform_")
    u = _random.uniform(tensor.device, tuple(tensor.shape), _draw_dtype(tensor))
    return _write(tensor, u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    """Fill with N(mean, std^2)."""
    _require_float(tensor, "normal_")
    z = _random.normal(tensor.device, tuple(tensor.shape), _draw_dtype(tensor))
    return _write(tensor, z * std + mean)


def constant_(tensor, val):
    _check(tensor, "constant_")
    tensor.data[...] = val
    tensor._version[0] += 1
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0)


def ones_(tensor):
    return constant_(tensor, 1)


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-bound, bound), bound = gain * sqrt(3 / fan) (He et al., 2015); `a` is the
    negative slope of a leaky ReLU (nn.Linear's default init is a=sqrt(5))."""
    if tensor.numel() == 0:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2), std = gain / sqrt(fan)."""
    if tensor.numel() == 0:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """N(mean, std^2) restricted to [a, b] (a and b are values, not multiples of std).

    Exact rejection sampling: values are redrawn until they land inside. When [a, b] holds
    under 1% of the mass (narrow, or far in a tail) the proposals are uniform on [a, b] or,
    in a tail, a shifted exponential (Robert, 1995), so a draw is still accepted often."""
    _require_float(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    if std <= 0:
        raise ValueError(f"trunc_normal_: std must be positive, got {std}")
    lo, hi = (a - mean) / std, (b - mean) / std
    dev, shape = tensor.device, tuple(tensor.shape)
    xp = dev.xp
    flip = hi <= 0  # a lower tail is drawn as the mirrored upper tail
    if flip:
        lo, hi = -hi, -lo
    if _normal_cdf(hi) - _normal_cdf(lo) >= 0.01:
        propose = lambda n: (_random.normal(dev, (n,), tt.float64), None)  # noqa: E731
    elif lo < 0 or hi - lo < _uniform_proposal_width(lo):
        top = 0.0 if lo < 0 else lo * lo  # max of the density on [lo, hi], as -2 log
        propose = lambda n: _uniform_proposal(dev, n, lo, hi, top)  # noqa: E731
    else:
        alpha = 0.5 * (lo + math.sqrt(lo * lo + 4.0))
        propose = lambda n: _exponential_proposal(dev, n, lo, alpha)  # noqa: E731
    z = xp.empty(int(np.prod(shape)), dtype=np.float64)
    todo = xp.arange(z.size)
    for _ in range(100_000):  # each round accepts a fixed fraction; ends long before this
        if todo.size == 0:
            break
        cand, accept = propose(todo.size)
        ok = (cand >= lo) & (cand <= hi)
        if accept is not None:
            ok &= accept
        z[todo[ok]] = cand[ok]
        todo = todo[~ok]
    z = z.reshape(shape)
    if flip:
        z = -z
    x = xp.clip(z * std + mean, a, b)  # rounding must not carry a value past a bound
    return _write(tensor, x.astype(_draw_dtype(tensor).np, copy=False))


def _normal_cdf(x):
    # erfc keeps relative precision far in the lower tail, where 1 + erf(x) cancels
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _uniform_proposal_width(lo):
    # Robert (1995): below this width a uniform proposal on [lo, hi] beats the exponential one
    r = math.sqrt(lo * lo + 4.0)
    return 2.0 * math.sqrt(math.e) / (lo + r) * math.exp((lo * lo - lo * r) / 4.0)


def _uniform_proposal(dev, n, lo, hi, top):
    z = lo + _random.uniform(dev, (n,), tt.float64) * (hi - lo)
    u = _random.uniform(dev, (n,), tt.float64)
    return z, u <= dev.xp.exp((top - z * z) / 2.0)


def _exponential_proposal(dev, n, lo, alpha):
    xp = dev.xp
    z = lo - xp.log1p(-_random.uniform(dev, (n,), tt.float64)) / alpha
    u = _random.uniform(dev, (n,), tt.float64)
    return z, u <= xp.exp(-(z - alpha) ** 2 / 2.0)


# ---------------------------------------------------------------------- structured inits
def eye_(tensor):
    """The identity matrix in a 2-D tensor (ones on the diagonal of a non-square one)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    xp = tensor.device.xp
    return _write(tensor, xp.eye(*tensor.shape, dtype=tensor.data.dtype))


def dirac_(tensor, groups=1):
    """A convolution weight (out, in, *kernel) that passes its input through: for each of
    the `groups`, output channel d of the group copies input channel d at the kernel's
    centre; the channels beyond min(out per group, in) stay zero."""
    _check(tensor, "dirac_")
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got "
                         f"shape {tuple(tensor.shape)}")
    out_ch = int(tensor.shape[0])
    if groups < 1 or out_ch % groups:
        raise ValueError(f"dirac_: dim 0 ({out_ch}) must be divisible by groups ({groups})")
    per_group = out_ch // groups
    n = min(per_group, int(tensor.shape[1]))
    xp = tensor.device.xp
    w = xp.zeros(tuple(tensor.shape), dtype=tensor.data.dtype)
    d = xp.arange(n)
    rows = (xp.arange(groups)[:, None] * per_group + d[None, :]).reshape(-1)
    cols = xp.tile(d, groups)
    centre = tuple(int(k) // 2 for k in tensor.shape[2:])
    w[(rows, cols) + centre] = 1
    return _write(tensor, w)


def orthogonal_(tensor, gain=1.0):
    """A (semi-)orthogonal matrix (Saxe et al., 2013), from the QR decomposition of a
    Gaussian draw with the signs of R's diagonal folded into Q (so Q is uniformly
    distributed), scaled by `gain`; dims after the first are flattened, as torch."""
    _require_float(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = int(tensor.shape[0])
    cols = tensor.numel() // rows
    xp = tensor.device.xp
    a = _random.normal(tensor.device, (rows, cols), tt.float64)
    if rows < cols:
        a = a.T
    q, r = xp.linalg.qr(a)
    q = q * xp.sign(xp.diag(r))[None, :]
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01):
    """N(0, std^2) entries with ceil(sparsity * rows) of every column set to zero, the rows
    drawn at random per column (Martens, 2010)."""
    _require_float(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    rows, cols = (int(s) for s in tensor.shape)
    zeros_per_col = int(math.ceil(sparsity * rows))
    xp = tensor.device.xp
    w = _random.normal(tensor.device, (rows, cols), _draw_dtype(tensor)) * std
    # a random permutation of the rows per column: the rank of a uniform draw
    ranks = xp.argsort(xp.argsort(_random.uniform(tensor.device, (rows, cols), tt.float64),
                                  axis=0), axis=0)
    return _write(tensor, xp.where(ranks < zeros_per_col, 0.0, w))
