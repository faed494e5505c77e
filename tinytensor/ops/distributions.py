"""Random samples from the usual distributions: tt.normal and tt.bernoulli, and the
in-place Tensor methods normal_, uniform_, bernoulli_, exponential_, geometric_, cauchy_
and log_normal_, all seeded by tt.manual_seed.

Every draw is one recorded op with no tensor inputs (`Draw`, random like
ops/random_ops.DropoutMask), so tt.compile's replay draws again at every call, from the
same generator eager uses. Each distribution is a transform of the generator's uniform or
standard normal numbers, computed in float64 and rounded once to the result's dtype; the
transforms are NumPy/CuPy expressions, so CPU and CUDA take the same path (each device has
its own generator, so the numbers differ between devices; the same seed repeats them on
each). Parameters that are tensors (normal's mean and std, bernoulli's probabilities) enter
as ordinary ops on a standard draw: normal(mean, std) = mean + std * z, differentiable in
both, as torch's.
"""
import math

import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from ..creation import _resolve
from ..dtypes import float64
from ..messages import plain
from ..random import normal as _standard_normal
from ..random import uniform as _uniform
from .elementwise import add, cast, lt, mul
from .forward_mode import no_tangent
from .inplace import apply_inplace
from .movement import broadcast_shapes, expand

__all__ = ["normal", "bernoulli", "normal_", "uniform_", "bernoulli_", "exponential_",
           "geometric_", "cauchy_", "log_normal_"]


def _transform(xp, kind, u, a, b):
    """Samples of `kind` from the standard draws u (uniform on [0, 1), or standard normal
    for "normal" and "log_normal"), with the distribution's parameters a and b."""
    if kind == "uniform":
        return a + (b - a) * u
    if kind == "normal":
        return a + b * u
    if kind == "log_normal":
        return xp.exp(a + b * u)
    if kind == "exponential":          # 1 - u is in (0, 1]: the log is finite
        return -xp.log1p(-u) / a
    if kind == "geometric":            # the number of trials to the first success, >= 1
        return xp.floor(xp.log1p(-u) / math.log1p(-a)) + 1
    if kind == "cauchy":
        return a + b * xp.tan(math.pi * (u - 0.5))
    raise ValueError(f"Draw: unknown distribution {kind!r}")


class Draw(Function):
    """`shape` samples of the distribution `kind` (parameters a, b), as `dtype`, on `device`."""
    random = True

    @staticmethod
    def forward(ctx, shape, dtype, device, kind, a, b):
        gaussian = kind in ("normal", "log_normal")
        u = (_standard_normal if gaussian else _uniform)(device, shape, float64)
        return _transform(device.xp, kind, u, a, b).astype(dtype.np)

    @staticmethod
    def backward(ctx):  # no tensor inputs: nothing to differentiate
        return ()

    jvp = staticmethod(no_tangent)   # never called (no tensor input): complete


def _draw(kind, shape, dtype, device, a=0.0, b=1.0):
    return Draw.apply(shape=tuple(int(s) for s in shape), dtype=dtype, device=device, kind=kind,
                      a=float(a), b=float(b))


# ---------------------------------------------------------------- functions
def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, requires_grad=False,
           generator=None, layout=None):
    """Normal samples: of mean and std broadcast together when either is a tensor (then
    differentiable in both), else of `size`."""
    _no_generator(generator, "normal")
    if layout is not None and not str(layout).endswith("strided"):
        raise NotImplementedError(f"normal: layout={layout} is not supported; tinytensor's "
                                  "tensors are dense (strided)")
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (tm or ts):
        if size is None:
            raise TypeError("normal: with a number mean and std, give the size of the result, "
                            "e.g. normal(0.0, 1.0, size=(2, 3))")
        _check(float(std) >= 0, "normal", f"expects std >= 0.0, but found std {plain(std)}")
        dev, dt = _resolve(device, dtype)
        _require_float(dt, "normal")
        out = _draw("normal", _size(size), dt, dev, mean, std)
        return out.requires_grad_(True) if requires_grad else out
    if size is not None:
        raise TypeError(f"normal: size is taken from mean and std when one of them is a tensor, "
                        f"got size={plain(size)}")
    if not ts:
        _check(float(std) >= 0, "normal", f"expects std >= 0.0, but found std {plain(std)}")
    ref = mean if tm else std
    for name, t in (("mean", mean), ("std", std)):
        if isinstance(t, Tensor) and not t.dtype.is_floating_point:
            raise TypeError(f"normal: {name} must be a floating tensor, got {t.dtype.name}")
    shape = broadcast_shapes(*(tuple(t.shape) for t in (mean, std) if isinstance(t, Tensor)),
                             op="normal")
    dt = mean.dtype if tm else std.dtype
    z = _draw("normal", shape, dt, ref.device)
    return add(mul(z, std), mean)


def bernoulli(input, p=None, *, generator=None):
    """0 or 1 for each entry, 1 with probability input (or p), in input's dtype."""
    _no_generator(generator, "bernoulli")
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli: expected a tensor of probabilities, got {type(input).__name__}")
    probs = input if p is None else p
    if not isinstance(probs, Tensor):
        _check(0 <= float(probs) <= 1, "bernoulli", f"expects 0 <= p <= 1, but got p={plain(probs)}")
    return cast(_bernoulli_mask(input.shape, probs, input.device), input.dtype)


def _bernoulli_mask(shape, probs, device):
    """True with probability probs (a number, or a tensor that broadcasts to shape)."""
    u = _draw("uniform", shape, float64, device)
    if isinstance(probs, Tensor):
        return lt(u, expand(cast(probs, float64), *shape))
    return lt(u, float(probs))


# ---------------------------------------------------------------- in-place methods
def _fill(x, op, kind, a=0.0, b=1.0, floats_only=True):
    if floats_only:
        _require_float(x.dtype, op)
    return apply_inplace(x, op, lambda t: _draw(kind, t.shape, t.dtype, t.device, a, b))


def normal_(x, mean=0.0, std=1.0, *, generator=None):
    _no_generator(generator, "normal_")
    _check(float(std) >= 0, "normal_", f"expects std >= 0.0, but found std {plain(std)}")
    return _fill(x, "normal_", "normal", mean, std)


def uniform_(x, from_=0.0, to=1.0, *, generator=None, **kw):
    _no_generator(generator, "uniform_")
    lo = kw.pop("from", from_)  # torch's keyword is `from`, a Python keyword
    if kw:
        raise TypeError(f"uniform_: unexpected arguments {sorted(kw)}")
    _check(float(lo) <= float(to), "uniform_",
           f"expects to return a [from, to) range, but found from={plain(lo)} > to={plain(to)}")
    return _fill(x, "uniform_", "uniform", lo, to)


def bernoulli_(x, p=0.5, *, generator=None):
    _no_generator(generator, "bernoulli_")
    if not isinstance(p, Tensor):
        _check(0 <= float(p) <= 1, "bernoulli_", f"expects 0 <= p <= 1, but got p={plain(p)}")
    return apply_inplace(x, "bernoulli_", lambda t: cast(_bernoulli_mask(t.shape, p, t.device), t.dtype))


def exponential_(x, lambd=1.0, *, generator=None):
    _no_generator(generator, "exponential_")
    _check(float(lambd) > 0, "exponential_", f"expects lambda > 0.0, but found lambda={plain(lambd)}")
    return _fill(x, "exponential_", "exponential", lambd)


def geometric_(x, p, *, generator=None):
    _no_generator(generator, "geometric_")
    _check(0 < float(p) < 1, "geometric_", f"expects p to be in (0, 1), but got p={plain(p)}")
    return _fill(x, "geometric_", "geometric", p, floats_only=False)


def cauchy_(x, median=0.0, sigma=1.0, *, generator=None):
    _no_generator(generator, "cauchy_")
    _check(float(sigma) > 0, "cauchy_", f"expects sigma > 0.0, but found sigma={plain(sigma)}")
    return _fill(x, "cauchy_", "cauchy", median, sigma)


def log_normal_(x, mean=1.0, std=2.0, *, generator=None):
    _no_generator(generator, "log_normal_")
    _check(float(std) > 0, "log_normal_", f"expects std > 0.0, but found std={plain(std)}")
    return _fill(x, "log_normal_", "log_normal", mean, std)


# ---------------------------------------------------------------- checks
def _check(ok, op, what):
    if not ok:
        raise ValueError(f"{op}: {what}")


def _require_float(dt, op):
    if not dt.is_floating_point:
        raise TypeError(f"{op}: needs a floating dtype, got {dt.name}")


def _no_generator(generator, op):
    if generator is not None:
        raise NotImplementedError(f"{op}: generator= is not supported; tinytensor has one "
                                  "generator per device, seeded by tt.manual_seed")


def _size(size):
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)
