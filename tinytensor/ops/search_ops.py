"""Searching and deduplication: searchsorted, bucketize, unravel_index, argwhere, unique,
unique_consecutive.

searchsorted / bucketize keep their output's shape whatever the values, so each is one
recorded op (a compiled replay searches this call's values). argwhere, unique and
unique_consecutive return as many entries as the values say: they are refused under
tt.compile capture by name (read_value), and compute eagerly on the host array.
"""
import numpy as np

from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..messages import OpError
from .elementwise import as_tensor_like, cast, div, remainder
from .forward_mode import no_tangent
from .movement import _where
from .scatter import nonzero
from ..device import xp_of as _xp

__all__ = ["searchsorted", "bucketize", "unravel_index", "argwhere", "unique",
           "unique_consecutive"]


class SearchSorted(Function):
    """Insertion points of `values` in the rows of `seq` (sorted along its last dim, or
    put in order by `sorter`): int64 or int32, no gradient."""
    name = "searchsorted"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, seq, values, side, out_dtype):
        # torch's binary search, vectorised over every value at once: a step moves right
        # while not (mid >= v) (left) / not (mid > v) (right), so a nan, which compares
        # false, lands as torch puts it (NumPy's searchsorted orders nan last instead)
        xp = _xp(seq)
        n = seq.shape[-1]
        rows = int(np.prod(seq.shape[:-1], dtype=np.int64))
        s2 = seq.reshape(rows, n)
        v2 = (values.reshape(rows, values.shape[-1]) if seq.ndim > 1
              else values.reshape(1, values.size))
        lo = xp.zeros(v2.shape, dtype=np.int64)
        hi = xp.full(v2.shape, n, dtype=np.int64)
        row = xp.arange(s2.shape[0]).reshape(-1, 1)
        while n and bool((lo < hi).any()):
            active = lo < hi
            mid = (lo + hi) // 2
            m = s2[row, xp.minimum(mid, n - 1)]
            right = ~(m > v2) if side == "right" else ~(m >= v2)
            lo = xp.where(active & right, mid + 1, lo)
            hi = xp.where(active & ~right, mid, hi)
        return lo.astype(out_dtype).reshape(values.shape)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices where `input`'s values would go in `sorted_sequence` to keep it sorted
    (1-d, or N-d with input's leading dims); side='right' / right=True puts a value equal
    to an entry after it."""
    op = "searchsorted"
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"{op}: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError(f"{op}: side='left' and right=True contradict each other")
        right = side == "right"
    seq = sorted_sequence
    if not isinstance(seq, Tensor):
        raise TypeError(f"{op}: sorted_sequence must be a Tensor, got {type(seq).__name__}")
    scalar = not isinstance(input, Tensor)
    values = as_tensor_like(input, seq) if scalar else input
    if seq.ndim == 0:
        raise OpError(f"{op}: sorted_sequence must have at least one dimension{_where()}")
    if seq.ndim > 1 and (values.ndim != seq.ndim or tuple(values.shape[:-1]) != tuple(seq.shape[:-1])):
        raise OpError(f"{op}: sorted_sequence of shape {tuple(seq.shape)} needs input with the "
                      f"same leading dims, got {tuple(values.shape)}{_where()}")
    if sorter is not None:
        if not isinstance(sorter, Tensor) or tuple(sorter.shape) != tuple(seq.shape):
            raise OpError(f"{op}: sorter must be an integer Tensor of sorted_sequence's shape "
                          f"{tuple(seq.shape)}{_where()}")
        from .indexing import gather
        seq = gather(seq, seq.ndim - 1, sorter)  # in order: a recorded op, sorter may vary
    from ..dtypes import promote
    common = promote(seq.dtype, values.dtype)
    seq, values = cast(seq, common), cast(values, common)
    return SearchSorted.apply(seq, values, side="right" if right else "left",
                              out_dtype=np.int32 if out_int32 else np.int64)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """Index of the bucket of each value of input between 1-d `boundaries`: right=False
    puts a value equal to a boundary in the bucket that boundary opens... as torch does."""
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        got = tuple(boundaries.shape) if isinstance(boundaries, Tensor) else type(boundaries).__name__
        raise OpError(f"bucketize: boundaries must be a 1-d Tensor, got {got}{_where()}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unravel_index(indices, shape):
    """The coordinates in `shape` of flat indices, as a tuple of int64 tensors (negative
    indices count from the end of the flat range, as in torch)."""
    if not isinstance(indices, Tensor) or indices.data.dtype.kind not in "iu":
        raise TypeError("unravel_index: indices must be an integer Tensor")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: shape {shape} has a negative size")
    total = 1
    for s in shape:
        total *= s
    from ..dtypes import int64
    # torch's range is [-total, total): checked by a recorded op, so every replay checks
    idx = _FlatIndex.apply(cast(indices, int64), total=total, shape=shape)
    coords = []
    for s in reversed(shape):
        coords.append(remainder(idx, s) if s else idx)
        idx = div(idx, s, rounding_mode="floor") if s else idx
    return tuple(reversed(coords))


class _FlatIndex(Function):
    """The flat indices, checked to lie in [-total, total), negative ones counted from the
    end (Python ints: a total past int64 stays exact)."""
    name = "unravel_check"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, idx, total, shape):
        if idx.size:
            lo, hi = int(idx.min()), int(idx.max())
            if lo < -total or hi >= total:
                bad = hi if hi >= total else lo
                raise IndexError(f"unravel_index: index {bad} is out of range for shape {shape}")
        if total > np.iinfo(np.int64).max:   # no negative index can reach past int64 then
            return idx.copy()
        return _xp(idx).where(idx < 0, idx + total, idx)


def argwhere(input):
    """The indices of input's nonzero entries, one row each: an (n, input.ndim) int64
    tensor. n depends on the values, so tt.compile refuses it (as nonzero)."""
    STATE.hooks.read_value(input, "argwhere")
    return nonzero(input)


# ---------------------------------------------------------------- unique
def _groups(rows):
    """Start flags of runs of equal rows (a 2-d array, one row per entry)."""
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    flag = np.ones(rows.shape[0], dtype=bool)
    if rows.shape[1]:
        # nan != nan: each nan is a group of its own, as in torch
        flag[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    else:
        flag[1:] = False
    return flag


def _unique_arrays(a, dim, consecutive):
    """(values, inverse, counts) on host arrays, unique entries (dim None) or slices along dim."""
    if dim is None:
        flat = a.reshape(-1)
        rows, restore = flat.reshape(-1, 1), None
    else:
        moved = np.moveaxis(a, dim, 0)
        rest = int(np.prod(moved.shape[1:], dtype=np.int64))
        rows, restore = moved.reshape(moved.shape[0], rest), moved.shape[1:]
    if consecutive:
        order = np.arange(rows.shape[0])
    elif rows.shape[1] == 1:
        order = np.argsort(rows[:, 0], kind="stable")  # nan sorts last, as in torch
    else:
        order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])
    s = rows[order]
    flag = _groups(s)
    if not consecutive and dim is not None and rows.shape[1] == 0:
        flag[1:] = False  # all empty slices are equal
    group = np.cumsum(flag) - 1
    inverse = np.empty(rows.shape[0], dtype=np.int64)
    inverse[order] = group
    starts = np.flatnonzero(flag)
    counts = np.diff(np.append(starts, rows.shape[0])).astype(np.int64)
    values = s[flag]
    if dim is None:
        values = values.reshape(-1)
    else:
        values = np.moveaxis(values.reshape((values.shape[0],) + restore), 0, dim)
    return values, inverse, counts


def _unique(op, input, return_inverse, return_counts, dim, consecutive):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    STATE.hooks.read_value(input, op)   # the result's length is the values' to say
    if dim is not None:
        if input.ndim == 0:
            raise OpError(f"{op}: dim={dim} given for a 0-d tensor{_where()}")
        from .movement import norm_dim
        dim = norm_dim(dim, input.ndim, op)
    xp = input.device.xp
    host = input.data if xp is np else xp.asnumpy(input.data)
    values, inverse, counts = _unique_arrays(host, dim, consecutive)
    if dim is None:
        inverse = inverse.reshape(input.shape)
    dev = input.device
    out = [Tensor._make(xp.asarray(values), dev, False)]
    if return_inverse:
        out.append(Tensor._make(xp.asarray(inverse), dev, False))
    if return_counts:
        out.append(Tensor._make(xp.asarray(counts), dev, False))
    return out[0] if len(out) == 1 else tuple(out)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or slices along dim) of input, sorted (sorted=False gives them
    sorted too, which torch allows), with inverse indices and counts on request. The
    result's length depends on the values: refused under tt.compile capture; no gradient."""
    return _unique("unique", input, return_inverse, return_counts, dim, False)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """input with each run of equal consecutive values (or slices along dim) kept once."""
    return _unique("unique_consecutive", input, return_inverse, return_counts, dim, True)
