"""Counting ops, as torch: bincount, histc, histogram, histogramdd. None is differentiable
(torch's are not). histc / histogram / histogramdd have a shape fixed by `bins`, so each is
a recorded op that a compiled program re-runs on every call's values (edges taken from the
data included); bincount's length is the largest value + 1, a shape read from the values,
so tt.compile refuses it by name."""
import numbers

import numpy as np

from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.return_types import named_tuple
from ..core.tensor import Tensor
from ..messages import plain
from .forward_mode import no_tangent
from .movement import _where, reshape
from ..device import xp_of as _xp

__all__ = ["bincount", "histc", "histogram", "histogramdd"]


class Bincount(Function):
    """Counts (or summed weights) of each non-negative integer, length max(max + 1, minlength)."""
    # bincount() passes its weights detached (no derivative, as torch's): no tangent either
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, x, *weights, minlength, out_dtype):
        xp = _xp(x)
        w = weights[0].astype(np.float64) if weights else None
        out = xp.bincount(x.astype(np.int64), w, minlength=minlength)
        return out.astype(out_dtype, copy=False)


def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in the 1-d non-negative integer `input` (the sum
    of `weights` at those entries when given)."""
    if not isinstance(input, Tensor) or input.ndim != 1 or input.dtype.is_floating_point \
            or input.dtype.name == "bool":
        got = f"{input.dtype.name} of shape {tuple(input.shape)}" if isinstance(input, Tensor) \
            else type(input).__name__
        raise TypeError(f"bincount: input must be a 1-d integer tensor, got {got}{_where()}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {plain(minlength)}")
    STATE.hooks.read_value(input, "bincount")   # the output's length is the input's largest value
    if bool((input < 0).any()):
        raise ValueError(f"bincount: input must be non-negative (shape {tuple(input.shape)})"
                         f"{_where()}")
    if weights is None:
        return Bincount.apply(input, minlength=int(minlength), out_dtype=np.dtype(np.int64))
    if not isinstance(weights, Tensor) or tuple(weights.shape) != tuple(input.shape):
        got = tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"bincount: weights must be a tensor of the input's shape "
                         f"{tuple(input.shape)}, got {got}")
    out_dtype = weights.data.dtype if weights.dtype.name in ("float32", "float64") else np.float64
    return Bincount.apply(input, weights.detach(), minlength=int(minlength),
                          out_dtype=np.dtype(out_dtype))


def _linear_edges(xp, lo, hi, bins, dtype):
    """bins + 1 evenly spaced edges from lo to hi, in `dtype` (torch.linspace's rule: the
    second half counted back from hi)."""
    i = xp.arange(bins + 1, dtype=dtype)
    step = (hi - lo) / dtype.type(bins)
    return xp.where(i < (bins + 1) // 2, lo + step * i, hi - step * (dtype.type(bins) - i))


class Histc(Function):
    """The counts of `bins` equal bins between lo and hi (the data's range when both are 0),
    entries outside ignored; the last bin includes hi."""
    # counts are piecewise constant in x: a zero derivative wherever one exists
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, x, bins, lo, hi):
        xp = _xp(x)
        t = x.dtype.type
        flat = x.reshape(-1)
        lo, hi = t(lo), t(hi)
        if lo == hi and flat.size:
            lo, hi = flat.min(), flat.max()
        if lo == hi:
            lo, hi = lo - t(1), hi + t(1)
        keep = (flat >= lo) & (flat <= hi)
        v = flat[keep]
        pos = ((v - lo) * t(bins) / (hi - lo)).astype(np.int64)
        pos = xp.minimum(pos, bins - 1)
        return xp.bincount(pos, minlength=bins)[:bins].astype(x.dtype)


def histc(input, bins=100, min=0, max=0):
    """torch.histc: counts in `bins` equal bins between min and max (the data's range if both
    are 0), as a tensor of input's dtype."""
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise TypeError(f"histc: input must be a floating tensor, got {got}")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {plain(bins)}")
    if min > max:
        raise ValueError(f"histc: max ({plain(max)}) must be at least min ({plain(min)})")
    return Histc.apply(input.detach(), bins=int(bins), lo=float(min), hi=float(max))


class HistogramDD(Function):
    """Counts (or summed weights) of the rows of a (N, D) array in a D-dimensional grid of
    bins: per dim an int (equal bins over `ranges` or the data's range) or given edges.
    Returns (hist, *edges)."""

    @staticmethod
    def jvp(ctx, *tangents):
        # the edges follow the data's range and the density its weights: neither torch nor
        # tinytensor's reverse mode differentiates this op, so forward mode refuses it too
        raise RuntimeError("histogramdd: the derivative is not implemented (torch has none "
                           "either); pass .detach() inputs to histogram inside tt.func.jvp")

    @staticmethod
    def forward(ctx, x, *tensors, bins, ranges, weighted, density):
        xp = _xp(x)
        t = x.dtype.type
        n_dims = x.shape[1]
        tensors = list(tensors)
        w = tensors.pop() if weighted else None
        edges, idxs = [], []
        for d in range(n_dims):
            col = x[:, d]
            if isinstance(bins[d], int):
                if ranges is not None:
                    lo, hi = t(ranges[2 * d]), t(ranges[2 * d + 1])
                elif col.size:
                    lo, hi = col.min(), col.max()
                else:  # no data: [0, 1], as torch and NumPy
                    lo, hi = t(0), t(1)
                if lo == hi:
                    lo, hi = lo - t(0.5), hi + t(0.5)
                e = _linear_edges(xp, lo, hi, bins[d], x.dtype)
            else:
                e = tensors.pop(0).astype(x.dtype, copy=False)
            edges.append(e)
            idxs.append(xp.searchsorted(e, col, side="right") - 1)
        nb = [e.size - 1 for e in edges]
        inside = xp.ones(x.shape[0], dtype=bool)
        for d in range(n_dims):
            col, e, k = x[:, d], edges[d], idxs[d]
            k[col == e[-1]] = nb[d] - 1  # the last bin includes its right edge
            inside &= (col >= e[0]) & (col <= e[-1])
            idxs[d] = k
        flat = xp.zeros(int(inside.sum()), dtype=np.int64)
        for d in range(n_dims):
            flat = flat * nb[d] + idxs[d][inside]
        size = int(np.prod(nb))
        wv = None if w is None else w.reshape(-1)[inside].astype(np.float64)
        hist = xp.bincount(flat, wv, minlength=size)[:size].astype(x.dtype).reshape(nb)
        if density:  # an empty histogram's density is 0 / 0 = nan, as torch's
            total = hist.sum()
            for d in range(n_dims):
                widths = (edges[d][1:] - edges[d][:-1]).reshape(
                    tuple(-1 if i == d else 1 for i in range(n_dims)))
                with np.errstate(invalid="ignore", divide="ignore"):
                    hist = hist / widths
            with np.errstate(invalid="ignore", divide="ignore"):
                hist = hist / total
        return (hist.astype(x.dtype, copy=False),) + tuple(edges)


def _dd(input, bins, range, weight, density, op, one_d):
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise TypeError(f"{op}: input must be a floating tensor, got {got}")
    if one_d:
        x = reshape(input, (-1, 1))
    else:
        if input.ndim < 1:
            raise ValueError(f"{op}: input must have at least 1 dim, got a 0-d tensor")
        x = reshape(input, (-1, input.shape[-1]))
    n_dims = x.shape[1]
    if isinstance(bins, (numbers.Integral, Tensor)) and not (isinstance(bins, Tensor) and not one_d):
        bins = [bins] * n_dims
    elif isinstance(bins, Tensor):
        raise TypeError(f"{op}: bins must be an int, a list of ints or a list of 1-d tensors")
    bins = list(bins)
    if len(bins) != n_dims:
        raise ValueError(f"{op}: expected {n_dims} bin specifications (one per dim), got {len(bins)}")
    edge_tensors, spec = [], []
    for b in bins:
        if isinstance(b, Tensor):
            if b.ndim != 1 or b.shape[0] < 1:
                raise ValueError(f"{op}: bin edges must be a non-empty 1-d tensor, got shape "
                                 f"{tuple(b.shape)}")
            edge_tensors.append(b.detach())
            spec.append(None)
        else:
            if int(b) <= 0:
                raise ValueError(f"{op}: bins must be positive, got {plain(b)}")
            spec.append(int(b))
    ranges = None
    if range is not None:
        ranges = tuple(float(v) for v in range)
        if len(ranges) != 2 * n_dims:
            raise ValueError(f"{op}: expected range to have {2 * n_dims} numbers, got {len(ranges)}")
        for d in builtins_range(n_dims):
            if ranges[2 * d] > ranges[2 * d + 1]:
                raise ValueError(f"{op}: min ({plain(ranges[2 * d])}) must not exceed max "
                                 f"({plain(ranges[2 * d + 1])})")
    extra = list(edge_tensors)
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.numel() != x.shape[0]:
            raise ValueError(f"{op}: weight must hold one entry per sample ({x.shape[0]})")
        extra.append(weight.detach())
    out = HistogramDD.apply(x.detach(), *extra, bins=tuple(spec), ranges=ranges,
                            weighted=weight is not None, density=bool(density))
    return out[0], list(out[1:])


builtins_range = range


HistogramResult = named_tuple(
    "HistogramResult", ("hist", "bin_edges"),
    "(hist, bin_edges), also readable by name like torch's return type.", __name__)


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of every entry: `bins` equal bins over `range` (the data's range by
    default) or the given 1-d edges."""
    hist, edges = _dd(input, bins, range, weight, density, "histogram", True)
    return HistogramResult((reshape(hist, (-1,)), edges[0]))


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of the rows of input (..., D) in a D-dimensional grid of bins."""
    hist, edges = _dd(input, bins, range, weight, density, "histogramdd", False)
    return HistogramResult((hist, edges))
