"""The in-place forms of the index family (`x.index_add_(...)` and friends): each runs
its out-of-place op through inplace.apply_inplace, so autograd and tt.compile treat it as
they treat add_ or setitem (recorded on a clone while autograd records; refused under
capture where it writes a traced tensor)."""
from ..core.tensor import Tensor
from .inplace import apply_inplace
from .index_ops import (index_add, index_copy, index_fill, index_put, index_reduce,
                        masked_scatter, put)
from .indexing import scatter_add
from .scatter import scatter, scatter_reduce

__all__ = ["index_add_", "index_copy_", "index_fill_", "index_put_", "index_reduce_", "put_",
           "masked_scatter_", "scatter_", "scatter_add_", "scatter_reduce_"]


def _tensors(*xs):
    return tuple(x for x in xs if isinstance(x, Tensor))


def _at_index(x, name, op, dim, index, operand, *args, **kwargs):
    """x.name(dim, index, operand, ...): op(x, dim, index, operand, ...) in place, index the
    key tensor (the ops of this family that take that one argument order)."""
    return apply_inplace(x, name, lambda t, s: op(t, dim, index, s, *args, **kwargs), operand,
                         _key_tensors=_tensors(index))


def index_add_(x, dim, index, source, alpha=1):
    return _at_index(x, "index_add_", index_add, dim, index, source, alpha=alpha)


def index_copy_(x, dim, index, source):
    return _at_index(x, "index_copy_", index_copy, dim, index, source)


def index_fill_(x, dim, index, value):
    return _at_index(x, "index_fill_", index_fill, dim, index, value)


def index_reduce_(x, dim, index, source, reduce, include_self=True):
    return _at_index(x, "index_reduce_", index_reduce, dim, index, source, reduce, include_self=include_self)


def index_put_(x, indices, values, accumulate=False):
    return apply_inplace(x, "index_put_", lambda t, v: index_put(t, indices, v, accumulate=accumulate),
                         values, _key_tensors=_tensors(*indices))


def put_(x, index, source, accumulate=False):
    return apply_inplace(x, "put_", lambda t, s: put(t, index, s, accumulate=accumulate), source,
                         _key_tensors=_tensors(index))


def masked_scatter_(x, mask, source):
    if isinstance(mask, Tensor) and tuple(mask.shape) != tuple(x.shape):
        from .movement import broadcast_shapes
        if broadcast_shapes(x.shape, mask.shape, op="masked_scatter_") != tuple(x.shape):
            raise RuntimeError(f"masked_scatter_: mask of shape {tuple(mask.shape)} does not "
                               f"broadcast to the in-place tensor's shape {tuple(x.shape)}")
    return apply_inplace(x, "masked_scatter_", lambda t, s: masked_scatter(t, mask, s), source,
                         _key_tensors=_tensors(mask))


def scatter_(x, dim, index, src=None, value=None, reduce=None):
    return apply_inplace(x, "scatter_", lambda t, *s: scatter(t, dim, index, *s, value=value, reduce=reduce),
                         *((src,) if src is not None else ()), _key_tensors=_tensors(index))


def scatter_add_(x, dim, index, src):
    return _at_index(x, "scatter_add_", scatter_add, dim, index, src)


def scatter_reduce_(x, dim, index, src, reduce, include_self=True):
    return _at_index(x, "scatter_reduce_", scatter_reduce, dim, index, src, reduce, include_self=include_self)
