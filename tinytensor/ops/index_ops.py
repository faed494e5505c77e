"""torch's index family on top of the recorded indexing ops: index_add, index_copy,
index_fill, index_reduce, index_put, take, put, take_along_dim, masked_scatter, the
*_scatter ops, as_strided, fill.

Most are a getitem / setitem key or a scatter along `dim` with the index expanded to the
source's shape, so their gradients (and gradients of gradients) are those ops' own, and
an index tensor reaches its op as an array of the key: tt.compile reads it as an input at
every replay, never as a constant.
"""
import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from ..messages import OpError
from .elementwise import as_tensor_like, cast, mul, where
from .indexing import IndexAdd, IndexPut, _get, index_in_range, normalize_key, scatter_add
from .movement import _where, broadcast_shapes, broadcast_to, expand, movedim, norm_dim, reshape
from .scatter import scatter, scatter_reduce

__all__ = ["index_add", "index_copy", "index_fill", "index_reduce", "index_put", "take", "put",
           "take_along_dim", "masked_scatter", "select_scatter", "slice_scatter",
           "diagonal_scatter", "as_strided", "as_strided_scatter", "fill"]


def _index1(index, op):
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise TypeError(f"{op}: index must be an integer Tensor, got {got}")
    if index.ndim > 1:
        raise OpError(f"{op}: index must be 0-d or 1-d, got shape {tuple(index.shape)}{_where()}")
    return reshape(index, (-1,))


def _src(x, src, op, name="source"):
    if not isinstance(src, Tensor):
        return as_tensor_like(src, x)
    if src.device is not x.device:
        raise RuntimeError(f"{op}: {name} on {src.device} for an input on {x.device}")
    return cast(src, x.dtype)


def _along(x, dim, index, source, op):
    """(x, dim, index expanded to source's shape, source) with 0-d tensors as 1-d: the
    operands of the scatter that index_add / index_copy / index_reduce are."""
    x1 = reshape(x, (1,)) if x.ndim == 0 else x
    d = norm_dim(dim, x1.ndim, op)
    idx = _index1(index, op)
    source = reshape(source, (1,)) if source.ndim == 0 else source
    want = tuple(x1.shape[:d]) + (idx.shape[0],) + tuple(x1.shape[d + 1:])
    if tuple(source.shape) != want:
        raise OpError(f"{op}: source of shape {tuple(source.shape)} does not match the input "
                      f"{tuple(x.shape)} with dimension {dim} of size {idx.shape[0]} (the index's "
                      f"length): expected {want}{_where()}")
    idx = index_in_range(idx, x1.shape[d], d, op, "out of bounds")  # named after this op
    shape = [1] * x1.ndim
    shape[d] = idx.shape[0]
    return x1, d, expand(reshape(idx, tuple(shape)), *want), source


def index_add(input, dim, index, source, alpha=1):
    """input with alpha * source added at `index` along dim (repeated indices accumulate)."""
    source = _src(input, source, "index_add")
    if alpha != 1:
        source = mul(source, alpha)
    x1, d, idx, src = _along(input, dim, index, source, "index_add")
    return reshape(scatter_add(x1, d, idx, src), tuple(input.shape))


def index_copy(input, dim, index, source):
    """input with source's slices written at `index` along dim."""
    x1, d, idx, src = _along(input, dim, index, _src(input, source, "index_copy"), "index_copy")
    return reshape(scatter(x1, d, idx, src), tuple(input.shape))


def index_reduce(input, dim, index, source, reduce, include_self=True):
    """input with source's slices combined at `index` along dim by reduce ('prod', 'mean',
    'amax', 'amin'): scatter_reduce with the index spread over source's shape."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce must be 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    x1, d, idx, src = _along(input, dim, index, _src(input, source, "index_reduce"), "index_reduce")
    out = scatter_reduce(x1, d, idx, src, reduce, include_self=include_self)
    return reshape(out, tuple(input.shape))


def _indexed_shape(x, key):
    """The shape x[key] has, without reading x (a zero-strided stand-in is indexed)."""
    from .indexing import _target
    xp = x.device.xp
    a, k = _target(xp.broadcast_to(xp.zeros((), dtype=np.int8), tuple(x.shape)), key)
    return tuple(a[k].shape)


def _put(x, key, advanced, values, accumulate, op):
    shape = _indexed_shape(x, key)
    try:
        values = broadcast_to(values, shape)
    except (ValueError, OpError) as e:
        raise OpError(f"{op}: values of shape {tuple(values.shape)} cannot be broadcast to the "
                      f"indexed shape {shape} of an input of shape {tuple(x.shape)}{_where()}") from e
    if accumulate:
        return x + IndexAdd.apply(values, key=key, advanced=advanced, shape=tuple(x.shape))
    return IndexPut.apply(x, values, key=key, advanced=advanced)


def index_fill(input, dim, index, value):
    """input with every slice at `index` along dim set to value (a number or a 0-d tensor;
    negative indices count from the end, as in torch)."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise OpError(f"index_fill: value must be a number or a 0-d tensor, got shape "
                      f"{tuple(value.shape)}{_where()}")
    x1 = reshape(input, (1,)) if input.ndim == 0 else input
    d = norm_dim(dim, x1.ndim, "index_fill")
    key, adv = normalize_key(x1, (slice(None),) * d + (_index1(index, "index_fill"),), "index_fill")
    # a mask of the filled positions, then where: an index listed twice fills its slice
    # once, so value's gradient counts each position once
    mask = IndexPut.apply(Tensor._zeros_meta(tuple(x1.shape), _bool(), x1.device),
                          Tensor._ones_meta((), _bool(), x1.device), key=key, advanced=adv)
    out = where(mask, _src(input, value, "index_fill", "value"), x1)
    return reshape(out, tuple(input.shape))


def index_put(input, indices, values, accumulate=False):
    """input with values written (or, accumulate=True, added: repeated indices sum) at
    input[indices], indices a tuple of index tensors (None entries take whole dims)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
    key = tuple(slice(None) if k is None else k for k in indices)
    key, adv = normalize_key(input, key, "index_put")
    return _put(input, key, adv, _src(input, values, "index_put", "values"), accumulate, "index_put")


def take(input, index):
    """input read as if 1-d at `index` (any shape; negative entries count from the end)."""
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        raise TypeError("take: index must be an integer Tensor")
    flat = reshape(input, (-1,))
    key, adv = normalize_key(flat, (index,), "take")
    return _get(flat, key, adv)


def put(input, index, source, accumulate=False):
    """input read as if 1-d with source's entries written (accumulate=True: added) at index."""
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        raise TypeError("put: index must be an integer Tensor")
    source = _src(input, source, "put")
    if source.numel() != index.numel():
        raise OpError(f"put: source has {source.numel()} elements but index has {index.numel()} "
                      f"(shapes {tuple(source.shape)} and {tuple(index.shape)}){_where()}")
    flat = reshape(input, (-1,))
    key, adv = normalize_key(flat, (reshape(index, (-1,)),), "put")
    return reshape(_put(flat, key, adv, reshape(source, (-1,)), accumulate, "put"), tuple(input.shape))


def take_along_dim(input, indices, dim=None):
    """input's entries at `indices` along dim, the other dims broadcast together (dim=None:
    input and indices read as 1-d); negative indices count from the end, as in torch."""
    if not isinstance(indices, Tensor) or indices.data.dtype.kind not in "iu":
        raise TypeError("take_along_dim: indices must be an integer Tensor")
    if dim is None:
        return take(input, reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise OpError(f"take_along_dim: input and indices must have the same number of dimensions, "
                      f"got shapes {tuple(input.shape)} and {tuple(indices.shape)}{_where()}")
    d = norm_dim(dim, input.ndim, "take_along_dim")
    x = reshape(input, (1,)) if input.ndim == 0 else input
    idx = reshape(indices, (1,)) if indices.ndim == 0 else indices
    others = lambda s, n: tuple(s[:d]) + (n,) + tuple(s[d + 1:])  # noqa: E731
    try:
        common = broadcast_shapes(others(x.shape, 1), others(idx.shape, 1), op="take_along_dim")
    except (ValueError, OpError) as e:
        raise OpError(f"take_along_dim: input {tuple(input.shape)} and indices "
                      f"{tuple(indices.shape)} do not broadcast outside dim {dim}{_where()}") from e
    x = broadcast_to(x, others(common, x.shape[d]))
    idx = broadcast_to(idx, others(common, idx.shape[d]))
    key = []
    for i, n in enumerate(idx.shape):  # arange along every other dim, the indices along d
        if i == d:
            key.append(idx)
        else:
            shape = [1] * idx.ndim
            shape[i] = n
            key.append(np.arange(n).reshape(shape))
    key, adv = normalize_key(x, tuple(key), "take_along_dim")
    return reshape(_get(x, key, adv), tuple(indices.shape) if input.ndim == 0 else tuple(idx.shape))


# ---------------------------------------------------------------- masked_scatter
class MaskedScatter(Function):
    """x with the True positions of mask (x's shape) filled, in order, by source's first
    entries: how many depends on the mask's values, so this is one recorded op, and a
    compiled replay counts this call's mask."""
    name = "masked_scatter"

    @staticmethod
    def forward(ctx, x, mask, source):
        ctx.save_for_backward(mask)
        n = int(mask.sum())
        if n > source.size:
            raise RuntimeError(f"masked_scatter: the mask has {n} True entries but source has "
                               f"only {source.size} elements (shape {tuple(source.shape)})")
        out = x.copy()
        out[mask] = source.reshape(-1)[:n]
        return out

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        nx, _, ns = ctx.needs_input_grad
        gx = where(mask, Tensor._zeros_meta((), g.dtype, g.device), g) if nx else None
        gs = MaskedGather.apply(g, mask, shape=ctx.in_meta[2][0]) if ns else None
        return gx, None, gs

    @staticmethod
    def jvp(ctx, tx, tmask, tsrc):   # linear in (x, source): the tangents placed alike
        (xshape, dtype, device), sshape = ctx.in_meta[0], ctx.in_meta[2][0]
        return MaskedScatter.apply(tx if tx is not None else Tensor._zeros_meta(xshape, dtype, device),
                                   ctx.saved_tensor(0),
                                   tsrc if tsrc is not None else Tensor._zeros_meta(sshape, dtype, device))


class MaskedGather(Function):
    """g's entries at mask's True positions, in order, padded with zeros to `shape`: the
    gradient of masked_scatter's source (its own gradient is masked_scatter of it)."""
    name = "masked_gather"

    @staticmethod
    def forward(ctx, g, mask, shape):
        ctx.save_for_backward(mask)
        xp = np if isinstance(g, np.ndarray) else __import__("cupy").get_array_module(g)
        out = xp.zeros(int(np.prod(shape, dtype=np.int64)), dtype=g.dtype)
        picked = g[mask]
        out[:picked.size] = picked
        return out.reshape(shape)

    @staticmethod
    def backward(ctx, gg):
        (mask,) = ctx.saved_tensors
        zeros = Tensor._zeros_meta(tuple(mask.shape), gg.dtype, gg.device)
        return MaskedScatter.apply(zeros, mask, gg), None

    @staticmethod
    def jvp(ctx, tg, tmask):   # linear
        return MaskedGather.apply(tg, ctx.saved_tensor(0), shape=ctx.attrs["shape"])


def masked_scatter(input, mask, source):
    """input with the True entries of mask (broadcast with input) replaced, in row-major
    order, by source's leading entries."""
    if not isinstance(mask, Tensor) or mask.data.dtype != np.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"masked_scatter: mask must be a bool Tensor, got {got}")
    if not isinstance(source, Tensor):
        raise TypeError("masked_scatter: source must be a Tensor")
    if source.dtype is not input.dtype:
        raise TypeError(f"masked_scatter: source is {source.dtype.name} but the input is "
                        f"{input.dtype.name}; they must match")
    shape = broadcast_shapes(input.shape, mask.shape, op="masked_scatter")
    x, m = broadcast_to(input, shape), broadcast_to(mask, shape)
    return MaskedScatter.apply(x, m, source)


# ---------------------------------------------------------------- *_scatter
def _embed(input, src, key, advanced, op):
    src = _src(input, src, op, "src")
    want = _indexed_shape(input, key)
    if tuple(src.shape) != want:
        raise OpError(f"{op}: src of shape {tuple(src.shape)} does not match the embedded part of "
                      f"the input {tuple(input.shape)}, of shape {want}{_where()}")
    return IndexPut.apply(input, src, key=key, advanced=advanced)


def select_scatter(input, src, dim, index):
    """input with src written at input.select(dim, index)."""
    d = norm_dim(dim, input.ndim, "select_scatter")
    key, adv = normalize_key(input, (slice(None),) * d + (int(index),), "select_scatter")
    return _embed(input, src, key, adv, "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with src written at input[..., start:end:step, ...] (along dim)."""
    d = norm_dim(dim, input.ndim, "slice_scatter")
    key, adv = normalize_key(input, (slice(None),) * d + (slice(start, end, step),), "slice_scatter")
    return _embed(input, src, key, adv, "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with src written on the diagonal that input.diagonal(offset, dim1, dim2) reads."""
    d1, d2 = norm_dim(dim1, input.ndim, "diagonal_scatter"), norm_dim(dim2, input.ndim, "diagonal_scatter")
    if d1 == d2:
        raise OpError(f"diagonal_scatter: dim1 and dim2 are both {dim1}{_where()}")
    x = movedim(input, (d1, d2), (-2, -1))  # the diagonal's dim comes last, as diagonal() puts it
    n, m = x.shape[-2], x.shape[-1]
    length = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    i = np.arange(length)
    key = (Ellipsis, i - min(offset, 0), i + max(offset, 0))
    key, adv = normalize_key(x, key, "diagonal_scatter")
    out = _embed(x, src, key, adv, "diagonal_scatter")
    return movedim(out, (-2, -1), (d1, d2))


# ---------------------------------------------------------------- as_strided
def _strided_positions(size, stride, offset, op):
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise OpError(f"{op}: size {size} and stride {stride} differ in length{_where()}")
    if any(s < 0 for s in stride) or any(s < 0 for s in size) or offset < 0:
        raise OpError(f"{op}: negative size, stride or storage_offset ({size}, {stride}, "
                      f"{offset}){_where()}")
    pos = np.full(size, int(offset), dtype=np.int64)
    for i, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[i] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return pos


def as_strided(input, size, stride, storage_offset=0):
    """The entries of input's row-major storage at offset + sum(i_k * stride_k), as a new
    tensor of `size`. Unlike torch this is a copy, not a view (tinytensor tensors are arrays,
    not storages): writing into it does not write into input."""
    pos = _strided_positions(size, stride, storage_offset, "as_strided")
    flat = reshape(input, (-1,))
    if pos.size and int(pos.max()) >= flat.shape[0]:
        raise OpError(f"as_strided: size {tuple(size)}, stride {tuple(stride)} and offset "
                      f"{storage_offset} reach element {int(pos.max())} of an input with "
                      f"{flat.shape[0]}{_where()}")
    key, adv = normalize_key(flat, (flat.device.xp.asarray(pos),), "as_strided")
    return _get(flat, key, adv)


def as_strided_scatter(input, src, size, stride, storage_offset=0):
    """input with src written at the positions as_strided(input, size, stride, offset) reads."""
    pos = _strided_positions(size, stride, storage_offset, "as_strided_scatter")
    flat = reshape(input, (-1,))
    key, adv = normalize_key(flat, (flat.device.xp.asarray(pos),), "as_strided_scatter")
    return reshape(_embed(flat, src, key, adv, "as_strided_scatter"), tuple(input.shape))


def fill(input, value):
    """A tensor of input's shape and dtype filled with value (a number or a 0-d tensor);
    input's gradient is zero, as in torch."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise OpError(f"fill: value must be a number or a 0-d tensor, got shape "
                      f"{tuple(value.shape)}{_where()}")
    v = expand(_src(input, value, "fill", "value"), *input.shape)
    keep = Tensor._zeros_meta(tuple(input.shape), _bool(), input.device)
    return where(keep, input, v)  # input stays in the graph with a zero gradient


def _bool():
    from ..dtypes import bool_
    return bool_
