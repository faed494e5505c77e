"""Indexing ops: getitem/setitem, gather/scatter_add, masked_fill, index_select, embedding.

Gradients of indexing scatter back with accumulation (`add.at`), so an index that
appears twice receives both contributions.
"""
import numpy as np

from ..autograd import STATE
from ..function import Function
from ..tensor import Tensor
from .movement import norm_dim, reshape, _where


def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy").get_array_module(a)


def _add_at(xp, out, key, values):
    if xp is np:
        np.add.at(out, key, values)
    else:
        import cupyx
        cupyx.scatter_add(out, key, values)


# ---------------------------------------------------------------- key normalization
def normalize_key(x, key, op="getitem"):
    """Turn a user index into (key for the array module, has_advanced)."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    advanced = False
    for k in key:
        if isinstance(k, Tensor):
            if k.device is not x.device:
                raise RuntimeError(f"{op}: index on {k.device} for a tensor on {x.device}")
            k = k.data
        elif isinstance(k, (list, np.ndarray)):
            k = x.device.xp.asarray(k)
        if hasattr(k, "dtype") and hasattr(k, "ndim"):
            if k.dtype == np.bool_:
                out.extend(k.nonzero())  # a mask is the integer indices of its True entries
                advanced = True
                continue
            if k.dtype.kind not in "iu":
                raise IndexError(f"{op}: tensors used as indices must be integer or bool, got {k.dtype}")
            advanced = True
        elif isinstance(k, (bool, np.bool_)):
            raise IndexError(f"{op}: a Python bool is not supported as an index")
        out.append(k)
    key = tuple(out)
    _check_bounds(x, key, op)
    return key, advanced


def _check_bounds(x, key, op):
    # NumPy checks bounds itself, but CuPy wraps silently: check every integer index here
    dim = 0
    n_specified = sum(1 for k in key if k is not None and k is not Ellipsis)
    for k in key:
        if k is Ellipsis:
            dim += x.ndim - n_specified
            continue
        if k is None:
            continue
        if dim >= x.ndim:
            raise IndexError(f"{op}: too many indices for a tensor of shape {tuple(x.shape)}{_where()}")
        size = x.shape[dim]
        if isinstance(k, (int, np.integer)):
            if not -size <= k < size:
                raise IndexError(f"{op}: index {k} is out of range for dimension {dim} with size "
                                 f"{size} (tensor shape {tuple(x.shape)}){_where()}")
        elif hasattr(k, "ndim") and k.size:
            lo, hi = int(k.min()), int(k.max())
            if lo < -size or hi >= size:
                bad = hi if hi >= size else lo
                raise IndexError(f"{op}: index {bad} is out of range for dimension {dim} with "
                                 f"size {size} (tensor shape {tuple(x.shape)}){_where()}")
        dim += 1


# ---------------------------------------------------------------- getitem
class GetItem(Function):
    is_view = True  # basic slicing returns a view; advanced indexing copies (harmless here)

    @staticmethod
    def forward(ctx, x, key, advanced):
        return x[key]

    @staticmethod
    def backward(ctx, g):
        shape, dtype = ctx.in_meta[0][0], ctx.in_meta[0][1]
        return IndexAdd.apply(g, key=ctx.attrs["key"], advanced=ctx.attrs["advanced"], shape=shape)


class IndexAdd(Function):
    """zeros(shape) with `g` added at `key`: the gradient of getitem."""
    name = "index_add"

    @staticmethod
    def forward(ctx, g, key, advanced, shape):
        xp = _xp(g)
        out = xp.zeros(shape, dtype=g.dtype)
        if advanced:
            _add_at(xp, out, key, g)
        else:
            out[key] = g
        return out

    @staticmethod
    def backward(ctx, gg):
        return GetItem.apply(gg, key=ctx.attrs["key"], advanced=ctx.attrs["advanced"])


def getitem(x, key):
    key, advanced = normalize_key(x, key)
    return GetItem.apply(x, key=key, advanced=advanced)


# ---------------------------------------------------------------- setitem
class IndexPut(Function):
    """x with `value` written at `key` (out of place): the recorded form of setitem."""
    name = "index_put"

    @staticmethod
    def forward(ctx, x, value, key, advanced):
        out = x.copy()
        out[key] = value
        return out

    @staticmethod
    def backward(ctx, g):
        key, adv = ctx.attrs["key"], ctx.attrs["advanced"]
        nx, nv = ctx.needs_input_grad
        gx = IndexPut.apply(g, Tensor._zeros_meta((), g.dtype, g.device), key=key, advanced=adv) if nx else None
        gv = GetItem.apply(g, key=key, advanced=adv) if nv else None
        return gx, gv


def setitem(x, key, value):
    from .elementwise import as_tensor_like, cast
    from .inplace import apply_inplace
    key, advanced = normalize_key(x, key, "setitem")
    value = as_tensor_like(value, x) if not isinstance(value, Tensor) else cast(value, x.dtype)
    if value.device is not x.device:
        raise RuntimeError(f"setitem: value on {value.device} for a tensor on {x.device}")
    apply_inplace(x, "setitem", lambda t, v: IndexPut.apply(t, v, key=key, advanced=advanced), value)


# ---------------------------------------------------------------- gather / scatter_add
def _along_dim_key(xp, index, dim):
    """Full index arrays addressing `index` positions along `dim` (take_along_axis style)."""
    key = []
    for d in range(index.ndim):
        if d == dim:
            key.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = index.shape[d]
            key.append(xp.arange(index.shape[d]).reshape(shape))
    return tuple(key)


def _check_index(x, dim, index, op):
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer Tensor")
    if index.ndim != x.ndim:
        raise ValueError(f"{op}: index has {index.ndim} dimensions but the input has {x.ndim} "
                         f"(shapes {tuple(index.shape)} and {tuple(x.shape)}){_where()}")
    d = norm_dim(dim, x.ndim, op)
    for i in range(x.ndim):
        if i != d and index.shape[i] > x.shape[i]:
            raise ValueError(f"{op}: index shape {tuple(index.shape)} exceeds input shape "
                             f"{tuple(x.shape)} in dimension {i}{_where()}")
    if index.numel():
        lo, hi = int(index.data.min()), int(index.data.max())
        if lo < 0 or hi >= x.shape[d]:
            raise IndexError(f"{op}: index {hi if hi >= x.shape[d] else lo} is out of range for "
                             f"dimension {d} with size {x.shape[d]}{_where()}")
    return d


def gather(x, dim, index):
    d = _check_index(x, dim, index, "gather")
    out = _GatherOp.apply(x, index, dim=d)
    return out


class _GatherOp(Function):
    name = "gather"

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.save_for_backward(index)
        return x[_along_dim_key(_xp(x), index, dim)]

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = Tensor._zeros_meta(ctx.in_meta[0][0], g.dtype, g.device)
        return ScatterAdd.apply(zeros, index, g, dim=ctx.attrs["dim"]), None


class ScatterAdd(Function):
    @staticmethod
    def forward(ctx, x, index, src, dim):
        ctx.save_for_backward(index)
        xp = _xp(x)
        out = x.copy()
        sl = tuple(slice(0, s) for s in index.shape)
        _add_at(xp, out, _along_dim_key(xp, index, dim), src[sl])
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        nx, _, ns = ctx.needs_input_grad
        gsrc = None
        if ns:
            gsrc = _GatherOp.apply(g, index, dim=ctx.attrs["dim"])
            src_shape = ctx.in_meta[2][0]
            if gsrc.shape != src_shape:  # src may be larger than index: pad with zeros
                from .movement import pad as pad_
                widths = []
                for s, t in zip(reversed(gsrc.shape), reversed(src_shape)):
                    widths += [0, t - s]
                gsrc = pad_(gsrc, widths)
        return (g if nx else None), None, gsrc


def scatter_add(x, dim, index, src):
    d = _check_index(x, dim, index, "scatter_add")
    if any(i > s for i, s in zip(index.shape, src.shape)):
        raise ValueError(f"scatter_add: index shape {tuple(index.shape)} exceeds src shape "
                         f"{tuple(src.shape)}{_where()}")
    from .elementwise import cast
    return ScatterAdd.apply(x, index, cast(src, x.dtype), dim=d)


# ---------------------------------------------------------------- masks and lookups
def masked_fill(x, mask, value):
    from .elementwise import where
    if not isinstance(mask, Tensor) or mask.data.dtype != np.bool_:
        raise TypeError("masked_fill: mask must be a bool Tensor")
    from .elementwise import as_tensor_like
    v = value if isinstance(value, Tensor) else as_tensor_like(value, x)
    return where(mask, v.to(x.dtype), x)


def index_select(x, dim, index):
    d = norm_dim(dim, x.ndim, "index_select")
    if not isinstance(index, Tensor) or index.ndim > 1 or index.data.dtype.kind not in "iu":
        raise TypeError("index_select: index must be a 0-d or 1-d integer Tensor")
    return getitem(x, (slice(None),) * d + (index.reshape(-1),))


def embedding(ids, weight, padding_idx=None):
    """Rows of `weight` (num_embeddings, dim) for integer `ids` of any shape."""
    if not isinstance(ids, Tensor) or ids.data.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be an integer Tensor, got "
                        f"{ids.dtype.name if isinstance(ids, Tensor) else type(ids).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D, got shape {tuple(weight.shape)}")
    out = getitem(weight, ids)
    if padding_idx is not None and weight.requires_grad:
        # the padding row gets no gradient: route its lookups through a constant
        from .elementwise import where
        keep = (ids != padding_idx).unsqueeze(-1)
        out = where(keep, out, out.detach())
    return out
