"""torch.masked's reductions and normalizations on strided tensors (`tt.masked.<name>`):
every op fills the entries its `mask` (broadcast to the input's shape) leaves out with the
identity of the underlying reduction -- 0 for sum and norm, 1 for prod, -inf for amax /
softmax / logsumexp, +inf for amin / softmin, NaN for median (then nanmedian) -- and runs
the plain op. So a fully masked slice gives what torch.masked gives: 0, 1, -inf, +inf, NaN
(softmax of all -inf), and the gradient of a masked-out entry is 0 (the fill is a `where`).
mean / var / std divide by the count of entries the mask keeps, as torch.masked does."""
import numpy as np

from ..core.tensor import Tensor
from ..dtypes import is_floating_np
from .elementwise import (absolute, cast, maximum, ne, pow, sqrt, where)
from .math_functions import logaddexp as _logaddexp
from .movement import broadcast_to, norm_dim, norm_dims
from .reduce import (amax as _amax, amin as _amin, argmax as _argmax, argmin as _argmin,
                     cumsum as _cumsum, logsumexp as _logsumexp, norm as _norm, prod as _prod,
                     sum as _sum)
from .cumulative import cumprod as _cumprod
from .softmax import softmax as _softmax, log_softmax as _log_softmax
from .order_stats import nanmedian

_SMALL_INTS = {"uint8", "bool", "int8", "int16", "int32"}


def _mask(input, mask, op):
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked.{op}: mask must be a Tensor, got {type(mask).__name__}")
    if mask.ndim > input.ndim:
        raise IndexError(f"masked.{op}: the mask {tuple(mask.shape)} has more dims than the "
                         f"input {tuple(input.shape)}")
    if tuple(mask.shape) != tuple(input.shape):
        mask = broadcast_to(mask, tuple(input.shape))
    return mask if mask.dtype.name == "bool" else cast(mask, "bool")


def _identity(input, kind):
    """The fill of a masked-out entry for a reduction of kind 'zero', 'one', 'low', 'high',
    'nan', in input's dtype (integers: their extreme values)."""
    floating = is_floating_np(input.data.dtype)
    if kind == "zero":
        return 0
    if kind == "one":
        return 1
    if kind == "nan":
        return float("nan")
    if floating:
        return float("-inf") if kind == "low" else float("inf")
    info = np.iinfo(input.data.dtype) if input.dtype.name != "bool" else None
    if info is None:
        return kind != "low"
    return int(info.min) if kind == "low" else int(info.max)


def _fill(input, mask, kind, op):
    """input with the entries `mask` leaves out replaced by the reduction's identity."""
    if mask is None:
        return input
    return where(_mask(input, mask, op), input, _identity(input, kind))


def _dims(input, dim, op):
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        dim = None
    return norm_dims(dim, input.ndim, f"masked.{op}") if input.ndim else ()


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype
    return "int64" if input.dtype.name in _SMALL_INTS else None


def _to(t, dtype):
    return t if dtype is None or t.dtype.name == getattr(dtype, "name", dtype) else cast(t, dtype)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _fill(input, mask, "zero", "sum")
    return _sum(x, _dims(input, dim, "sum"), keepdim=bool(keepdim), dtype=_sum_dtype(input, dtype))


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _to(_fill(input, mask, "one", "prod"), _sum_dtype(input, dtype))
    return _prod(x, _dims(input, dim, "prod"), keepdim=bool(keepdim))


def cumsum(input, dim, *, dtype=None, mask=None):
    x = _to(_fill(input, mask, "zero", "cumsum"), dtype)
    return _cumsum(x, norm_dim(dim, input.ndim, "masked.cumsum"))


def cumprod(input, dim, *, dtype=None, mask=None):
    x = _to(_fill(input, mask, "one", "cumprod"), dtype)
    return _cumprod(x, norm_dim(dim, input.ndim, "masked.cumprod"))


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _fill(input, mask, "low", "amax")
    return _to(_amax(x, _dims(input, dim, "amax"), keepdim=bool(keepdim)), dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _fill(input, mask, "high", "amin")
    return _to(_amin(x, _dims(input, dim, "amin"), keepdim=bool(keepdim)), dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest kept entry, in `dtype` (the input's by default, as torch)."""
    x = _fill(input, mask, "low", "argmax")
    return cast(_argmax(x, dim, keepdim=bool(keepdim)), dtype or input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _fill(input, mask, "high", "argmin")
    return cast(_argmin(x, dim, keepdim=bool(keepdim)), dtype or input.dtype)


def _count(input, dims, keepdim, mask, op):
    """How many entries each slice keeps (int64)."""
    if mask is None:
        n = 1
        for d in dims:
            n *= input.shape[d]
        return n
    return _sum(_mask(input, mask, op), dims, keepdim=keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the kept entries (NaN for a fully masked slice)."""
    dt = dtype if dtype is not None else input.dtype
    if not getattr(dt, "is_floating_point", str(dt).startswith(("float", "bfloat", "half"))):
        raise ValueError(f"masked.mean: could not infer a floating output dtype from "
                         f"{getattr(dt, 'name', dt)}; pass dtype=")
    dims = _dims(input, dim, "mean")
    total = sum(input, dims, keepdim=keepdim, dtype=dt, mask=mask)
    count = _count(input, dims, keepdim, mask, "mean")
    return total / (count if not isinstance(count, Tensor) else cast(count, total.dtype)) \
        if not isinstance(count, int) or count else total / 0.0


def _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt, op):
    if unbiased is not None and correction is not None:
        raise TypeError(f"masked.{op}: pass either unbiased or correction, not both")
    corr = 1.0
    if unbiased is not None:
        corr = 1.0 if unbiased else 0.0
    if correction is not None:
        corr = float(correction)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else "float32"
    dims = _dims(input, dim, op)
    count = _count(input, dims, True, mask, op)
    mean_ = sum(input, dims, keepdim=True, dtype=dtype, mask=mask)
    mean_ = mean_ / (cast(count, mean_.dtype) if isinstance(count, Tensor) else float(count))
    x = input - mean_
    total = sum(x * x, dims, keepdim=keepdim, dtype=dtype, mask=mask)
    if isinstance(count, Tensor):
        count = cast(count.reshape(tuple(total.shape)), total.dtype)
        if corr != 0:
            count = maximum(count - corr, 0.0)
        out = total / count
    else:
        denom = max(count - corr, 0.0) if corr != 0 else float(count)
        out = total / denom if denom else total / 0.0
    return sqrt(out) if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance of the kept entries over the count they hold minus `correction`."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False, "var")


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """sqrt of masked.var."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True, "std")


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x = _fill(input, mask, "low", "logsumexp")
    return _to(_logsumexp(x, _dims(input, dim, "logsumexp"), keepdim=bool(keepdim)), dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    a = _fill(input, input_mask, "low", "logaddexp")
    b = _fill(other, other_mask, "low", "logaddexp")
    return _to(_logaddexp(a, b), dtype)


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax over the kept entries (0 at the others; NaN in a fully masked slice)."""
    x = _fill(input, mask, "low", "softmax")
    return _softmax(x, norm_dim(dim, input.ndim, "masked.softmax"), dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    x = _fill(input, mask, "low", "log_softmax")
    return _log_softmax(x, norm_dim(dim, input.ndim, "masked.log_softmax"), dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    x = _fill(input, mask, "high", "softmin")
    x = _to(x, dtype)
    return _softmax(-x, norm_dim(dim, input.ndim, "masked.softmin"))


def _vector_norm(x, ord, dims, keepdim):
    """linalg.vector_norm of x over dims for any ord (0 counts, +-inf: extremes of |x|)."""
    ord = float(ord)
    if ord == float("inf"):
        return _amax(absolute(x), dims, keepdim=keepdim)
    if ord == float("-inf"):
        return _amin(absolute(x), dims, keepdim=keepdim)
    if ord == 0:
        return cast(_sum(ne(x, 0), dims, keepdim=keepdim), x.dtype)
    if ord > 0:
        return _norm(x, ord, dims, keepdim=keepdim)
    return pow(_sum(pow(absolute(x), ord), dims, keepdim=keepdim), 1.0 / ord)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The ord-norm of the kept entries (masked-out entries count as 0; +inf for ord=-inf)."""
    x = _fill(input, mask, "high" if ord == float("-inf") else "zero", "norm")
    x = _to(x, dtype)
    return _vector_norm(x, 2.0 if ord is None else ord, _dims(input, dim, "norm"), bool(keepdim))


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The kept entries divided by their ord-norm along dim (at least eps); 0 elsewhere."""
    x = _fill(input, mask, "zero", "normalize")
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return _to(x, dtype) / maximum(nrm, eps)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The lower median of the kept entries along dim (NaN for a fully masked slice)."""
    floating = input.dtype.is_floating_point
    x = input if floating else cast(input, "float32")
    x = _fill(x, mask, "nan", "median")
    out = nanmedian(x, norm_dim(dim, input.ndim, "masked.median"), keepdim=keepdim).values
    if floating:
        return out
    return cast(out, dtype or input.dtype)
