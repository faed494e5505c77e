"""Cumulative ops beyond cumsum: cumprod, cummax, cummin (values and indices) and
logcumsumexp, along one dim, as torch.

Prefix scans other than cumsum/cumprod run by recursive doubling (`_scan`): log2(n)
elementwise steps, so NumPy and CuPy share one code path. cummax/cummin gather their values
at the chosen indices, so the gradient goes to those positions (gather's backward) and is
differentiable again; cumprod and logcumsumexp write their gradients once for Tensors and
arrays, as in ops/elementwise.py.
"""
from types import SimpleNamespace

import numpy as np

from ..dtypes import BF16_NP, finfo

from ..core.function import Function
from ..core.forward_ad import vjp_jvp
from .elementwise import _xp, absolute, cast, clone, exp, float_operand, log, where
from .indexing import gather
from .movement import flip, norm_dim, stack, unbind
from .reduce import ValuesIndices, amax, cumsum

__all__ = ["cumprod", "cummax", "cummin", "logcumsumexp"]


def _scan(combine, arrays, axis):
    """Inclusive prefix scan of a tuple of arrays along axis. `combine(earlier, later)` maps two
    tuples of arrays to one and must be associative; step s combines each entry with the one
    s places before it, for s = 1, 2, 4, ..."""
    xp = _xp(arrays[0])
    cur = [xp.moveaxis(a, axis, -1).copy() for a in arrays]
    n, s = cur[0].shape[-1], 1
    while s < n:
        new = combine(tuple(c[..., :-s] for c in cur), tuple(c[..., s:] for c in cur))
        for c, v in zip(cur, new):
            c[..., s:] = v
        s *= 2
    return [xp.ascontiguousarray(xp.moveaxis(c, -1, axis)) for c in cur]


def _dim(x, dim, op):
    if dim is None:
        raise TypeError(f"{op}: dim is required")
    return norm_dim(dim, x.ndim, op)


# ---------------------------------------------------------------- cumprod
class Cumprod(Function):

    @staticmethod
    def jvp(ctx, t):
        x, y = ctx.saved_tensors
        if bool((x.data == 0).any()):   # y * cumsum(t / x) divides by the zero: the exact vjp form
            return vjp_jvp(ctx, t)
        return y * cumsum(t / x, ctx.attrs["dim"])
    @staticmethod
    def forward(ctx, x, dim):
        if x.dtype == np.float16 or x.dtype == BF16_NP:  # like torch: accumulate in float32
            out = x.cumprod(axis=dim, dtype=np.float32).astype(x.dtype)
        else:  # dtype: NumPy would widen int32 to int64
            out = x.cumprod(axis=dim, dtype=x.dtype)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return Cumprod._grad(g, x, y, ctx.attrs["dim"], bool((x.data == 0).any()), _TENSOR_OPS)

    @staticmethod
    def backward_arrays(ctx, g):
        x, y = ctx.saved_arrays
        return Cumprod._grad(g, x, y, ctx.attrs["dim"], bool((x == 0).any()), _array_ops(_xp(x)))

    @staticmethod
    def _grad(g, x, y, dim, has_zero, m):
        """dx_k = sum_{j >= k} g_j prod_{i <= j, i != k} x_i."""
        n = x.shape[dim]
        if n <= 1:
            return g
        if not has_zero:
            return m.flip(m.cumsum(m.flip(g * y, dim), dim), dim) / x
        # with zeros, no division: dx_k = (prod_{i < k} x_i) * c_k, where c_k = g_k + x_{k+1} c_{k+1}.
        # Exact at zeros, and its derivative is cumprod's second derivative (torch's O(n^2) loop)
        gs, xs, ys = m.unbind(g, dim), m.unbind(x, dim), m.unbind(y, dim)
        c = [gs[-1]]
        for k in range(n - 2, -1, -1):
            c.append(gs[k] + xs[k + 1] * c[-1])
        c.reverse()
        return m.stack([c[0]] + [ys[k - 1] * c[k] for k in range(1, n)], dim)


def cumprod(input, dim, dtype=None):
    d = _dim(input, dim, "cumprod")
    x = input
    if dtype is not None:
        x = cast(x, dtype)
    elif x.data.dtype.kind in "biu" and x.data.dtype != np.int64:
        x = cast(x, "int64")  # like torch: integer products accumulate in int64
    if x.ndim == 0:  # NumPy would return shape (1,)
        return clone(x)
    return Cumprod.apply(x, dim=d)


# ---------------------------------------------------------------- cummax, cummin
def _later_wins(op):
    """The combine of a running max/min that also carries indices. As torch, a tie goes to
    the later entry and NaN beats everything (a later NaN beats an earlier one)."""
    def combine(earlier, later):
        (v0, i0), (v1, i1) = earlier, later
        xp = _xp(v0)
        take = op(v1, v0)
        if v1.dtype.kind == "f":
            take |= xp.isnan(v1)
        return xp.where(take, v1, v0), xp.where(take, i1, i0)
    return combine


_MAX_WINS = _later_wins(lambda new, old: new >= old)
_MIN_WINS = _later_wins(lambda new, old: new <= old)


class CumExtremeIndex(Function):
    """The index of the running max (op "cummax") or min ("cummin") along `dim`, int64:
    a recorded op, so a compiled program follows each call's values."""

    @staticmethod
    def forward(ctx, a, dim, op):
        xp = _xp(a)
        if a.ndim == 0:  # torch: the value itself at index 0
            return xp.zeros((), np.int64)
        shape = [1] * a.ndim
        shape[dim] = a.shape[dim]
        positions = xp.broadcast_to(xp.arange(a.shape[dim], dtype=np.int64).reshape(shape), a.shape)
        _, idx = _scan(_MAX_WINS if op == "cummax" else _MIN_WINS, (a, positions), dim)
        return idx


def _cum_extreme(input, dim, op):
    d = _dim(input, dim, op)
    indices = CumExtremeIndex.apply(input, dim=d, op=op)
    if input.ndim == 0:
        return ValuesIndices((clone(input), indices))
    return ValuesIndices((gather(input, d, indices), indices))


def cummax(input, dim):
    return _cum_extreme(input, dim, "cummax")


def cummin(input, dim):
    return _cum_extreme(input, dim, "cummin")


# ---------------------------------------------------------------- logcumsumexp
def _logcumsumexp_array(x, dim):
    """The running log-sum-exp, accumulated in float64 and rounded once per entry (torch
    accumulates float32 in double too: a float32 running value near 1e4 is 1e-3 off, which
    exp turns into a 0.1% error of the gradient)."""
    xp = _xp(x)
    acc = x.astype(np.float64) if x.dtype.itemsize < 8 and x.dtype.kind == "f" or \
        x.dtype == BF16_NP else x
    return _scan(lambda e, l: (xp.logaddexp(e[0], l[0]),), (acc,), dim)[0].astype(x.dtype, copy=False)


class Logcumsumexp(Function):
    @staticmethod
    def jvp(ctx, t):
        """dy_j = sum_{i <= j} e_i t_i / sum_{i <= j} e_i, e = exp(x - max x): torch's form
        (and its 1e-13 floor), so the values agree with torch's to the last bits."""
        x = ctx.saved_tensor(0)
        d = ctx.attrs["dim"]
        e = exp(x - amax(x, d, keepdim=True))
        c = cumsum(e, d)
        return where(c < 1e-13, 0.0, cumsum(e * t, d)) / c

    @staticmethod
    def forward(ctx, x, dim):
        out = _logcumsumexp_array(x, dim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return Logcumsumexp._grad(g, x, y, ctx.attrs["dim"], _TENSOR_OPS)

    @staticmethod
    def backward_arrays(ctx, g):
        x, y = ctx.saved_arrays
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            gx = Logcumsumexp._grad(g, x, y, ctx.attrs["dim"], _array_ops(_xp(x)))
        return gx.astype(g.dtype, copy=False)

    @staticmethod
    def _grad(g, x, y, dim, m):
        """dx_i = sum_{j >= i} g_j exp(x_i - y_j), summed in log space for the positive and the
        negative g separately (torch's formula, so the edge values at -inf are torch's)."""
        lowest = float(finfo(x.dtype if isinstance(x, np.ndarray) else x.dtype.np).min)
        log_abs = m.log(m.abs(g))
        log_pos = m.where(g > 0, log_abs, lowest)
        log_neg = m.where(g < 0, log_abs, lowest)

        def reversed_lcse(t):
            return m.flip(m.logcumsumexp(m.flip(t, dim), dim), dim)
        return m.exp(reversed_lcse(log_pos - y) + x) - m.exp(reversed_lcse(log_neg - y) + x)


def logcumsumexp(input, dim):
    d = _dim(input, dim, "logcumsumexp")
    x = float_operand(input, "logcumsumexp")
    if x.ndim == 0:
        return clone(x)
    return Logcumsumexp.apply(x, dim=d)


# the functions the gradients call: tinytensor ops for backward, numpy/cupy for backward_arrays
_TENSOR_OPS = SimpleNamespace(flip=flip, cumsum=cumsum, unbind=unbind, stack=stack, log=log,
                              abs=absolute, where=where, exp=exp, logcumsumexp=logcumsumexp)


def _array_ops(xp):
    return SimpleNamespace(
        flip=xp.flip, cumsum=lambda a, d: xp.cumsum(a, axis=d),
        unbind=lambda a, d: list(xp.moveaxis(a, d, 0)), stack=lambda s, d: xp.stack(s, axis=d),
        log=xp.log, abs=xp.abs, exp=xp.exp, where=xp.where, logcumsumexp=_logcumsumexp_array)
