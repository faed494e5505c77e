"""The C expression of one element of an instruction in a fused kernel (`expr`): shared by
the C and CUDA backends (CUDA C++ has the same operators).

The expression is the op's own, its rule's `c` (core/rules.py, beside the op's Function):
a format string of the inputs' expressions, or a function of them that gets this module's
helpers (`lit`, `arith`, `neg`, `sigmoid`) as its `C`. Each is written to round exactly as
the NumPy forward does (same operations in the same order, constants rounded to the dtype
first). Which ops a row kernel reduces is their rule's `reduce` (`reduces`).
"""
import math

import numpy as np

import sys

from ...core.rules import rule_of

CTYPE = {"float32": "float", "float64": "double", "bool": "unsigned char",
         "int64": "long long", "int32": "int"}   # ints: compared and selected only (core/rules.py INT)
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


def sigmoid(x, t):
    """1 / (1 + exp(-x)) on either side of 0 as NumPy's reference computes it, without
    overflow: tt_math.h's tt_sigmoid, which takes exp of -|x| once and divides once (as an
    expression of two exps here, GCC 12 made two exp polynomials and three divisions of
    its AVX-512 clone: sigmoid 0.86 -> 0.45 ns per float32 on one Zen 5 core)."""
    return f"tt_sigmoid{'f' if t == 'float' else ''}({x})"


def neg(x, t):
    """NumPy's negative flips the sign bit, a nan's too; tt_neg does it on the bits, where
    GCC cannot fold it into a neighbour (-(x / c) into x / -c): same numbers, other nans."""
    return f"tt_neg{'f' if t == 'float' else ''}({x})"


def arith(sign, a, t):
    """a + b (- * /) as NumPy computes it, where GCC would fold it into an expression with
    the same numbers but another nan: x * -1 and x / -1 into -x (a nan comes out of NumPy
    as it went in: quieted, x + x), x + c for a nan constant c into x - (-c) (NumPy: x if
    x is a nan, else c; c - x: c)."""
    if t not in ("float", "double"):
        return f"({a[0]} {sign} {a[1]})"
    if _is_nan_lit(a[0]):
        return a[0]
    if _is_nan_lit(a[1]):
        return f"(({a[0]} != {a[0]}) ? ({a[0]} + {a[0]}) : {a[1]})"
    m1 = lit(-1.0, t)
    if sign in "*/" and (a[1] == m1 or (sign == "*" and a[0] == m1)):
        x = a[0] if a[1] == m1 else a[1]
        return f"(({x} != {x}) ? ({x} + {x}) : {neg(x, t)})"
    return f"({a[0]} {sign} {a[1]})"


def _is_nan_lit(x):
    return x.startswith(("tt_f32(", "tt_f64("))   # `lit` writes nans so, nothing else


_HELPERS = sys.modules[__name__]   # what a rule's C function gets as `C`


def expr(ins, args, t):
    """The C expression of `ins` on the input expressions `args`, its output of C type `t`."""
    c = rule_of(ins.fn).c
    if c is None:
        raise NotImplementedError(f"codegen: {ins.op} ({getattr(ins.fn, '__name__', ins.fn)}) has no C "
                                  "expression: its compile_rule has no `c` (core/rules.py)")
    if callable(c):
        return c(args, ins, t, _HELPERS)
    return c.format(*args, f="f" if t == "float" else "", one=lit(1.0, t), zero=lit(0.0, t))


def reduces(ins):
    """Whether `ins` is a reduction a row kernel computes (rows.py has the code of each)."""
    return rule_of(ins.fn).reduce is not None
