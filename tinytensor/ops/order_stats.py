"""Order statistics and NaN-aware reductions, as torch: nansum, nanmean, median, nanmedian,
kthvalue, mode, quantile, nanquantile, aminmax, count_nonzero, msort.

Which entry is chosen (a median's, a mode's) depends on the values, so the choice is a
recorded op (`_SelectIndex`, `_MedianAll`): a compiled program chooses again on every call.
Values are then gathered at the chosen indices, so a gradient flows to the chosen entry, as
torch's value-selecting reductions do; a median over every entry shares its gradient evenly
between the entries equal to it, as torch's `median()` does."""
import numpy as np

from ..core.function import Function
from ..core.return_types import named_tuple
from ..core.tensor import Tensor
from ..creation import full
from ..messages import plain
from .elementwise import (cast, eq, floor, ceil, isnan, logical_not, ne, where,
                          clone)
from .forward_mode import no_tangent
from .indexing import gather
from .movement import _where, norm_dim, reshape, squeeze, movedim
from .reduce import ValuesIndices, _dims_args, amax, amin, sum
from .sorting import sort
from ..device import xp_of as _xp

__all__ = ["nansum", "nanmean", "median", "nanmedian", "kthvalue", "mode", "quantile",
           "nanquantile", "aminmax", "count_nonzero", "msort"]


def nansum(input, dim=None, keepdim=False, dtype=None):
    """The sum with NaNs counted as zero; their gradient is 0."""
    x = input if dtype is None else cast(input, dtype)
    if x.dtype.is_floating_point:
        x = where(isnan(x), 0.0, x)
    return sum(x, dim, keepdim=keepdim)


def nanmean(input, dim=None, keepdim=False, dtype=None):
    """nansum / the count of non-NaN entries (NaN where every entry is NaN)."""
    x = input if dtype is None else cast(input, dtype)
    if not x.dtype.is_floating_point:
        raise TypeError(f"nanmean: input dtype {x.dtype.name} is not floating; pass dtype=")
    count = sum(logical_not(isnan(x)), dim, keepdim=keepdim)
    return nansum(x, dim, keepdim=keepdim) / cast(count, x.dtype)


class _SelectIndex(Function):
    """Per slice along `dim` (kept as size 1), the index of the entry a rule picks from the
    slice's stable ascending order (NaNs last): 'median' (the lower middle, or the first NaN),
    'nanmedian' (the lower middle of the non-NaN entries), 'kth' (the k-th smallest),
    'mode' (the last index of the smallest most frequent value)."""
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, x, dim, rule, k=0):
        xp = _xp(x)
        xs = xp.moveaxis(x, dim, -1)
        n = xs.shape[-1]
        order = xp.argsort(xs, axis=-1, kind="stable")
        s = xp.take_along_axis(xs, order, -1)
        if rule == "kth":
            pos = xp.full(xs.shape[:-1], k, dtype=np.int64)
        elif rule == "mode":
            new_run = xp.ones(s.shape, dtype=bool)
            new_run[..., 1:] = s[..., 1:] != s[..., :-1]
            if s.dtype.kind == "f":  # NaNs equal one another here, as torch counts them
                new_run[..., 1:] &= ~(xp.isnan(s[..., 1:]) & xp.isnan(s[..., :-1]))
            # runs of equal values in each sorted row: their lengths by a bincount of
            # (row, run number); the first longest run is the smallest most frequent value,
            # and its last entry (the value's last index, by the stable sort) is picked
            run = xp.cumsum(new_run, axis=-1) - 1
            rows = int(np.prod(s.shape[:-1], dtype=np.int64))
            gid = (xp.arange(rows, dtype=np.int64) * n).reshape(s.shape[:-1] + (1,)) + run
            lengths = xp.bincount(gid.reshape(-1), minlength=rows * n).reshape(s.shape)
            best = xp.argmax(lengths, axis=-1)
            ends = xp.cumsum(lengths, axis=-1) - 1
            pos = xp.take_along_axis(ends, best[..., None], -1)[..., 0]
        else:
            nans = xp.isnan(xs).sum(-1) if xs.dtype.kind == "f" else xp.zeros(xs.shape[:-1], np.int64)
            if rule == "median":
                pos = xp.where(nans > 0, n - nans, (n - 1) // 2)
            else:
                valid = n - nans
                pos = xp.where(valid > 0, (valid - 1) // 2, 0)
        idx = xp.take_along_axis(order, xp.asarray(pos, dtype=np.int64)[..., None], -1)
        return xp.ascontiguousarray(xp.moveaxis(idx.astype(np.int64, copy=False), -1, dim))


def _select(x, dim, keepdim, rule, op, k=0):
    d = norm_dim(dim, x.ndim, op)
    if x.ndim == 0:
        return ValuesIndices((clone(x), _SelectIndex.apply(reshape(x, (1,)), dim=0, rule=rule,
                                                           k=k).reshape(())))
    if x.shape[d] == 0:
        raise IndexError(f"{op}: cannot reduce over dimension {d} of size 0 "
                         f"(shape {tuple(x.shape)}){_where()}")
    idx = _SelectIndex.apply(x, dim=d, rule=rule, k=k)
    values = gather(x, d, idx)
    if not keepdim:
        values, idx = squeeze(values, d), squeeze(idx, d)
    return ValuesIndices((values, idx))


class _MedianAll(Function):
    """The lower median of every entry (NaN if any is NaN; the non-NaN ones for nanmedian);
    its gradient is shared evenly between the entries equal to it (the NaNs, for a NaN)."""

    @staticmethod
    def forward(ctx, x, ignore_nan):
        xp = _xp(x)
        flat = xp.sort(x.reshape(-1))
        n = flat.size
        nans = int(xp.isnan(flat).sum()) if flat.dtype.kind == "f" else 0
        if ignore_nan:
            k = (n - nans - 1) // 2 if n > nans else n - 1
        else:
            k = n - nans if nans else (n - 1) // 2
        out = flat[k] if n else xp.asarray(np.nan, dtype=x.dtype)
        out = xp.asarray(out, dtype=x.dtype)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        hit = where(isnan(out), isnan(x), eq(x, out))
        return g * hit / sum(hit)

    @staticmethod
    def jvp(ctx, t):   # the mean tangent of the entries equal to it (torch's evenly_read_jvp)
        x, out = ctx.saved_tensors
        hit = where(isnan(out), isnan(x), eq(x, out))
        return sum(t * hit) / sum(hit)


def _median(input, dim, keepdim, ignore_nan):
    op = "nanmedian" if ignore_nan else "median"
    if dim is None:
        if input.numel() == 0 and not input.dtype.is_floating_point:
            raise ValueError(f"{op}: cannot take the median of an empty {input.dtype.name} tensor")
        return _MedianAll.apply(input, ignore_nan=ignore_nan)
    return _select(input, dim, keepdim, op, op)


def median(input, dim=None, keepdim=False):
    """The lower median (of every entry, or (values, indices) along dim); NaN propagates."""
    return _median(input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaNs (NaN where a slice is all NaN)."""
    return _median(input, dim, keepdim, True)


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest entry along dim (k counts from 1)."""
    d = norm_dim(dim, input.ndim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue: k={plain(k)} is out of range for dimension {dim} of size {n} "
                         f"(shape {tuple(input.shape)}){_where()}")
    return _select(input, d, keepdim, "kth", "kthvalue", k=int(k) - 1)


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim (the smallest of equally frequent
    ones) and the last index where it occurs."""
    return _select(input, dim, keepdim, "mode", "mode")


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, op):
    if not isinstance(input, Tensor) or input.dtype.name not in ("float32", "float64"):
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise TypeError(f"{op}: input must be a float32 or float64 tensor (as torch), got {got}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, "
                         f"got {interpolation!r}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ValueError(f"{op}: q must be a scalar or 1-d tensor, got shape {tuple(q.shape)}")
        if q.dtype is not input.dtype:
            raise TypeError(f"{op}: q ({q.dtype.name}) must have the input's dtype "
                            f"({input.dtype.name})")
        qt = q
    else:
        if not 0 <= q <= 1:
            raise ValueError(f"{op}: q must be in [0, 1], got {plain(q)}")
        qt = None
    x = input
    if dim is None:
        x, d = reshape(x, (-1,)), 0
        out_shape_keep = (1,) * input.ndim
    else:
        d = norm_dim(dim, x.ndim, op)
        if x.ndim == 0:
            x = reshape(x, (1,))
        out_shape_keep = tuple(1 if i == d else s for i, s in enumerate(input.shape))
    if x.shape[d] == 0:
        raise IndexError(f"{op}: cannot take a quantile over dimension {d} of size 0 "
                         f"(shape {tuple(input.shape)}){_where()}")
    x = movedim(x, d, -1)
    s = sort(x, -1).values  # NaNs last
    n = s.shape[-1]
    nan_mask = isnan(s)
    # q as a 1-d tensor of Q quantiles (a constant for a Python q; a tensor q gets a gradient
    # through the linear weights, as in torch)
    qcol = reshape(qt, (-1,)) if qt is not None else full((1,), float(q), dtype=s.dtype,
                                                                   device=s.device)
    # ranks (..., Q): where each quantile falls in the sorted slice; a slice torch answers
    # with NaN points at its last entry, a NaN
    if ignore_nan:
        valid = cast(sum(logical_not(nan_mask), -1, keepdim=True), s.dtype)  # (..., 1)
        ranks = where(eq(valid, 0), float(n - 1), qcol * (valid - 1.0))
    else:
        has_nan = sum(nan_mask, -1, keepdim=True) > 0
        ranks = where(has_nan, float(n - 1), qcol * float(n - 1))
    lo = floor(ranks)
    hi = ceil(ranks)
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    elif interpolation == "nearest":
        from .elementwise import round_half_even
        lo = hi = round_half_even(ranks)
    below = gather(s, -1, cast(lo, "int64"))
    above = gather(s, -1, cast(hi, "int64"))
    if interpolation == "linear":
        w = ranks - lo
        out = below + w * (above - below)
    elif interpolation == "midpoint":
        out = below + 0.5 * (above - below)
    else:
        out = below
    # out: (..., Q) -> (Q, ...) in the kept or reduced shape
    out = movedim(out, -1, 0)
    kept = reshape(out, (out.shape[0],) + out_shape_keep)
    if not keepdim:
        if dim is None:
            kept = reshape(kept, (out.shape[0],))
        else:
            kept = reshape(kept, (out.shape[0],) + tuple(
                s_ for i, s_ in enumerate(input.shape) if i != d))
    if qt is None or qt.ndim == 0:
        kept = squeeze(kept, 0)
    return kept


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along dim (of every entry for dim=None), interpolated between the
    two nearest ranks; NaN where a slice has a NaN. A 1-d q adds a leading dim."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile of the non-NaN entries (NaN where a slice is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


MinMax = named_tuple(
    "MinMax", ("min", "max"),
    "(min, max), also readable as .min / .max like torch's return type.", __name__)


def aminmax(input, *, dim=None, keepdim=False):
    """(amin, amax) over dim (every entry for None); ties share the gradient, as amin/amax."""
    if dim is None and input.ndim and keepdim:
        return MinMax((reshape(amin(input), (1,) * input.ndim),
                       reshape(amax(input), (1,) * input.ndim)))
    return MinMax((amin(input, dim, keepdim=keepdim), amax(input, dim, keepdim=keepdim)))


def count_nonzero(input, dim=None):
    """The number of nonzero entries over dim (int64)."""
    dims, _ = _dims_args(input, dim, False, None, None, "count_nonzero")
    return sum(ne(input, 0), dims)


def msort(input):
    """input sorted along its first dim."""
    return sort(input, 0).values
