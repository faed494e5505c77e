"""tan ... hypot (ops/math_functions.py) against PyTorch: values, gradients and double
backward in float64 (oracle.check, one line per case), edge values, dtypes, a float32 pass."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch

from .cases import array as a, case
from .oracle import check, with_squares

INF, NAN = math.inf, math.nan


def first_order(fn, inputs, **kw):
    """Values and gradients only: where torch's double backward is nan/inf soup, or to run
    the ops' backward_arrays (used when no graph of the gradient is built)."""
    return compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), inputs, **kw)


UNARY = {  # name: (low, high) of the random inputs, inside the domain
    "tan": (-1.4, 1.4), "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atan": (-3, 3),
    "sinh": (-3, 3), "cosh": (-3, 3), "asinh": (-3, 3), "acosh": (1.05, 4), "atanh": (-0.95, 0.95),
    "log2": (0.1, 4), "log10": (0.1, 4), "exp2": (-3, 3), "expm1": (-3, 3),
}


@pytest.mark.parametrize("shape", [(3, 4), (), (2, 0, 3)], ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    low, high = UNARY[name]
    check(lambda m, x: getattr(m, name)(x), [shape], low=low, high=high)


EDGES = a(-INF, -1.0, -0.0, 0.0, 1.0, INF, NAN)
CASES = [
    # numpy-style aliases, as torch has them
    case("aliases", lambda m, x: (m.arcsin(x), m.arccos(x), m.arctan(x), m.arcsinh(x), m.arctanh(x),
                                  m.arccosh(x + 2), m.arctan2(x, x + 3)), [(3, 4)], low=-0.9, high=0.9),
    # binary ops, broadcasting both ways
    case("atan2", lambda m, y, x: m.atan2(y, x), [(3, 4), (4,)]),
    case("atan2_bcast", lambda m, y, x: m.atan2(y, x), [(3, 1), (1, 5)]),
    case("hypot", lambda m, x, y: m.hypot(x, y), [(3, 4), (3, 1)]),
    case("logaddexp", lambda m, x, y: m.logaddexp(x, y), [(3, 4), (4,)], low=-5, high=5),
    case("copysign", lambda m, x, y: m.copysign(x, y), [(3, 4), (4,)]),
    case("fmod", lambda m, x, y: m.fmod(x, y), [(3, 4), (4,)], low=0.3, high=3),
    case("lerp_scalar", lambda m, s, e: m.lerp(s, e, 0.3), [(3, 4), (4,)]),
    case("lerp_scalar_far", lambda m, s, e: m.lerp(s, e, 0.8), [(3, 4), (3, 4)]),
    case("lerp_tensor", lambda m, s, e, w: m.lerp(s, e, w), [(3, 4), (4,), (3, 1)]),
    case("lerp_weights_both_sides", lambda m, s, e, w: m.lerp(s, e, w), [(5,), (5,), a(-1, 0.2, 0.5, 0.7, 1.5)]),
    # Python scalars and 0-d tensors as the other operand
    case("copysign_scalar", lambda m, x: m.copysign(x, -1.0), [(3, 4)]),
    case("fmod_scalar", lambda m, x: (m.fmod(x, 1.5), m.fmod(x, -0.7)), [(3, 4)], low=-4, high=4),
    case("atan2_0d", lambda m, y, x: m.atan2(y, x), [(), (3,)]),
    # edge values: domain ends, zeros, infinities (torch's gradients there, incl. inf and nan)
    case("acosh_at_1", lambda m, x: m.acosh(x), [a(1.0, 2.0, 10.0)]),
    case("atanh_at_pm1", lambda m, x: m.atanh(x), [a(-1.0, 0.0, 1.0)]),
    case("asin_acos_at_pm1", lambda m, x: (m.asin(x), m.acos(x)), [a(-1.0, 0.0, 1.0)]),
    case("log2_log10_at_0", lambda m, x: (m.log2(x), m.log10(x)), [a(0.0, 1.0, 8.0)]),
    case("atan2_zeros", lambda m, y, x: m.atan2(y, x), [a(0.0, 1.0, 0.0, -0.0, 2.0), a(0.0, 0.0, -1.0, -0.0, 3.0)]),
    case("copysign_zeros", lambda m, x, y: m.copysign(x, y), [a(0.0, -0.0, 1.0, -2.0, 3.0), a(1.0, -1.0, -1.0, 1.0, -0.0)]),
    case("fmod_negative", lambda m, x, y: m.fmod(x, y), [a(5.0, -5.0, 5.0, -5.0, 1.0), a(3.0, 3.0, -3.0, -3.0, 3.0)]),
    case("logaddexp_large", lambda m, x, y: m.logaddexp(x, y), [a(1000.0, -1000.0, 0.0), a(1000.0, 5.0, -800.0)]),
    case("lerp_ends_exact", lambda m, s, e: (m.lerp(s, e, 0.0), m.lerp(s, e, 1.0)), [a(0.1, 1e20, -3.0), a(0.3, 1.0, 7.0)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_op(fn, inputs, kw):
    check(fn, inputs, **kw)


# torch's own double backward is inf/nan here; values and first-order gradients still agree
FIRST_ORDER = [
    case("unary_at_special_values", lambda m, x: tuple(getattr(m, n)(x) for n in (
        "tan", "atan", "sinh", "cosh", "asinh", "exp2", "expm1")), [EDGES]),
    case("inverse_trig_out_of_domain", lambda m, x: (m.asin(x), m.acos(x), m.acosh(x), m.atanh(x)), [a(-2.0, 1.5, 0.5, NAN)]),
    case("hypot_large", lambda m, x, y: m.hypot(x, y), [a(1e200, 3.0, -1e-200), a(1e200, -4.0, 1e-200)]),
    case("hypot_zero", lambda m, x, y: m.hypot(x, y), [a(0.0, 3.0), a(0.0, 4.0)]),
    case("logaddexp_infinities", lambda m, x, y: m.logaddexp(x, y), [a(-INF, -INF, INF, 1.0, INF), a(-INF, 1.0, INF, 1.0, -INF)]),
    case("atan2_infinities", lambda m, y, x: m.atan2(y, x), [a(INF, -INF, 1.0, INF), a(INF, 1.0, -INF, -1.0)]),
    # float64 first order runs backward_arrays; these cover every binary op
    case("binary_backward_arrays", lambda m, x, y: (m.atan2(x, y), m.hypot(x, y), m.logaddexp(x, y),
                                                   m.copysign(x, y), m.fmod(x, y)), [(3, 4), (4,)], low=0.3),
    case("lerp_backward_arrays", lambda m, s, e, w: m.lerp(s, e, w), [(3, 4), (4,), (3, 1)]),
]


@pytest.mark.parametrize("fn,inputs,kw", FIRST_ORDER)
def test_first_order(fn, inputs, kw):
    first_order(fn, inputs, **kw)


F32_CASES = [
    # numpy-style aliases, as torch has them
    case("aliases", lambda m, x: (m.arcsin(x), m.arccos(x), m.arctan(x), m.arcsinh(x), m.arctanh(x),
                                  m.arccosh(x + 2), m.arctan2(x, x + 3)), [(3, 4)], low=-0.9, high=0.9),
    case("unary", lambda m, x: (m.tan(x), m.asin(x), m.acos(x), m.atan(x), m.sinh(x), m.cosh(x),
                                m.asinh(x), m.atanh(x), m.expm1(x), m.exp2(x)), [(3, 4)], low=-0.9, high=0.9),
    case("logs", lambda m, x: (m.log2(x), m.log10(x), m.acosh(x + 1)), [(3, 4)], low=0.2, high=3),
    case("binary", lambda m, x, y: (m.atan2(x, y), m.hypot(x, y), m.logaddexp(x, y),
                                    m.copysign(x, y), m.fmod(x, y), m.lerp(x, y, 0.25)), [(3, 4), (4,)], low=0.3),
]


@pytest.mark.parametrize("fn,inputs,kw", F32_CASES)
def test_float32(fn, inputs, kw):
    outs = first_order(fn, inputs, dtype="float32", **kw)
    assert all(o.dtype is tt.float32 for o in outs)


# ------------------------------------------------------------------ dtypes, as torch
INTS = a(1, 4, 9, dtype=np.int64)
DTYPE_CASES = [
    # numpy-style aliases, as torch has them
    case("aliases", lambda m, x: (m.arcsin(x), m.arccos(x), m.arctan(x), m.arcsinh(x), m.arctanh(x),
                                  m.arccosh(x + 2), m.arctan2(x, x + 3)), [(3, 4)], low=-0.9, high=0.9),
    case("unary_of_int_is_float32", lambda m, x: (m.tan(x), m.atan(x), m.log2(x), m.log10(x), m.exp2(x),
                                                 m.expm1(x), m.sinh(x), m.asinh(x), m.acosh(x)), [INTS]),
    case("unary_of_bool", lambda m, x: (m.exp2(x), m.atan(x)), [a(True, False)]),
    case("atan2_of_ints", lambda m, y, x: m.atan2(y, x), [INTS, a(2, -3, 0, dtype=np.int32)]),
    case("copysign_of_ints", lambda m, x, y: (m.copysign(x, y), m.copysign(x, -1)), [INTS, a(-1, 1, -2, dtype=np.int64)]),
    case("fmod_of_ints_stays_int", lambda m, x, y: (m.fmod(x, y), m.fmod(x, 2), m.fmod(-x, 4)), [INTS, a(-3, 3, 4, dtype=np.int64)]),
    case("fmod_int32", lambda m, x: m.fmod(x, 3), [a(-7, 7, 5, dtype=np.int32)]),
    case("fmod_int_by_float", lambda m, x: m.fmod(x, 2.5), [a(5, -7, 1, dtype=np.int32)]),
    case("float64_with_float32", lambda m, x, y: (m.atan2(x, y), m.copysign(x, y)), [a(1.0, -2.0), a(0.5, -1.0, dtype=np.float32)]),
]


@pytest.mark.parametrize("fn,inputs,kw", DTYPE_CASES)
def test_dtypes(fn, inputs, kw):
    check(fn, inputs, grad=False, rtol=1e-6, **kw)  # float32 results


def test_fmod_integer_division_by_zero_raises_like_torch():
    x = tt.tensor([5, 3])
    with pytest.raises(ZeroDivisionError, match="fmod: integer division by zero"):
        tt.fmod(x, 0)
    with pytest.raises(ZeroDivisionError, match="shape \\(2,\\)"):
        tt.fmod(x, tt.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.fmod(torch.tensor([5, 3]), 0)
    assert np.isnan(tt.fmod(tt.tensor([5.0]), 0.0).numpy()).all()  # floats give nan, as torch


def test_fmod_of_bool_is_refused_like_torch():
    with pytest.raises(TypeError, match="fmod: bool"):
        tt.fmod(tt.tensor([True]), tt.tensor([True]))


def test_lerp_weight_tensor_takes_the_input_dtype():
    s, e = tt.tensor([0.0, 1.0], dtype=tt.float32), tt.tensor([2.0, 3.0], dtype=tt.float32)
    out = tt.lerp(s, e, tt.tensor(0.5, dtype=tt.float64))
    assert out.dtype is tt.float32 and out.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name", ["tan", "acosh", "expm1", "atan2", "hypot", "logaddexp", "copysign",
                                  "fmod", "lerp"])
def test_first_order_backward_records_no_ops(name):
    x = tt.tensor([1.3, 2.4], dtype=tt.float64, requires_grad=True)
    w = tt.tensor([0.5, -1.5], dtype=tt.float64, requires_grad=True)
    y = tt.lerp(x, w, 0.3) if name == "lerp" else getattr(tt, name)(*((x,) if name in UNARY else (x, w)))
    with tt.record() as tape:
        y.backward(tt.ones_like(y))
    assert len(tape) == 0, tape
    assert x.grad is not None
