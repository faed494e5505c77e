"""Indexing ops: getitem/setitem, gather/scatter_add, masked_fill, index_select, embedding.

Gradients of indexing scatter back with accumulation (`add.at`), so an index that
appears twice receives both contributions.
"""
import numpy as np

from ..core.function import Function, arrays_serve
from ..core.rules import Rule
from ..core.grad_mode import STATE, VMAP_WRAPPERS
from ..messages import OpError
from ..core.tensor import Tensor
from ..core.forward_ad import linear_jvp
from ..kernels import c_rows as _c_rows, c_scatter_rows as _c_scatter_rows
from .elementwise import as_tensor_like, cast, where
from .inplace import apply_inplace
from .movement import _where, broadcast_shapes, norm_dim, pad as pad_, reshape
from ..device import xp_of as _xp


def _add_at(xp, out, key, values):
    if xp is np:
        # one integer array on the first dim (embedding's gradient): a C pass, add.at's bits
        if not (type(key) is tuple and len(key) == 1 and _c_scatter_rows.add_rows(out, key[0], values)):
            np.add.at(out, key, values)
    else:
        # cupyx comes with CuPy, which is optional: only CUDA arrays get here
        import cupyx
        cupyx.scatter_add(out, key, values)


# ---------------------------------------------------------------- key normalization
def normalize_key(x, key, op="getitem"):
    """Turn a user index into (key for the array module, has_advanced).

    Bool masks become the integer arrays of their True entries; a key whose integers
    PyTorch would apply before its arrays becomes an `IntsFirst` (see there)."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if isinstance(k, Tensor):
            if k._level is not None:   # its values would be read here: the dummy of a batched tensor
                raise RuntimeError(f"vmap: {op} with a batched index tensor is not supported (the "
                                   "index values are read before the op runs); index each example "
                                   f"outside vmap, or use gather / x[index]{_where()}")
            if k.device is not x.device:
                raise RuntimeError(f"{op}: index on {k.device} for a tensor on {x.device}")
            if k.data.dtype == np.bool_:
                # its True positions become the key: values a compiled replay would freeze
                STATE.hooks.read_value(k, f"{op} with a boolean mask")
            k = k.data
        elif isinstance(k, (list, np.ndarray)):
            k = x.device.xp.asarray(k, dtype=np.int64 if isinstance(k, list) and not k else None)
        elif isinstance(k, (bool, np.bool_)):
            raise IndexError(f"{op}: a Python bool is not supported as an index")
        if hasattr(k, "dtype") and hasattr(k, "ndim"):
            if k.dtype != np.bool_ and k.dtype.kind not in "iu":
                raise IndexError(f"{op}: tensors used as indices must be integer or bool, got "
                                 f"{k.dtype}{_where()}")
        items.append(k)
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError(f"{op}: an index can hold at most one Ellipsis (...), got {len(key)} "
                         f"entries{_where()}")
    # every entry consumes dims of x: a bool mask as many as it has, None and ... none here
    used = sum(k.ndim if _is_mask(k) else 1 for k in items if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"{op}: too many indices ({used}) for a tensor of shape "
                         f"{tuple(x.shape)}{_where()}")
    out, dim, advanced = [], 0, False
    for k in items:
        if k is Ellipsis:
            dim += x.ndim - used
        elif _is_mask(k):
            if k.ndim == 0:  # x[True] / x[False]: a new dim of size 1 / 0
                raise IndexError(f"{op}: a 0-d bool mask is not supported as an index")
            if tuple(k.shape) != tuple(x.shape[dim:dim + k.ndim]):
                raise IndexError(f"{op}: mask of shape {tuple(k.shape)} does not match the "
                                 f"indexed tensor of shape {tuple(x.shape)} at dimension "
                                 f"{dim}{_where()}")
            out.extend(k.nonzero())  # a mask is the integer indices of its True entries
            advanced = True
            dim += k.ndim
            continue
        elif k is not None:
            advanced = advanced or hasattr(k, "ndim")
            if isinstance(k, slice) and STATE.hooks.is_size(x.shape[dim]):
                k = _sized_slice(k, x.shape[dim])
            dim += 1
        out.append(k)
    key = tuple(out)
    _check_bounds(x, key, op)
    if advanced:
        key = _ints_first(key)
    return key, advanced


def _sized_slice(k, n):
    """slice k of a dim whose size n is symbolic (tt.compile(dynamic=True)), resolved as
    slice.indices resolves it, in Python: the comparisons (is -16 + T below 0?) are guards
    of the capture, so x[:, -16:] captured at T = 4 is not taken to be all of T at T = 20."""
    step = 1 if k.step is None else k.step
    if step == 0:
        raise ValueError("slice step cannot be zero")
    lo, hi = (0, n) if step > 0 else (-1, n - 1)

    def bound(v, default):
        if v is None:
            return default
        if v < 0:
            v = v + n
            return lo if v < lo else v
        return hi if v > hi else v
    start, stop = bound(k.start, lo if step > 0 else hi), bound(k.stop, hi if step > 0 else lo)
    if step < 0 and type(stop) is int and stop == -1:
        stop = None   # "before index 0": NumPy would read -1 as the last element
    return slice(start, stop, step)


class IntsFirst(tuple):
    """(first, rest): a key PyTorch and NumPy place differently, split in two steps.

    PyTorch applies integer indices before index arrays, so in x[1, :, [0, 1]] the array
    stays in place (shape (4, 2) for x of shape (3, 4, 5)); NumPy counts the integer as an
    array too, which separates the arrays and moves their dims first ((2, 4)). Indexing
    with `first` (the integers, as basic indexing: a view) and then with `rest` gives
    PyTorch's result."""

    def __repr__(self):
        return f"IntsFirst{tuple(self)!r}"


def _is_array(k):
    return hasattr(k, "ndim") and k.ndim > 0


def _is_int(k):
    return isinstance(k, (int, np.integer)) or (hasattr(k, "ndim") and k.ndim == 0)


def _adjacent(positions):
    return not positions or positions[-1] - positions[0] == len(positions) - 1


def _ints_first(key):
    arrays = [i for i, k in enumerate(key) if _is_array(k)]
    with_ints = [i for i, k in enumerate(key) if _is_array(k) or _is_int(k)]
    if not arrays or not _adjacent(arrays) or _adjacent(with_ints):
        return key  # both libraries place the array dims alike
    first = tuple(int(k) if _is_int(k) else Ellipsis if k is Ellipsis else slice(None)
                  for k in key if k is not None)
    rest = tuple(k for k in key if not _is_int(k))
    return IntsFirst((first, rest))


def _target(a, key):
    """(array, key) to index or write: a view of `a` for an IntsFirst key."""
    if isinstance(key, IntsFirst):
        return a[key[0]], key[1]
    return a, key


def _is_mask(k):
    return hasattr(k, "dtype") and hasattr(k, "ndim") and k.dtype == np.bool_


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
    compile_rule = Rule(flops=0)   # moves or picks elements: no arithmetic
    name = "getitem"
    is_view = True  # basic indexing (ints, slices, None, ...) returns a view of x
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, key, advanced):
        a, k = _target(x, key)
        return a[k]

    @staticmethod
    def backward(ctx, g):
        return IndexAdd.apply(g, key=ctx.attrs["key"], advanced=ctx.attrs["advanced"],
                              shape=ctx.in_meta[0][0])

    @staticmethod
    def backward_arrays(ctx, g):
        """backward's IndexAdd forward on the array."""
        if not arrays_serve(g):
            return NotImplemented
        return IndexAdd.forward(None, g, ctx.attrs["key"], ctx.attrs["advanced"], ctx.in_meta[0][0])


class GetItemCopy(GetItem):
    """Advanced indexing: the result is a copy, so it must not share x's version counter
    (x could not be modified in place afterwards, and writes to the copy would look like
    writes to x)."""
    name = "getitem"
    is_view = False


def _get(x, key, advanced):
    return (GetItemCopy if advanced else GetItem).apply(x, key=key, advanced=advanced)


class IndexAdd(Function):
    """zeros(shape) with `g` added at `key`: the gradient of getitem."""
    name = "index_add"
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, g, key, advanced, shape):
        return IndexAdd.forward_into(_xp(g).zeros(shape, dtype=g.dtype), g, key, advanced, shape,
                                     zeroed=True)

    @staticmethod
    def forward_into(out, g, key, advanced, shape, zeroed=False):
        """forward's result computed into `out` (C-contiguous, of `shape` and g's dtype):
        the compiler's runner gives it memory of its arena instead of a fresh array."""
        if not zeroed:
            out.fill(0)
        a, k = _target(out, key)
        if advanced:
            _add_at(_xp(g), a, k, g)
        else:
            a[k] = g
        return out

    @staticmethod
    def backward(ctx, gg):
        return _get(gg, ctx.attrs["key"], ctx.attrs["advanced"])


def getitem(x, key):
    if STATE.vmap:   # a batched index tensor is read for its values here (func/batching_wrappers.py)
        out = VMAP_WRAPPERS["getitem"](x, key)
        if out is not None:
            return out
    key, advanced = normalize_key(x, key)
    return _get(x, key, advanced)


# ---------------------------------------------------------------- setitem
class IndexPut(Function):
    """x with `value` written at `key` (out of place): the recorded form of setitem."""
    compile_rule = Rule(flops=0)   # moves or picks elements: no arithmetic
    name = "index_put"
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, value, key, advanced):
        out = x.copy()
        a, k = _target(out, key)
        a[k] = value
        return out

    @staticmethod
    def backward(ctx, g):
        key, adv = ctx.attrs["key"], ctx.attrs["advanced"]
        nx, nv = ctx.needs_input_grad
        zero = Tensor._zeros_meta((), g.dtype, g.device)
        gx = IndexPut.apply(g, zero, key=key, advanced=adv) if nx else None
        gv = None
        if nv:
            gv = _get(g, key, adv)
            vshape = ctx.in_meta[1][0]
            if gv.ndim < len(vshape):  # the value had extra leading 1s, which broadcasting dropped
                gv = reshape(gv, (1,) * (len(vshape) - gv.ndim) + tuple(gv.shape))
        return gx, gv


def setitem(x, key, value):
    index_tensors = [k for k in (key if isinstance(key, tuple) else (key,)) if isinstance(k, Tensor)]
    key, advanced = normalize_key(x, key, "setitem")
    value = as_tensor_like(value, x) if not isinstance(value, Tensor) else cast(value, x.dtype)
    if value.device is not x.device:
        raise RuntimeError(f"setitem: value on {value.device} for a tensor on {x.device}")
    try:
        apply_inplace(x, "setitem", lambda t, v: IndexPut.apply(t, v, key=key, advanced=advanced), value,
                      _key_tensors=index_tensors)
    except ValueError as e:
        if "broadcast" not in str(e):
            raise
        raise OpError(f"setitem: a value of shape {tuple(value.shape)} cannot be written into "
                         f"the indexed part of a tensor of shape {tuple(x.shape)} ({e}){_where()}") from e


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


def _negative_ids(lo, n):
    return f"embedding: index {lo} is negative (ids must be in [0, {n}))"


class _NonNegativeIds(Function):
    """A copy of the ids, after refusing a negative one (NumPy indexing would wrap it where
    torch raises): the check a compiled embedding runs at every call."""
    name = "check_ids"

    @staticmethod
    def forward(ctx, ids, n):
        if ids.size and int(ids.min()) < 0:
            raise IndexError(_negative_ids(int(ids.min()), n))
        return ids.copy()   # a new array: the lookup's index is this op's output


def _check_index(x, dim, index, op):
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer Tensor")
    if index.ndim != x.ndim:
        raise OpError(f"{op}: index has {index.ndim} dimensions but the input has {x.ndim} "
                         f"(shapes {tuple(index.shape)} and {tuple(x.shape)}){_where()}")
    d = norm_dim(dim, x.ndim, op)
    for i in range(x.ndim):
        if i != d and index.shape[i] > x.shape[i]:
            raise OpError(f"{op}: index shape {tuple(index.shape)} exceeds input shape "
                             f"{tuple(x.shape)} in dimension {i}{_where()}")
    return d, index_in_range(index, x.shape[d], d, op, "out of range")


class _IndexInRange(Function):
    """A copy of an index array, after refusing an entry outside [0, size) (NumPy would
    wrap a negative one where torch raises): the check a compiled gather or scatter runs
    at every call (eagerly the wrapper checks, reading the values)."""
    name = "check_index"

    @staticmethod
    def forward(ctx, index, size, dim, op, word):
        _raise_out_of_range(index, size, dim, op, word, "")
        return index.copy()   # a new array: the consumer's index is this op's output


def _raise_out_of_range(index, size, dim, op, word, where):
    if index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= size:
            raise IndexError(f"{op}: index {hi if hi >= size else lo} is {word} for "
                             f"dimension {dim} with size {size}{where}")


def index_in_range(index, size, dim, op, word):
    """`index`, checked to lie in [0, size): here on its values, or under capture by a
    recorded op (_IndexInRange) whose checked copy the caller must use."""
    if STATE.hooks.traced(index):   # (a constant: checked now)
        return _IndexInRange.apply(index, size=size, dim=dim, op=op, word=word)
    _raise_out_of_range(index.data, size, dim, op, word, _where())
    return index


def _as_1d(*ts):
    """0-d tensors as 1-d (torch reads a 0-d input, index or src of gather / scatter_add
    as one entry), and whether any was 0-d."""
    if not any(isinstance(t, Tensor) and t.ndim == 0 for t in ts) or any(
            isinstance(t, Tensor) and t.ndim > 1 for t in ts):
        return ts, False
    return tuple(reshape(t, (-1,)) if isinstance(t, Tensor) else t for t in ts), True


def gather(x, dim, index):
    if isinstance(index, Tensor) and index.ndim != x.ndim and 0 in tuple(index.shape) \
            and index.data.dtype.kind in "iu":
        # an empty index reads nothing: torch takes any number of dims then
        norm_dim(dim, max(x.ndim, 1), "gather")
        return reshape(reshape(x, (-1,))[0:0], tuple(index.shape))
    (x1, index1), flat = _as_1d(x, index)
    if flat:
        return reshape(gather(x1, dim, index1), tuple(index.shape))
    d, index = _check_index(x, dim, index, "gather")
    out = _GatherOp.apply(x, index, dim=d)
    return out


class _GatherOp(Function):
    compile_rule = Rule(flops=0)   # moves or picks elements: no arithmetic
    name = "gather"

    @staticmethod
    def jvp(ctx, t, _):
        return _GatherOp.apply(t, ctx.saved_tensor(0), dim=ctx.attrs["dim"])

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.save_for_backward(index)
        got = _c_rows.gather_last(x, index) if dim == x.ndim - 1 else None
        return got if got is not None else x[_along_dim_key(_xp(x), index, dim)]

    @staticmethod
    def forward_into(out, x, index, dim):
        """forward's result written into `out` (C-contiguous, index's shape, x's dtype)."""
        out[...] = x[_along_dim_key(_xp(x), index, dim)]
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = Tensor._zeros_meta(ctx.in_meta[0][0], g.dtype, g.device)
        return ScatterAdd.apply(zeros, index, g, dim=ctx.attrs["dim"]), None


class ScatterAdd(Function):

    @staticmethod
    def jvp(ctx, tx, _, ts):
        tx = tx if tx is not None else Tensor._zeros_meta(*ctx.in_meta[0])
        ts = ts if ts is not None else Tensor._zeros_meta(*ctx.in_meta[2])
        return ScatterAdd.apply(tx, ctx.saved_tensor(0), ts, dim=ctx.attrs["dim"])
    @staticmethod
    def forward(ctx, x, index, src, dim):
        ctx.save_for_backward(index)
        return ScatterAdd.forward_into(x.copy(), x, index, src, dim, copied=True)

    @staticmethod
    def forward_into(out, x, index, src, dim, copied=False):
        """forward's result computed into `out` (C-contiguous, x's shape and dtype)."""
        xp = _xp(x)
        if not copied:
            out[...] = x
        sl = tuple(slice(0, s) for s in index.shape)
        if dim == x.ndim - 1 and _c_rows.scatter_add_last(out, index, src[sl]):
            return out   # add.at's additions in one C pass (kernels/c_rows.py)
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
                widths = []
                for s, t in zip(reversed(gsrc.shape), reversed(src_shape)):
                    widths += [0, t - s]
                gsrc = pad_(gsrc, widths)
        return (g if nx else None), None, gsrc


def scatter_add(x, dim, index, src):
    if isinstance(src, Tensor):
        (x1, index1, src1), flat = _as_1d(x, index, src)
        if flat:
            return reshape(scatter_add(x1, dim, index1, src1), tuple(x.shape))
    d, index = _check_index(x, dim, index, "scatter_add")
    if any(i > s for i, s in zip(index.shape, src.shape)):
        raise OpError(f"scatter_add: index shape {tuple(index.shape)} exceeds src shape "
                         f"{tuple(src.shape)}{_where()}")
    return ScatterAdd.apply(x, index, cast(src, x.dtype), dim=d)


# ---------------------------------------------------------------- masks and lookups
def masked_fill(x, mask, value):
    if not isinstance(mask, Tensor) or mask.data.dtype != np.bool_:
        raise TypeError("masked_fill: mask must be a bool Tensor")
    # out of place the result takes the broadcast shape, as in torch (masked_fill_ keeps
    # x's shape: the in-place write refuses a larger result, naming masked_fill_)
    broadcast_shapes(x.shape, mask.shape, op="masked_fill")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise OpError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                         f"{tuple(value.shape)}{_where()}")
    v = value if isinstance(value, Tensor) else as_tensor_like(value, x)
    return where(mask, v.to(x.dtype), x)


def index_select(x, dim, index):
    d = norm_dim(dim, x.ndim, "index_select")
    if not isinstance(index, Tensor) or index.ndim > 1 or index.data.dtype.kind not in "iu":
        raise TypeError("index_select: index must be a 0-d or 1-d integer Tensor")
    if x.ndim == 0:   # torch reads a 0-d input as one entry and answers 0-d
        return reshape(getitem(reshape(x, (1,)), index.reshape(-1)), ())
    return getitem(x, (slice(None),) * d + (index.reshape(-1),))


def embedding(ids, weight, padding_idx=None):
    """Rows of `weight` (num_embeddings, dim) for integer `ids` of any shape."""
    if not isinstance(ids, Tensor) or ids.data.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be an integer Tensor, got "
                        f"{ids.dtype.name if isinstance(ids, Tensor) else type(ids).__name__}")
    if weight.ndim != 2:
        raise OpError(f"embedding: weight must be 2-D, got shape {tuple(weight.shape)}")
    if STATE.vmap:   # batched ids are read for their values here (func/batching_wrappers.py)
        out = VMAP_WRAPPERS["embedding"](ids, weight, padding_idx)
        if out is not None:
            return out
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise IndexError(f"embedding: padding_idx {padding_idx} is out of range for "
                             f"{n} embeddings{_where()}")
        padding_idx %= n
    if STATE.hooks.traced(ids):
        # checked by a recorded op: every replay checks its ids (a constant, positions
        # from arange, is checked once, below: it never changes)
        ids = _NonNegativeIds.apply(ids, n=weight.shape[0])
    elif ids.data.size and int(ids.data.min()) < 0:  # torch refuses them; indexing would wrap
        raise IndexError(_negative_ids(int(ids.data.min()), weight.shape[0]) + _where())
    key, advanced = normalize_key(weight, ids, "embedding")  # so a bad id names embedding
    out = _get(weight, key, advanced)
    if padding_idx is not None and weight.requires_grad:
        # the padding row gets no gradient: route its lookups through a constant
        keep = (ids != padding_idx).unsqueeze(-1)
        out = where(keep, out, out.detach())
    return out
