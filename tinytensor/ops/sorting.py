"""sort, argsort and topk. Values are gathered at the sorting indices, so their gradient
scatters back to the positions they came from (ties keep their original order). The
indices come from a recorded op (Argsort), so a compiled program sorts each call's values."""
import numpy as np

from ..core.function import Function
from ..kernels import c_rows as _c_rows
from .elementwise import _xp
from .forward_mode import no_tangent
from .indexing import gather
from .movement import norm_dim, _where, reshape
from .reduce import ValuesIndices


class Argsort(Function):
    """Stable sorting indices along `dim` (int64), descending on request; the first `k`
    of them when k is given (topk)."""
    jvp = staticmethod(no_tangent)   # indices (sort's values take their tangent by gather)

    @staticmethod
    def forward(ctx, x, dim, descending, k=None):
        xp = _xp(x)
        if x.ndim == 0:
            return xp.zeros((), np.int64)
        if k is not None and dim == x.ndim - 1:
            got = _c_rows.topk_indices(x, k, descending)   # a C selection, not a full sort
            if got is not None:
                return got
        if descending:
            # largest first, ties in index order, nan the largest (torch's order): the stable
            # ascending order of x reversed along dim, read backwards. Not argsort(-x): -x
            # wraps unsigned ints and the most negative int, and keeps nan last
            n = x.shape[dim]
            flipped = xp.argsort(xp.flip(x, axis=dim), axis=dim, kind="stable")
            idx = (n - 1) - xp.flip(flipped, axis=dim).astype(np.int64, copy=False)
        else:
            idx = xp.argsort(x, axis=dim, kind="stable").astype(np.int64, copy=False)
        if k is not None:
            idx = idx[(slice(None),) * dim + (slice(0, k),)]
        return idx


def argsort(x, dim=-1, descending=False, stable=True):
    d = norm_dim(dim, x.ndim, "argsort")
    return Argsort.apply(x, dim=d, descending=bool(descending))


def sort(x, dim=-1, descending=False, stable=True):
    """(values, indices) like torch.sort."""
    if x.ndim == 0:
        return ValuesIndices((x, argsort(x)))
    idx = argsort(x, dim, descending)
    return ValuesIndices((gather(x, dim, idx), idx))


def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) entries along dim and their indices, like torch.topk."""
    if x.ndim == 0:
        # torch reads a 0-d input as one entry and answers 0-d, for k = 0 as for k = 1
        norm_dim(dim, 1, "topk")
        if k not in (0, 1):
            raise ValueError(f"topk: k={k} is out of range for a 0-d tensor{_where()}")
        values, indices = topk(reshape(x, (1,)), 1, 0, largest, sorted)
        return ValuesIndices((reshape(values, ()), reshape(indices, ())))
    d = norm_dim(dim, x.ndim, "topk")
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for dimension {dim} of size {n} "
                         f"(shape {tuple(x.shape)}){_where()}")
    idx = Argsort.apply(x, dim=d, descending=bool(largest), k=int(k))
    return ValuesIndices((gather(x, d, idx), idx))
