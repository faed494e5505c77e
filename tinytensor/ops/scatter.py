"""scatter, scatter_reduce, masked_select and nonzero.

scatter_reduce runs forward as one unbuffered `ufunc.at` pass (duplicate indices combine)
and writes its backward as PyTorch's formulas in tinytensor ops (gather, scatter_add,
where, scatter_reduce itself), so gradients of gradients work and ties, zeros and
include_self behave as in torch: amax/amin share the gradient evenly among every entry
equal to the result (self included), prod divides out zeros with an exclusive product.
"""
import numpy as np

from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from .elementwise import as_tensor_like, cast, where
from .forward_mode import add, no_tangent
from .indexing import ScatterAdd, _GatherOp, _along_dim_key, getitem, index_in_range
from .movement import _where, broadcast_shapes, broadcast_to, norm_dim
from ..device import xp_of as _xp

__all__ = ["scatter", "scatter_reduce", "masked_select", "nonzero"]

_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNC = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _ufunc_at(xp, reduce, out, key, values):
    name = _UFUNC[reduce]
    if xp is np:
        getattr(np, name).at(out, key, values)
        return
    # cupyx comes with CuPy, which is optional: only CUDA arrays get here
    import cupyx
    fast = {"add": cupyx.scatter_add, "maximum": cupyx.scatter_max, "minimum": cupyx.scatter_min}
    if name in fast:
        fast[name](out, key, values)
    else:  # CuPy has no multiply.at: one host pass, exact
        host = xp.asnumpy(out)
        np.multiply.at(host, tuple(xp.asnumpy(k) for k in key), xp.asnumpy(values))
        out[...] = xp.asarray(host)


def _check(x, dim, index, src, op):
    """(dim normalised, index) after checking: index an integer tensor no larger than x (off
    dim) and src, in bounds (the index to use: under capture a checked copy)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")
    if not isinstance(index, Tensor) or index.data.dtype.kind not in "iu":
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise TypeError(f"{op}: index must be an integer Tensor, got {got}")
    d = norm_dim(dim, x.ndim, op)
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise ValueError(f"{op}: index has {index.ndim} dimensions but the input has {x.ndim} "
                         f"(index {tuple(index.shape)}, input {tuple(x.shape)}){_where()}")
    ishape, xshape = _shape1(index), _shape1(x)
    for i, (n, m) in enumerate(zip(ishape, xshape)):
        if i != d and n > m:
            raise ValueError(f"{op}: index {tuple(index.shape)} is larger than the input "
                             f"{tuple(x.shape)} in dimension {i}{_where()}")
    if src is not None and any(n > m for n, m in zip(ishape, _shape1(src))):
        raise ValueError(f"{op}: index {tuple(index.shape)} is larger than src "
                         f"{tuple(src.shape)}{_where()}")
    return d, index_in_range(index, xshape[d], d, op, "out of bounds")


def _shape1(t):
    return tuple(t.shape) if t.ndim else (1,)  # torch treats 0-d as 1-d here


class ScatterReduce(Function):
    """x with src[i] combined into x[..., index[i], ...] along dim by `reduce`; src has
    index's shape. include_self=False starts every touched position from the reduction's
    identity instead of x."""

    @staticmethod
    def forward(ctx, x, index, src, dim, reduce, include_self):
        out = ScatterReduce._arrays(x, index, src, dim, reduce, include_self)
        ctx.save_for_backward(x, index, src, out)  # the arrays themselves: saved in the graph
        return out

    @staticmethod
    def _arrays(x, index, src, dim, reduce, include_self):
        xp = _xp(x)
        key = _key(xp, index, dim)
        out = x.reshape(x.shape or (1,)).copy()
        if not include_self and src.size:
            out[key] = {"prod": 1, "amax": _lowest(xp, x.dtype), "amin": _highest(xp, x.dtype)}.get(reduce, 0)
        _ufunc_at(xp, reduce, out, key, src.reshape(index.shape or (1,)))
        if reduce == "mean":
            count = _count(xp, out.shape, key, include_self, out.dtype)
            out = out // count if out.dtype.kind in "iub" else out / count
        return out.reshape(x.shape)

    @staticmethod
    def backward_arrays(ctx, g):
        """backward's formulas on arrays (0-d inputs as 1-d), recording nothing."""
        x, index, src, result = ctx.saved_arrays
        dim, reduce, include_self = (ctx.attrs[k] for k in ("dim", "reduce", "include_self"))
        xp, shape, sshape = _xp(x), x.shape, src.shape
        x, g, result = (a.reshape(shape or (1,)) for a in (x, g, result))
        index, src = index.reshape(index.shape or (1,)), src.reshape(index.shape or (1,))
        key = _key(xp, index, dim)

        def added(base, values):
            out = base.copy()
            _ufunc_at(xp, "sum", out, key, values)
            return out

        if reduce == "sum":
            gx, gs = g, g[key]
        elif reduce == "mean":
            n = _count(xp, x.shape, key, include_self, x.dtype)
            gx, gs = g / n, g[key] / n[key]
        elif reduce == "prod":
            x1 = xp.where(x == 0, 1, x).astype(x.dtype, copy=False)
            gx = g * ScatterReduce._arrays(x1, index, src, dim, "prod", include_self) / x1
            zero = src == 0
            single = zero & (added(xp.zeros_like(x), zero.astype(x.dtype))[key] == 1)
            rest = ScatterReduce._arrays(x, index, xp.where(single, 1, src).astype(x.dtype, copy=False),
                                         dim, "prod", include_self)
            gs = xp.where(single, (g * rest)[key], (g * result)[key] / xp.where(zero, 1, src))
        else:
            self_hit = (x == result).astype(x.dtype)
            src_hit = (src == result[key]).astype(x.dtype)
            share = g / added(self_hit, src_hit)
            gx, gs = self_hit * share, src_hit * share[key]
        if not include_self:
            gx = gx.copy()
            gx[key] = 0
        return gx.reshape(shape), None, gs.astype(x.dtype, copy=False).reshape(sshape)

    @staticmethod
    def backward(ctx, g):
        x, index, src, result = ctx.saved_tensors
        dim, reduce, include_self = (ctx.attrs[k] for k in ("dim", "reduce", "include_self"))
        gather = lambda t: _GatherOp.apply(t, index, dim=dim)  # noqa: E731
        if reduce == "sum":
            gx, gs = g, gather(g)
        elif reduce == "mean":
            n = ScatterCount.apply(index, shape=tuple(x.shape), dim=dim, include_self=include_self,
                                   dtype=x.data.dtype)
            gx, gs = g / n, gather(g) / gather(n)
        elif reduce == "prod":
            # divide out zeros exactly: self's share is the product of everything else, and a
            # src entry that is the only zero of its group gets the product of its group's rest
            x1 = where(x == 0, 1.0, x)
            gx = g * scatter_reduce(x1, dim, index, src, "prod", include_self=include_self) / x1
            zero = src == 0
            zf = cast(zero, x.dtype)
            n_zeros = gather(ScatterAdd.apply(_zeros(x), index, zf, dim=dim))
            single = zero & (n_zeros == 1)
            rest = scatter_reduce(x, dim, index, where(single, 1.0, src), "prod", include_self=include_self)
            gs = where(single, gather(g * rest), gather(g * result) / where(zero, 1.0, src))
        else:  # amax / amin: split evenly among every entry equal to the result
            value = gather(result)
            self_hit, src_hit = cast(x == result, x.dtype), cast(src == value, x.dtype)
            share = g / ScatterAdd.apply(self_hit, index, src_hit, dim=dim)
            gx, gs = self_hit * share, src_hit * gather(share)
        if not include_self:  # self never reached the touched positions
            gx = scatter(gx, dim, index, 0.0)
        return gx, None, gs

    @staticmethod
    def jvp(ctx, tx, tindex, tsrc):
        """sum and mean are linear: the op itself on the tangents. prod, amax, amin: each
        result position's tangent is the sum of its contributors' tangents times their
        partial derivatives, which backward gives for an upstream gradient of ones (ties of
        amax/amin share evenly, zeros of prod divided out exactly, as backward)."""
        a = ctx.attrs
        (xshape, dtype, device), sshape = ctx.in_meta[0], ctx.in_meta[2][0]
        index = ctx.saved_tensor(1)
        if a["reduce"] in ("sum", "mean"):
            return ScatterReduce.apply(tx if tx is not None else Tensor._zeros_meta(xshape, dtype, device),
                                       index,
                                       tsrc if tsrc is not None else Tensor._zeros_meta(sshape, dtype, device),
                                       **a)
        dx, _, ds = ScatterReduce.backward(ctx, Tensor._ones_meta(xshape, dtype, device))
        out = tx * dx if tx is not None else None
        if tsrc is not None:
            out = add(out, ScatterAdd.apply(Tensor._zeros_meta(xshape, dtype, device), index,
                                            tsrc * ds, dim=a["dim"]))
        return out


def _key(xp, index, dim):
    return _along_dim_key(xp, index.reshape(index.shape or (1,)), dim)


def _zeros(x):
    return Tensor._zeros_meta(tuple(x.shape), x.dtype, x.device)


def _count(xp, shape, key, include_self, dtype):
    """How many values each position of the result averages (at least 1, as torch)."""
    n = xp.full(shape, 1 if include_self else 0, dtype=dtype)
    _ufunc_at(xp, "sum", n, key, xp.ones(key[0].shape, dtype=dtype))
    return xp.maximum(n, 1)


class ScatterCount(Function):
    """How many values each position of a scatter_reduce(..., "mean") of x's `shape`
    averages, from the index (a recorded op: a compiled backward counts this call's)."""

    jvp = staticmethod(no_tangent)   # a function of the index alone

    @staticmethod
    def forward(ctx, index, shape, dim, include_self, dtype):
        xp = _xp(index)
        return _count(xp, shape or (1,), _key(xp, index, dim), include_self, dtype).reshape(shape)


def _lowest(xp, dtype):
    return -xp.inf if dtype.kind == "f" else xp.iinfo(dtype).min


def _highest(xp, dtype):
    return xp.inf if dtype.kind == "f" else xp.iinfo(dtype).max


def _src(x, index, src, op):
    """src as a tensor of x's dtype cut to index's shape (a scalar fills that shape)."""
    if not isinstance(src, Tensor):
        return broadcast_to(as_tensor_like(src, x), tuple(index.shape))
    if src.device is not x.device:
        raise RuntimeError(f"{op}: src on {src.device} for an input on {x.device}")
    src = cast(src, x.dtype)
    if tuple(_shape1(src)) != tuple(_shape1(index)):
        src = getitem(src, tuple(slice(0, n) for n in index.shape))  # the rest is never read
    return src


def scatter_reduce(input, dim, index, src, reduce, include_self=True):
    """torch.scatter_reduce: reduce in ('sum', 'prod', 'mean', 'amax', 'amin')."""
    if reduce not in _REDUCES:
        raise ValueError(f"scatter_reduce: reduce must be one of {', '.join(map(repr, _REDUCES))}, "
                         f"got {reduce!r}")
    d, index = _check(input, dim, index, src if isinstance(src, Tensor) else None, "scatter_reduce")
    return ScatterReduce.apply(input, index, _src(input, index, src, "scatter_reduce"), dim=d,
                               reduce=reduce, include_self=bool(include_self))


class Scatter(Function):
    """x with src written at index along dim (the last write of a repeated index wins)."""

    @staticmethod
    def forward(ctx, x, index, src, dim):
        xp = _xp(x)
        out = x.reshape(x.shape or (1,)).copy()
        out[_key(xp, index, dim)] = src.reshape(index.shape or (1,))
        ctx.save_for_backward(index)
        return out.reshape(x.shape)

    @staticmethod
    def backward_arrays(ctx, g):
        index = ctx.saved_array(0)
        xp, dim = _xp(g), ctx.attrs["dim"]
        g1 = g.reshape(g.shape or (1,))
        key = _key(xp, index, dim)
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g1.copy()
            gx[key] = 0
            gx = gx.reshape(g.shape)
        gs = g1[key].reshape(index.shape) if ctx.needs_input_grad[2] else None
        return gx, None, gs

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        dim = ctx.attrs["dim"]
        nx, _, ns = ctx.needs_input_grad
        gx = scatter(g, dim, index, 0.0) if nx else None
        return gx, None, (_GatherOp.apply(g, index, dim=dim) if ns else None)

    @staticmethod
    def jvp(ctx, tx, tindex, tsrc):   # linear in (x, src): the tangents scattered alike
        (xshape, dtype, device), sshape = ctx.in_meta[0], ctx.in_meta[2][0]
        return Scatter.apply(tx if tx is not None else Tensor._zeros_meta(xshape, dtype, device),
                             ctx.saved_tensor(0),
                             tsrc if tsrc is not None else Tensor._zeros_meta(sshape, dtype, device),
                             dim=ctx.attrs["dim"])


def scatter(input, dim, index, src=None, value=None, reduce=None):
    """torch.scatter: src (a tensor or a number; or value=) written at index along dim;
    reduce='add' / 'multiply' combines instead (scatter_reduce 'sum' / 'prod' with self)."""
    if (src is None) == (value is None):
        raise TypeError("scatter: give exactly one of src and value")
    src = value if src is None else src
    if reduce is not None:
        red = {"add": "sum", "multiply": "prod"}.get(reduce)
        if red is None:
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
        return scatter_reduce(input, dim, index, src, red)
    d, index = _check(input, dim, index, src if isinstance(src, Tensor) else None, "scatter")
    return Scatter.apply(input, index, _src(input, index, src, "scatter"), dim=d)


def masked_select(input, mask):
    """The entries of input where mask (broadcast together) is True, as a 1-d tensor."""
    if not isinstance(mask, Tensor) or mask.data.dtype != np.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"masked_select: mask must be a bool Tensor, got {got}")
    shape = broadcast_shapes(input.shape, mask.shape, op="masked_select")
    x, m = broadcast_to(input, shape), broadcast_to(mask, shape)
    if not shape:  # a 0-d mask selects the single entry or nothing
        x, m = x.reshape(1), m.reshape(1)
    return getitem(x, m)


def nonzero(input, as_tuple=False):
    """Indices of the nonzero entries: an (n, ndim) int64 tensor, or one 1-d tensor per dim."""
    STATE.hooks.read_value(input, "nonzero")   # the indices are values a replay would freeze
    xp, a = input.device.xp, input.data
    if as_tuple:
        return tuple(Tensor._make(xp.asarray(i, dtype=np.int64), input.device, False)
                     for i in xp.nonzero(a.reshape(a.shape or (1,))))
    return Tensor._make(xp.asarray(xp.argwhere(a), dtype=np.int64), input.device, False)
