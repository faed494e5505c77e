"""sort, argsort and topk. Values are gathered at the sorting indices, so their gradient
scatters back to the positions they came from (ties keep their original order)."""
from ..core.tensor import Tensor
from .indexing import gather
from .movement import norm_dim, _where
from .reduce import ValuesIndices


def argsort(x, dim=-1, descending=False, stable=True):
    d = norm_dim(dim, x.ndim, "argsort")
    xp = x.device.xp
    data = -x.data if descending and x.data.dtype.kind != "b" else x.data
    if descending and x.data.dtype.kind == "b":
        data = ~x.data
    if x.ndim == 0:
        return Tensor._make(xp.zeros((), dtype="int64"), x.device, False)
    idx = xp.argsort(data, axis=d, kind="stable")
    return Tensor._make(idx.astype("int64", copy=False), x.device, False)


def sort(x, dim=-1, descending=False, stable=True):
    """(values, indices) like torch.sort."""
    if x.ndim == 0:
        return ValuesIndices((x, argsort(x)))
    idx = argsort(x, dim, descending)
    return ValuesIndices((gather(x, dim, idx), idx))


def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) entries along dim and their indices, like torch.topk."""
    d = norm_dim(dim, x.ndim, "topk")
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for dimension {dim} of size {n} "
                         f"(shape {tuple(x.shape)}){_where()}")
    idx = argsort(x, d, descending=largest)
    key = (slice(None),) * d + (slice(0, k),)
    idx = Tensor._make(idx.data[key], x.device, False)
    return ValuesIndices((gather(x, d, idx), idx))
