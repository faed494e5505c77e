"""The exact GELU's slope as one op: the captured backward's decomposition of
d gelu(x) / dx (ops/elementwise.py `Gelu._slope`, which the tape records as it runs):

    cdf = (1 + erf(x * c1)) * 0.5            c1 = 1/sqrt(2) in x's dtype
    pdf = exp(x * x * -0.5) * c2             c2 = 1/sqrt(2 pi)
    slope = cdf + x * pdf

becomes `gelu_erf_slope(x)` (ops/elementwise.py `GeluErfSlope`; instructions it made dead
are left for dce). Why: in x's
dtype the decomposition loses every digit of 1 + erf for x << 0 (float: erf(x c1) rounds
to -1 below x ~ -5.5, and to 6 digits at x = -3), while eager's backward computes the slope
in float64 (ops/special.py `gelu_exact_slope`), which this op's forward is: a compiled step
gets eager's bits on the interpreter, and the C kernel (tt_math.h `tt_gelu_erf_slope[f]`,
erfc(-x c1) / 2 + x pdf) stays within an ulp. It also lets a recomputed gelu(x) and its
slope in one kernel share one erfc (remat's cost model counts on it).
"""
import dataclasses

import numpy as np

from ...ops import elementwise as E
from ...ops.elementwise import _INV_SQRT_2, _INV_SQRT_2PI, GeluErfSlope
from . import const_value, finish


def run(program):
    made = {v.id: ins for ins in program.instrs for v in ins.outputs}
    instrs = []
    for ins in program.instrs:
        x = _slope_of(program, made, ins)
        if x is not None:
            ins = dataclasses.replace(ins, op=GeluErfSlope.name, fn=GeluErfSlope, inputs=[x], attrs={})
        instrs.append(ins)
    return finish(program, instrs, {})


def _slope_of(program, made, ins):
    """x when `ins` computes the exact GELU's slope of x by `Gelu._slope`'s ops, else None."""
    out = ins.outputs[0] if len(ins.outputs) == 1 else None
    if ins.fn is not E.Add or len(ins.inputs) != 2 or out is None or out.dtype.name not in ("float32", "float64"):
        return None
    for cdf, xpdf in (ins.inputs, ins.inputs[::-1]):
        x = _cdf_of(program, made, cdf)
        if x is not None and x.dtype == out.dtype and tuple(x.shape) == tuple(out.shape) \
                and _is_x_pdf(program, made, xpdf, x):
            return x
    return None


def _op(made, v, fn):
    """The instruction making v when it is an `fn` (without attributes), else None."""
    ins = made.get(v.id) if v is not None else None
    if ins is None or ins.fn is not fn or ins.attrs or ins.attr_inputs:
        return None
    return ins


def _other(program, ins, value, dtype):
    """The non-constant input of binary `ins` whose other input is the one-element
    constant `value` rounded to `dtype`, else None."""
    if ins is None or len(ins.inputs) != 2:
        return None
    for a, b in (ins.inputs, ins.inputs[::-1]):
        c = const_value(program, b)
        if c is not None and c.size == 1 and c.dtype == dtype.np and const_value(program, a) is None \
                and c.reshape(()) == np.asarray(value, dtype=dtype.np):
            return a
    return None


def _cdf_of(program, made, v):
    """x when v = (1 + erf(x * c1)) * 0.5, else None."""
    one_plus = _other(program, _op(made, v, E.Mul), 0.5, v.dtype)
    e = _other(program, _op(made, one_plus, E.Add), 1.0, v.dtype)
    erf = _op(made, e, E.Erf)
    if erf is None:
        return None
    return _other(program, _op(made, erf.inputs[0], E.Mul), _INV_SQRT_2, v.dtype)


def _is_x_pdf(program, made, v, x):
    """Whether v = x * (exp(x * x * -0.5) * c2)."""
    mul = _op(made, v, E.Mul)
    if mul is None or len(mul.inputs) != 2:
        return False
    for a, pdf in (mul.inputs, mul.inputs[::-1]):
        if a.id != x.id:
            continue
        exp = _op(made, _other(program, _op(made, pdf, E.Mul), _INV_SQRT_2PI, v.dtype), E.Exp)
        sq = exp and _other(program, _op(made, exp.inputs[0], E.Mul), -0.5, v.dtype)
        square = _op(made, sq, E.Mul) if sq is not None else None
        if square is not None and len(square.inputs) == 2 and all(i.id == x.id for i in square.inputs):
            return True
    return False
