"""The ops the engine itself needs: undoing broadcasting (sum_to, and expand, its
backward) and casting a gradient to its input's dtype. They are ordinary Functions, so
a backward with `create_graph=True` through them is differentiable like any other op."""
import numpy as np

from ..dtypes import BF16_NP, from_any, from_numpy_dtype
from .forward_ad import linear_jvp
from .function import Function
from .rules import ANY, FLOAT_OR_BOOL, Rule, per_input
from ..device import xp_of as _xp


def summand(a):
    """`a` as a sum reads it: C-contiguous (a copy of a view that is not). NumPy adds an
    array in the order of its memory (a transposed array column by column, an index_select
    over dim 1 in its own order), so the bits of a sum would depend on the layout, which
    tt.compile's kernels (adding in the order of the indices) cannot follow; over a
    C-contiguous array the order is a function of the shape alone, the same for every
    layout, eager or compiled (issue 22, fuzz finding `layout_bits`). Integers add
    exactly in any order: no copy."""
    if a.flags.c_contiguous or a.dtype.kind in "biu":
        return a
    return _xp(a).ascontiguousarray(a)


def sum_to_array(a, shape):
    """Sum array `a` over the dimensions it was broadcast along, back to `shape`."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and a.shape[i + lead] != 1)
    out = summand(a).sum(axis=axes, keepdims=True) if axes else a
    if lead:
        out = out.reshape(shape)
    return out


class SumTo(Function):
    """Sum a broadcast gradient back to the shape it was broadcast from."""
    compile_rule = Rule(flops=per_input)
    name = "sum_to"

    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, shape):
        return sum_to_array(x, shape)

    @staticmethod
    def backward(ctx, g):
        return expand_to(g, ctx.in_meta[0][0])

    @staticmethod
    def backward_arrays(ctx, g):
        return _xp(g).broadcast_to(g, ctx.in_meta[0][0])


def sum_to(x, shape):
    return _reshaped(SumTo, x, shape)


def _reshaped(fn, x, shape):
    """fn applied to take x to `shape`; x itself when it has that shape already."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return fn.apply(x, shape=shape)


class Expand(Function):
    compile_rule = Rule(fuses=ANY, c="{0}", flops=0)   # in a kernel the load broadcasts
    is_view = True

    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, shape):
        return _xp(x).broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return sum_to(g, ctx.in_meta[0][0])

    @staticmethod
    def backward_arrays(ctx, g):
        return sum_to_array(g, ctx.in_meta[0][0])


def expand_to(x, shape):
    """x broadcast to `shape` (already checked: see ops.movement.expand for the user form)."""
    return _reshaped(Expand, x, shape)


def _cast_c(a, ins, t, C):
    return f"({a[0]} != 0)" if t == "unsigned char" else f"(({t}){a[0]})"


class Cast(Function):
    compile_rule = Rule(fuses=FLOAT_OR_BOOL, cheap=True, c=_cast_c, flops=0)
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = from_numpy_dtype(x.dtype)
        if x.dtype == BF16_NP and dtype.category < 2:
            # to integers through float32 (exact for every bfloat16): ml_dtypes' own cast of
            # inf and nan to int changed between releases (0.6: INT_MIN as torch on x86,
            # 0.7: 0); NumPy's float32 cast is the one torch agrees with
            return x.astype(np.float32).astype(dtype.np)
        if x.dtype.kind == "c" and dtype.category < 3:  # complex to real keeps the real part, as torch
            x = x.real
        return x.astype(dtype.np)

    @staticmethod
    def backward(ctx, g):
        # real -> complex: the real input's gradient is the real part (cast takes it)
        return cast(g, ctx.src) if ctx.src.category >= 2 else None

    @staticmethod
    def backward_arrays(ctx, g):
        if ctx.src.category < 2:
            return None
        return (g.real if g.dtype.kind == "c" and ctx.src.category < 3 else g).astype(ctx.src.np)


def cast(x, dtype):
    dtype = from_any(dtype)
    if x.dtype is dtype:
        return x
    return Cast.apply(x, dtype=dtype)
