"""Reductions: sum, mean, prod, max/min (values and indices), amax/amin, argmax/argmin,
var/std, logsumexp, norm. All take `dim` (int, tuple, negative or None) and `keepdim`;
NumPy's `axis`/`keepdims` are accepted as aliases. As in torch, an empty dim tuple
reduces every dim, and a 0-d tensor accepts dim 0 / -1."""
import builtins
import math
import numbers

import numpy as np

from ..dtypes import BF16_NP, is_floating_np
from ..messages import plain
from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.primitives import summand
from ..core.rules import Rule, per_input as _per_input
from ..core.return_types import named_tuple
from ..core.tensor import Tensor
from ..core.forward_ad import linear_jvp
from ..kernels import c_eager as _c_eager, c_reduce as _c_reduce, c_rows as _c_rows
from .elementwise import (absolute, cast, clone, div, eq, exp, float_operand, isnan,
                          maximum, minimum, mul, sign, where)
from .indexing import gather
from .movement import _where, expand, flip, norm_dim, norm_dims, reshape
from ..device import xp_of as _xp


def _dims_args(x, dim, keepdim, axis, keepdims, op):
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{op}: pass either dim or axis, not both")
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        dim = None  # like torch: an empty dim list reduces everything
    dims = norm_dims(dim, x.ndim, op)
    return (dims if x.ndim else ()), bool(keepdim)  # a 0-d tensor accepts dim 0 / -1


def _accumulating(x, dtype):
    """x in the dtype a sum accumulates in: `dtype` when given, else int64 for integer and
    bool tensors (like torch), else x's own."""
    if dtype is not None:
        return cast(x, dtype)
    if x.data.dtype.kind in "biu" and x.data.dtype != np.int64:
        return cast(x, "int64")
    return x


def _keep_shape(shape, dims):
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _expand_back(g, in_shape, dims, keepdim):
    """Broadcast a reduced gradient back to the input shape."""
    if not keepdim:
        g = reshape(g, _keep_shape(in_shape, dims))
    return expand(g, *in_shape)


class Sum(Function):
    compile_rule = Rule(reduce="sum", flops=_per_input)
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        x = summand(x)   # added in the order of the indices, whatever x's layout
        if x.dtype == np.float16 or x.dtype == BF16_NP:  # like torch: accumulate in float32
            return x.sum(axis=dims, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
        if x.ndim and len(dims) == x.ndim and type(x) is np.ndarray:
            s = _c_reduce.sum_all(x)   # NumPy's pairwise sum, on the C pool's threads
            if s is not None:
                return np.reshape(s, (1,) * x.ndim) if keepdim else s
        return x.sum(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g, ctx.in_meta[0][0], ctx.attrs["dims"], ctx.attrs["keepdim"])

    @staticmethod
    def backward_arrays(ctx, g):
        in_shape = ctx.in_meta[0][0]
        if not ctx.attrs["keepdim"]:
            g = g.reshape(_keep_shape(in_shape, ctx.attrs["dims"]))
        # a read-only broadcast view (the engine copies it where a gradient must own memory),
        # dense at the eager kernels' sizes: their C loops read C-contiguous arrays only, and
        # a view sent the next backward to NumPy (max_pool2d(x, 3, 2, 1).sum()'s step, x
        # (8, 64, 32, 32) f32, 2 threads, Zen 5: 3.5 -> 2.2 ms; a dense g alone: 2.15 ms)
        if type(g) is np.ndarray and math.prod(in_shape) >= _c_eager.MIN_ELEMENTS and _c_eager.enabled():
            out = np.empty(in_shape, g.dtype)
            out[...] = g
            return out
        return _xp(g).broadcast_to(g, in_shape)


def sum(x, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "sum")
    x = _accumulating(x, dtype)
    return Sum.apply(x, dims=dims, keepdim=keepdim)


def mean(x, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "mean")
    if dtype is not None:
        x = cast(x, dtype)
    if not is_floating_np(x.data.dtype) and x.data.dtype.kind != "c":
        raise TypeError(f"mean: input dtype {x.dtype.name} is not floating; pass dtype= or "
                        "convert with .float()")
    if x.data.dtype == np.float16 or x.data.dtype == BF16_NP:
        # like torch: in float32, as the sum of halves would overflow at 65504 and a bfloat16
        # running sum stops growing once it is 256 times the next term
        return cast(mean(cast(x, "float32"), dims, keepdim), x.dtype)
    count = 1
    for d in dims:
        count *= x.shape[d]
    s = Sum.apply(x, dims=dims, keepdim=keepdim)
    # 1 / count, not 1.0 / count: the same float, and a symbolic size (tt.compile dynamic=True)
    # turns it into a number each call recomputes instead of today's
    return mul(s, 1 / count if count else float("nan"))


def reduction_jvp(ctx, t):
    """A reduction whose backward is g (broadcast back) times a derivative D(x) at the
    input's shape (prod, amax, std, logsumexp, norm): the tangent is sum(D(x) * t) over the
    reduced dims, D being backward of a gradient of ones."""
    shape, dtype, device = ctx.out_meta[0]
    d = ctx.fn.backward(ctx, Tensor._ones_meta(shape, dtype, device))
    return Sum.apply(d * t, dims=ctx.attrs["dims"], keepdim=ctx.attrs["keepdim"])


def _save_back(ctx, x, out):
    """`out`, after saving what `_saved_back` reads: the input and the output."""
    ctx.save_for_backward(x, out)
    return out


def _saved_back(ctx, g):
    """For a reduction that saved (x, out) with `_save_back` (prod, amax/amin, std,
    logsumexp, norm): x, the reduced dims, and the output and the gradient broadcast back to
    x's shape."""
    x, out = ctx.saved_tensors
    dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
    return x, dims, _expand_back(out, x.shape, dims, keepdim), _expand_back(g, x.shape, dims, keepdim)


class _SavesOutput(Function):
    """A reduction (the array method named `reduce`) whose backward needs its input and
    its output: prod, amax, amin."""
    reduce = None
    jvp = staticmethod(reduction_jvp)

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        out = getattr(x, cls.reduce)(axis=dims, keepdims=keepdim)
        if cls.reduce in ("max", "min"):
            out = _signed_zero_extreme(x, out, dims, keepdim, cls.reduce == "max")
        return _save_back(ctx, x, out)


def _signed_zero_extreme(x, out, dims, keepdim, is_max):
    """`out`, the max (min) of x over `dims`, with the sign of a zero result made the one
    IEEE 754-2019's maximum (minimum) gives: +0.0 when a +0.0 is among the tied zeros
    (-0.0 when a -0.0 is, for a min). NumPy's own choice between tied zeros is neither
    the first nor the last: it depends on where each zero falls in its SIMD lanes (the
    vector width of the CPU) and on whether the row is contiguous, so no compiled kernel
    could give its bits on every machine and layout; this rule it can (codegen/rows.py
    RowKernel `_max_phase`). Costs one comparison over the result unless it holds a zero."""
    if out.dtype.kind != "f":
        return out
    zero = out == 0
    if not zero.any():
        return out
    xp = _xp(x)
    wanted = (x == 0) & (xp.signbit(x) != is_max)     # max: +0.0 elements; min: -0.0 ones
    has = wanted.any(axis=dims, keepdims=keepdim)
    tie = xp.where(has == is_max, out.dtype.type(0.0), out.dtype.type(-0.0))
    return xp.where(zero, tie, out).astype(out.dtype, copy=False)


class Prod(_SavesOutput):
    compile_rule = Rule(flops=_per_input)
    reduce = "prod"

    @staticmethod
    def backward(ctx, g):
        x, dims, out_k, g_k = _saved_back(ctx, g)
        shape = x.shape
        is_zero = eq(x, 0)
        # the quick formula where no entry is zero (read eagerly); a capture keeps the
        # general one, which a replay with a zero needs and which equals it without zeros
        if not STATE.hooks.capturing and not bool(is_zero.data.any()):
            return g_k * (out_k / x)
        # others_i = prod_{k != i} x_k, written so that its derivative is right too: a zero
        # entry's "others" is the product of the nonzero entries times the other zero entry
        # (their values are 0, but d/dx of x is not), exact to second order for any count
        def back(t):
            return _expand_back(t, shape, dims, True)
        nonzero = where(is_zero, 1.0, x)
        zeros = back(sum(is_zero, dim=dims, keepdim=True))
        prod_nonzero = back(prod(nonzero, dim=dims, keepdim=True))
        zero_x = back(sum(where(is_zero, x, 0.0), dim=dims, keepdim=True))
        at_zero = where(eq(zeros, 1), prod_nonzero,
                        where(eq(zeros, 2), (zero_x - x) * prod_nonzero, 0.0))
        return g_k * where(is_zero, at_zero, out_k / nonzero)


def prod(x, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "prod")
    if dtype is not None:
        x = cast(x, dtype)
    return Prod.apply(x, dims=dims, keepdim=keepdim)


class _Extreme(_SavesOutput):
    """amax/amin: ties share the gradient evenly (PyTorch's rule for amax and max())."""
    compile_rule = Rule(flops=_per_input)

    @staticmethod
    def backward(ctx, g):
        x, dims, out_k, g_k = _saved_back(ctx, g)
        hit = eq(x, out_k)
        count = _expand_back(sum(hit, dim=dims, keepdim=True), x.shape, dims, True)
        return g_k * hit / count


class Amax(_Extreme):
    compile_rule = Rule(reduce="max", flops=_per_input)
    reduce = "max"


class Amin(_Extreme):
    reduce = "min"


def _check_nonempty(x, dims, op):
    for d in dims:
        if x.shape[d] == 0:
            raise ValueError(f"{op}: cannot reduce over dimension {d} of size 0 "
                             f"(shape {tuple(x.shape)}){_where()}")
    if x.numel() == 0 and not dims:
        raise ValueError(f"{op}: cannot reduce an empty tensor")


def amax(x, dim=None, keepdim=False, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "amax")
    _check_nonempty(x, dims, "amax")
    return Amax.apply(x, dims=dims, keepdim=keepdim)


def amin(x, dim=None, keepdim=False, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "amin")
    _check_nonempty(x, dims, "amin")
    return Amin.apply(x, dims=dims, keepdim=keepdim)


ValuesIndices = named_tuple(
    "ValuesIndices", ("values", "indices"),
    "(values, indices), also readable as .values / .indices like torch's return type.", __name__)


def _max_min(x, dim, keepdim, axis, keepdims, op, arg_fn, full_fn):
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}: keepdim requires dim")
        return full_fn(x)
    if isinstance(dim, Tensor):  # x.max(other): elementwise, as torch allows
        return (maximum if op == "max" else minimum)(x, dim)
    d = norm_dim(dim, x.ndim, op)
    if x.ndim == 0:  # torch allows dim 0 / -1 here: the value itself at index 0
        return ValuesIndices((clone(x), arg_fn(x, d, keepdim=keepdim)))
    _check_nonempty(x, (d,), op)
    idx = arg_fn(x, d, keepdim=True)
    values = gather(x, d, idx)  # the gradient goes to the chosen index, as in torch
    if not keepdim:
        values = reshape(values, tuple(s for i, s in enumerate(values.shape) if i != d))
        idx = reshape(idx, values.shape)
    return ValuesIndices((values, idx))


def max(x, dim=None, keepdim=False, axis=None, keepdims=None):
    return _max_min(x, dim, keepdim, axis, keepdims, "max", argmax, amax)


def min(x, dim=None, keepdim=False, axis=None, keepdims=None):
    return _max_min(x, dim, keepdim, axis, keepdims, "min", argmin, amin)


class Argmax(Function):
    """Indices of the largest entries along `dim` (None: of the flattened array), int64.
    A recorded op, so a compiled program computes this call's indices (a max(dim)'s
    gradient, a gather, follow them)."""
    np_fn = "argmax"

    @classmethod
    def forward(cls, ctx, x, dim, keepdim):
        xp = _xp(x)
        if dim is None:
            r = getattr(xp, cls.np_fn)(x.reshape(-1))
            if keepdim:
                r = r.reshape((1,) * x.ndim)
        elif x.ndim == 0:
            r = xp.zeros((), np.int64)
        else:
            r = getattr(xp, cls.np_fn)(x, axis=dim, keepdims=keepdim)
        return xp.asarray(r, dtype=np.int64)


class Argmin(Argmax):
    np_fn = "argmin"


def _arg(x, dim, keepdim, axis, keepdims, op, fn):
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    if dim is None:
        _check_nonempty(x, (), op)
    else:
        dim = norm_dim(dim, x.ndim, op)
        if x.ndim:
            _check_nonempty(x, (dim,), op)
    return fn.apply(x, dim=dim, keepdim=bool(keepdim))


def argmax(x, dim=None, keepdim=False, axis=None, keepdims=None):
    return _arg(x, dim, keepdim, axis, keepdims, "argmax", Argmax)


def argmin(x, dim=None, keepdim=False, axis=None, keepdims=None):
    return _arg(x, dim, keepdim, axis, keepdims, "argmin", Argmin)


def bool_dim_is_unbiased(dim, unbiased):
    """torch's var(input, unbiased) overload: a bool second argument is `unbiased`, not a
    dim (bool is an int in Python, so var(x, False) would otherwise reduce over dim 0)."""
    if isinstance(dim, (bool, np.bool_)):
        return None, bool(dim)
    return dim, unbiased


def _var_or_std(fn, x, dim, unbiased, keepdim, correction, axis, keepdims, op, compute):
    """var and std read their arguments alike: a bool `dim` is `unbiased`, `correction`
    defaults to 1 (0 with unbiased=False), halves compute in float32. Then compute(x, dims,
    keepdim, correction); `fn` (var or std itself) runs again on the float32 copy."""
    dim, unbiased = bool_dim_is_unbiased(dim, unbiased)
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, op)
    x = float_operand(x, op)
    if x.data.dtype == np.float16 or x.data.dtype == BF16_NP:
        # squares of halves overflow, bfloat16 sums stall: compute in float32, as torch
        return cast(fn(cast(x, "float32"), dims, keepdim=keepdim, unbiased=unbiased,
                       correction=correction), x.dtype)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return compute(x, dims, keepdim, correction)


def var(x, dim=None, unbiased=None, keepdim=False, correction=None, axis=None, keepdims=None):
    """Variance with `correction` (default 1, i.e. unbiased); `unbiased=False` means 0."""
    return _var_or_std(var, x, dim, unbiased, keepdim, correction, axis, keepdims, "var", _var)


def _var(x, dims, keepdim, correction):
    n = math.prod(x.shape[d] for d in dims)
    centered = x - mean(x, dim=dims, keepdim=True)
    ss = sum(centered * centered, dim=dims, keepdim=keepdim)
    denom = n - correction
    if denom > 0:
        return mul(ss, 1 / denom)  # 1 / denom: see mean
    return div(ss, 0.0)  # like torch: ss / max(0, n - correction), inf or nan


class Std(Function):
    """sqrt(var) with PyTorch's gradient at a zero std: 0, not 0 * inf = nan."""
    compile_rule = Rule(flops=lambda attrs, i, o: 3 * _per_input(attrs, i, o))
    jvp = staticmethod(reduction_jvp)

    @staticmethod
    def forward(ctx, x, dims, keepdim, correction):
        xp = _xp(x)
        n = math.prod(x.shape[d] for d in dims)
        centered = x - x.mean(axis=dims, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = (centered * centered).sum(axis=dims, keepdims=keepdim) / xp.asarray(
                builtins.max(n - correction, 0), dtype=x.dtype)
        out = xp.sqrt(v).astype(x.dtype, copy=False)
        return _save_back(ctx, x, out)

    @staticmethod
    def backward(ctx, g):
        x, dims, out_k, g_k = _saved_back(ctx, g)
        correction = ctx.attrs["correction"]
        n = math.prod(x.shape[d] for d in dims)
        at_zero = eq(out_k, 0)
        safe = where(at_zero, 1.0, out_k)  # so the masked branch is finite in double backward too
        g_var = where(at_zero, 0.0, g_k / (safe * 2.0))
        centered = x - mean(x, dim=dims, keepdim=True)
        denom = n - correction
        return g_var * centered * (2.0 / denom if denom > 0 else math.inf)


def std(x, dim=None, unbiased=None, keepdim=False, correction=None, axis=None, keepdims=None):
    """Standard deviation, sqrt(var(...)); the gradient where it is 0 is 0, as in PyTorch."""
    return _var_or_std(std, x, dim, unbiased, keepdim, correction, axis, keepdims, "std",
                       lambda x, dims, keepdim, correction:
                       Std.apply(x, dims=dims, keepdim=keepdim, correction=correction))


class LogSumExp(Function):
    compile_rule = Rule(flops=lambda attrs, i, o: 3 * _per_input(attrs, i, o))
    name = "logsumexp"
    jvp = staticmethod(reduction_jvp)

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        xp = _xp(x)
        if x.size == 0:  # an empty sum of exponentials: log 0 = -inf
            m = xp.zeros(_keep_shape(x.shape, dims), dtype=x.dtype)
        else:
            m = x.max(axis=dims, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)  # all -inf (or inf) rows: do not shift
        with np.errstate(divide="ignore"):
            out = xp.log(xp.exp(x - m).sum(axis=dims, keepdims=True)) + m
        if not keepdim:
            out = out.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims))
        return _save_back(ctx, x, out)

    @staticmethod
    def backward(ctx, g):
        x, _, out_k, g_k = _saved_back(ctx, g)
        return g_k * exp(x - out_k)


def logsumexp(x, dim=None, keepdim=False, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "logsumexp")
    return LogSumExp.apply(float_operand(x, "logsumexp"), dims=dims, keepdim=keepdim)


class Norm(Function):
    """The vector p-norm over `dims` for every p torch defines: inf / -inf (largest /
    smallest |x|), 0 (the count of nonzero entries), negative p and 0 < p < 1 included."""
    compile_rule = Rule(flops=lambda attrs, i, o: 2 * _per_input(attrs, i, o))
    jvp = staticmethod(reduction_jvp)

    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        xp = _xp(x)
        a = xp.abs(x)
        if p == float("inf"):
            out = a.max(axis=dims, keepdims=keepdim)
        elif p == -float("inf"):
            out = a.min(axis=dims, keepdims=keepdim)
        elif p == 0:
            out = (x != 0).sum(axis=dims, keepdims=keepdim)
        elif p == 1:
            out = a.sum(axis=dims, keepdims=keepdim)
        elif p == 2:
            out = xp.sqrt((x * x).sum(axis=dims, keepdims=keepdim))
        else:
            with np.errstate(divide="ignore"):  # p < 0: a zero entry makes the norm 0, as torch
                out = ((a ** p).sum(axis=dims, keepdims=keepdim)) ** (1.0 / p)
        out = xp.asarray(out).astype(x.dtype, copy=False)
        return _save_back(ctx, x, out)

    @staticmethod
    def backward(ctx, g):
        x, dims, out_k, g_k = _saved_back(ctx, g)
        p, shape = ctx.attrs["p"], x.shape
        if p == 0:  # a count: flat almost everywhere, a zero gradient (not g * 0: nan at inf)
            from ..creation import zeros
            return zeros(*shape, dtype=x.dtype, device=x.device)
        if p == 1:
            return g_k * sign(x)
        if p in (float("inf"), -float("inf")):
            a = absolute(x)
            hit = eq(a, out_k) | isnan(a)  # torch spreads the gradient over ties and nans
            count = _expand_back(sum(hit, dim=dims, keepdim=True), shape, dims, True)
            return g_k * sign(x) * hit / count
        if p < 1:  # torch's form: |x|^(p-1) is taken as 0 at x = 0, the norm's power in front
            zero = eq(x, 0)
            a = where(zero, 1.0, absolute(x))
            return where(zero, 0.0, sign(x) * a ** (p - 1)) * g_k * out_k ** (1 - p)
        safe = where(eq(out_k, 0), 1.0, out_k)  # the norm's gradient at 0 is taken as 0
        if p == 2:
            return where(eq(out_k, 0), 0.0, g_k * x / safe)
        a = absolute(x)
        return where(eq(out_k, 0), 0.0, g_k * sign(x) * a ** (p - 1) / safe ** (p - 1))


def norm(x, p="fro", dim=None, keepdim=False, out=None, dtype=None, axis=None, keepdims=None):
    """torch.norm: a vector p-norm over `dim` (all entries by default) for a number p, the
    Frobenius norm for 'fro', the nuclear norm of the matrices over two dims for 'nuc'."""
    if out is not None:
        raise TypeError("norm: out= is not supported (tinytensor ops return new tensors)")
    if dtype is not None:
        x = cast(x, dtype)
    if p == "nuc":
        from .linalg_norms import matrix_norm  # linalg builds on reductions, not the other way
        dim = (-2, -1) if dim is None and axis is None else (axis if dim is None else dim)
        return matrix_norm(x, "nuc", dim, keepdim if keepdims is None else keepdims)
    if p in ("fro", None):
        p = 2
    if p == "inf":
        p = float("inf")
    if not isinstance(p, numbers.Real) or isinstance(p, bool):  # numbers.Real: also np.float32(3)
        raise ValueError(f"norm: p must be a number, inf, 'fro' or 'nuc', got {plain(p)!r}")
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "norm")
    if x.data.dtype == np.float16 or x.data.dtype == BF16_NP:  # in float32, as torch
        return cast(norm(cast(x, "float32"), p, dims, keepdim), x.dtype)
    return Norm.apply(float_operand(x, "norm"), p=float(p), dims=dims, keepdim=keepdim)


class All(Function):
    """Whether every entry along `dims` is nonzero (a bool array): a recorded op."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        return _xp(x).asarray(x.astype(bool).all(axis=dims, keepdims=keepdim))


class Any(Function):
    """Whether some entry along `dims` is nonzero (a bool array): a recorded op."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        return _xp(x).asarray(x.astype(bool).any(axis=dims, keepdims=keepdim))


def all(x, dim=None, keepdim=False, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "all")
    return All.apply(x, dims=dims, keepdim=keepdim)


def any(x, dim=None, keepdim=False, axis=None, keepdims=None):
    dims, keepdim = _dims_args(x, dim, keepdim, axis, keepdims, "any")
    return Any.apply(x, dims=dims, keepdim=keepdim)


class Cumsum(Function):
    compile_rule = Rule(flops=_per_input)
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, dim):
        if x.dtype == np.float16 or x.dtype == BF16_NP:  # like torch: accumulate in float32
            return x.cumsum(axis=dim, dtype=np.float32).astype(x.dtype)
        if dim == x.ndim - 1:   # NumPy scans a last-dim row one addition at a time
            got = _c_rows.cumsum_last(x)
            if got is not None:
                return got
        return x.cumsum(axis=dim)

    @staticmethod
    def backward(ctx, g):
        d = ctx.attrs["dim"]
        return flip(Cumsum.apply(flip(g, d), dim=d), d)

    @staticmethod
    def backward_arrays(ctx, g):
        d = ctx.attrs["dim"]
        got = _c_rows.cumsum_last(g, reverse=True) if d == g.ndim - 1 else None
        if got is not None:   # flip-cumsum-flip's additions, in one pass
            return got
        return Cumsum.forward(ctx, g[(slice(None),) * d + (slice(None, None, -1),)], d)[
            (slice(None),) * d + (slice(None, None, -1),)]


def cumsum(x, dim=None, dtype=None, axis=None):
    if axis is not None:
        dim = axis
    if dim is None:
        raise TypeError("cumsum: dim is required")
    dim = norm_dim(dim, x.ndim, "cumsum")
    x = _accumulating(x, dtype)
    if x.ndim == 0:  # NumPy would return shape (1,)
        return clone(x)
    return Cumsum.apply(x, dim=dim)
