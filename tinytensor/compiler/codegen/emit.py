"""The C expression of each op a fused kernel computes (EMIT) and the reductions a row
kernel computes (REDUCE): shared by the C and CUDA backends (CUDA C++ has the same operators).

Each emitter takes the C expressions of the inputs, the instruction and the C type of its
output, and returns a C expression written to round exactly as the NumPy forward does
(same operations in the same order, constants rounded to the dtype first).
"""
import math

import numpy as np

from ...core import primitives as P
from ...ops import elementwise as E
from ...ops.reduce import Amax, Sum
from ..passes.gelu import GeluCdf, GeluErfSlope, GeluFromCdf, GeluSlopeFromCdf

CTYPE = {"float32": "float", "float64": "double", "bool": "unsigned char",
         "int64": "long long", "int32": "int"}   # ints: compared and selected only (fuse.INT)
_INT = {"long long": ("LL", 64), "int": ("", 32)}


def lit(x, ctype):
    if ctype == "unsigned char":
        return "1" if x else "0"
    if ctype in _INT:
        suffix, bits = _INT[ctype]
        x = int(x)
        if x == -2 ** (bits - 1):   # its magnitude is no literal of the type: write it as an expression
            return f"({x + 1}{suffix} - 1)"
        return f"({x}{suffix})"
    x = float(x)
    if math.isnan(x):   # by its bits: NAN has neither its sign nor its payload
        if ctype == "float":
            return f"tt_f32((int){hex(int(np.float32(x).view(np.uint32)))}u)"
        return f"tt_f64({hex(int(np.float64(x).view(np.uint64)))}ull)"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    if ctype == "float":   # in parentheses, so that no operator before it makes `--`
        return f"({float(np.float32(x)).hex()}f)"
    return f"({x.hex()})"


def _math(fname):
    return lambda a, ins, t: f"tt_{fname}{'f' if t == 'float' else ''}({a[0]})"


def _sigmoid(x, t):
    one = lit(1.0, t)
    e = f"tt_exp{'f' if t == 'float' else ''}(-{'fabsf' if t == 'float' else 'fabs'}({x}))"
    return f"({x} >= 0 ? {one} / ({one} + {e}) : {e} / ({one} + {e}))"


def _gelu(a, ins, t):
    if ins.attrs.get("approximate") == "none":
        # x erfc(-x / sqrt 2) / 2 (tt_math.h): float computed in double, rounded once
        return f"tt_gelu_erf{'f' if t == 'float' else ''}({a[0]})"
    x = a[0]
    c = lambda v: lit(v, t)
    inner = f"({c(E._SQRT_2_OVER_PI)} * ({x} + {c(0.044715)} * {x} * {x} * {x}))"
    return f"({c(0.5)} * {x} * ({c(1.0)} + tt_tanh{'f' if t == 'float' else ''}({inner})))"


def _pow(a, ins, t):
    p, x = ins.attrs["exponent"], a[0]
    return {1: x, 2: f"({x} * {x})", 0.5: f"{'sqrtf' if t == 'float' else 'sqrt'}({x})",
            -1: f"({lit(1.0, t)} / {x})"}[p]


def _neg(x, t):
    return f"tt_neg{'f' if t == 'float' else ''}({x})"


def _arith(sign):
    """The emitter of a + b (- * /) as NumPy computes it, where GCC would fold it into an
    expression with the same numbers but another nan: x * -1 and x / -1 into -x (a nan
    comes out of NumPy as it went in: quieted, x + x), x + c for a nan constant c into
    x - (-c) (NumPy: x if x is a nan, else c; c - x: c)."""
    def emit(a, ins, t):
        if t not in ("float", "double"):
            return f"({a[0]} {sign} {a[1]})"
        if _is_nan_lit(a[0]):
            return a[0]
        if _is_nan_lit(a[1]):
            return f"(({a[0]} != {a[0]}) ? ({a[0]} + {a[0]}) : {a[1]})"
        m1 = lit(-1.0, t)
        if sign in "*/" and (a[1] == m1 or (sign == "*" and a[0] == m1)):
            x = a[0] if a[1] == m1 else a[1]
            return f"(({x} != {x}) ? ({x} + {x}) : {_neg(x, t)})"
        return f"({a[0]} {sign} {a[1]})"
    return emit


def _is_nan_lit(x):
    return x.startswith(("tt_f32(", "tt_f64("))   # `lit` writes nans so, nothing else


def _cast(a, ins, t):
    if t == "unsigned char":
        return f"({a[0]} != 0)"
    return f"(({t}){a[0]})"


EMIT = {
    E.Add: _arith("+"),
    E.Sub: _arith("-"),
    E.Mul: _arith("*"),
    E.Div: _arith("/"),
    # NumPy's negative flips the sign bit, a nan's too; tt_neg does it on the bits, where
    # GCC cannot fold it into a neighbour (-(x / c) into x / -c): same numbers, other nans
    E.Neg: lambda a, ins, t: _neg(a[0], t),
    # np.maximum / np.minimum: nan in either propagates; on a tie (0 and -0) the second wins
    E.Maximum: lambda a, ins, t: f"(({a[0]} > {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    E.Minimum: lambda a, ins, t: f"(({a[0]} < {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    E.Relu: lambda a, ins, t: f"(({a[0]} > 0 || {a[0]} != {a[0]}) ? {a[0]} : {lit(0.0, t)})",
    E.Abs: lambda a, ins, t: f"{'fabsf' if t == 'float' else 'fabs'}({a[0]})",
    E.Sqrt: lambda a, ins, t: f"{'sqrtf' if t == 'float' else 'sqrt'}({a[0]})",
    E.Rsqrt: lambda a, ins, t: f"({lit(1.0, t)} / {'sqrtf' if t == 'float' else 'sqrt'}({a[0]}))",
    E.Exp: _math("exp"),
    E.Log: _math("log"),
    E.Tanh: _math("tanh"),
    E.Sigmoid: lambda a, ins, t: _sigmoid(a[0], t),
    E.Silu: lambda a, ins, t: f"({a[0]} * {_sigmoid(a[0], t)})",
    E.Gelu: _gelu,
    E.Erf: _math("erf"),
    GeluErfSlope: lambda a, ins, t: f"tt_gelu_erf_slope{'f' if t == 'float' else ''}({a[0]})",
    # inside kernels, fuse._gelu_steps writes both as x and a float64 cdf(x) computed once
    GeluCdf: lambda a, ins, t: f"tt_gelu_cdf{'32' if ins.inputs[0].dtype.name == 'float32' else ''}({a[0]})",
    GeluFromCdf: lambda a, ins, t: f"tt_gelu_erf_cdf{'f' if t == 'float' else ''}({a[0]}, {a[1]})",
    GeluSlopeFromCdf: lambda a, ins, t: f"tt_gelu_erf_slope_cdf{'f' if t == 'float' else ''}({a[0]}, {a[1]})",
    E.PowScalar: _pow,
    E.Clone: lambda a, ins, t: a[0],
    P.Expand: lambda a, ins, t: a[0],          # the load already broadcasts
    P.Cast: _cast,
    E.Where: lambda a, ins, t: f"({a[0]} ? {a[1]} : {a[2]})",
    E.LogicalAnd: lambda a, ins, t: f"(({a[0]} != 0) & ({a[1]} != 0))",
    E.LogicalOr: lambda a, ins, t: f"(({a[0]} != 0) | ({a[1]} != 0))",
    E.LogicalXor: lambda a, ins, t: f"(({a[0]} != 0) ^ ({a[1]} != 0))",
    E.LogicalNot: lambda a, ins, t: f"({a[0]} == 0)",
    E.BitwiseAnd: lambda a, ins, t: f"({a[0]} & {a[1]})",     # on bool (0/1) only
    E.BitwiseOr: lambda a, ins, t: f"({a[0]} | {a[1]})",
    E.BitwiseXor: lambda a, ins, t: f"({a[0]} ^ {a[1]})",
    E.BitwiseNot: lambda a, ins, t: f"({a[0]} ^ 1)",
    E.Eq: lambda a, ins, t: f"({a[0]} == {a[1]})",
    E.Ne: lambda a, ins, t: f"({a[0]} != {a[1]})",
    E.Lt: lambda a, ins, t: f"({a[0]} < {a[1]})",
    E.Le: lambda a, ins, t: f"({a[0]} <= {a[1]})",
    E.Gt: lambda a, ins, t: f"({a[0]} > {a[1]})",
    E.Ge: lambda a, ins, t: f"({a[0]} >= {a[1]})",
}

# the reductions a row kernel computes (rows.py has the code of each)
REDUCE = (Sum, Amax)
