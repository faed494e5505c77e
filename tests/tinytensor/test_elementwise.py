"""Elementwise ops against PyTorch: forward, gradient and double backward in float64.

Every case is one line: `fn(m, *xs)` runs once with m = tinytensor and once with m = torch
on the same inputs (shapes become random float64 tensors that require grad).
"""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch
from .cases import array as a, case, check_double as check

INF, NAN = math.inf, math.nan


def F(m):
    return tt.functional if m is tt else torch.nn.functional


# ------------------------------------------------------------------ binary ops, broadcasting
BROADCAST = [((3, 4), (3, 4)), ((3, 1, 4), (2, 4)), ((2, 4), (3, 1, 4)), ((4, 1), (1, 5)),
             ((1,), (5,)), ((5,), (1,)), ((), (3,)), ((2, 3), ()), ((), ()), ((2, 0, 3), (1, 3)),
             ((0,), (1,))]
BINARY = {
    "add": lambda m, x, y: x + y,
    "add_fn_alpha": lambda m, x, y: m.add(x, y, alpha=2.5),
    "sub": lambda m, x, y: x - y,
    "sub_fn_alpha": lambda m, x, y: m.sub(x, y, alpha=-0.5),
    "mul": lambda m, x, y: x * y,
    "div": lambda m, x, y: x / (y * y + 0.5),
    "div_plain": lambda m, x, y: m.div(x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "minimum": lambda m, x, y: m.minimum(x, y),
    "pow": lambda m, x, y: (x * x + 0.5) ** y,
    "where": lambda m, x, y: m.where(x > y, x, y),
}


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast(name, shapes):
    low = 0.5 if name == "div_plain" else -2.0
    check(BINARY[name], list(shapes), low=low)


# ------------------------------------------------------------------ unary ops over shapes
SHAPES = [(3, 4), (), (1,), (2, 1, 3), (0, 3)]
UNARY = {  # name: (fn, low, high)
    "neg": (lambda m, x: -x, -2, 2),
    "exp": (lambda m, x: x.exp(), -2, 2),
    "log": (lambda m, x: x.log(), 0.1, 2),
    "log1p": (lambda m, x: x.log1p(), -0.9, 2),
    "sqrt": (lambda m, x: x.sqrt(), 0.1, 2),
    "rsqrt": (lambda m, x: x.rsqrt(), 0.1, 2),
    "abs": (lambda m, x: x.abs(), -2, 2),
    "sign": (lambda m, x: x.sign(), -2, 2),
    "sin": (lambda m, x: x.sin(), -4, 4),
    "cos": (lambda m, x: x.cos(), -4, 4),
    "tanh": (lambda m, x: x.tanh(), -3, 3),
    "sigmoid": (lambda m, x: x.sigmoid(), -6, 6),
    "relu": (lambda m, x: x.relu(), -2, 2),
    "leaky_relu": (lambda m, x: F(m).leaky_relu(x, 0.1), -2, 2),
    "gelu": (lambda m, x: F(m).gelu(x), -4, 4),
    "gelu_tanh": (lambda m, x: F(m).gelu(x, approximate="tanh"), -4, 4),
    "silu": (lambda m, x: F(m).silu(x), -4, 4),
    "softplus": (lambda m, x: F(m).softplus(x, beta=1.5, threshold=2.0), -3, 3),
    "erf": (lambda m, x: x.erf(), -3, 3),
    "pow_2": (lambda m, x: x ** 2, -2, 2),
    "pow_3": (lambda m, x: x.pow(3), -2, 2),
    "pow_0.5": (lambda m, x: x ** 0.5, 0.1, 2),
    "pow_-1": (lambda m, x: x ** -1, 0.5, 2),
    "clamp": (lambda m, x: x.clamp(-0.5, 0.5), -2, 2),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    fn, low, high = UNARY[name]
    check(fn, [shape], low=low, high=high)


# ------------------------------------------------------------------ the rest, one line each
CASES = [
    # python scalars on either side, 0-d tensors
    case("add_scalar", lambda m, x: x + 2, [(3, 4)]),
    case("radd_scalar", lambda m, x: 1.5 + x, [(3, 4)]),
    case("sub_scalar", lambda m, x: x - 3.5, [(3, 4)]),
    case("rsub_scalar", lambda m, x: 3.5 - x, [(3, 4)]),
    case("mul_scalar", lambda m, x: x * 2, [(3, 4)]),
    case("rmul_scalar", lambda m, x: -0.25 * x, [(3, 4)]),
    case("div_scalar", lambda m, x: x / 3, [(3, 4)]),
    case("rdiv_scalar", lambda m, x: 3 / x, [(3, 4)], low=0.5),
    case("rpow_scalar", lambda m, x: 2 ** x, [(3, 4)]),
    case("rpow_scalar_float", lambda m, x: 0.5 ** x, [(3, 4)]),
    case("mul_0d", lambda m, x, y: x * y, [(), (2, 3)]),
    case("div_0d_0d", lambda m, x, y: x / y, [(), ()], low=0.5),
    case("add_alpha_scalar", lambda m, x: m.add(x, 1.5, alpha=2) + m.sub(x, 3, alpha=-0.5), [(3, 4)]),
    case("mul_signed_zero", lambda m, x: (1 / (x * 0.0), 1 / (x * -0.0), 1 / (x + -0.0)), [a(1.0, -2.0, 0.0)], grad=False),
    case("neg", lambda m, x: -x, [(3, 4)]),
    case("neg_fn", lambda m, x: m.neg(x), [(2, 1, 3)]),
    case("neg_0d", lambda m, x: -x, [()]),
    case("neg_empty", lambda m, x: -x, [(0, 3)]),
    # pow
    case("pow_0", lambda m, x: x ** 0, [(3, 4)]),
    case("pow_1", lambda m, x: x ** 1, [(3, 4)]),
    case("pow_2", lambda m, x: x ** 2, [(3, 4)]),
    case("pow_3", lambda m, x: x ** 3, [(3, 4)]),
    case("pow_0.5", lambda m, x: x ** 0.5, [(3, 4)], low=0.2),
    case("pow_-1", lambda m, x: x ** -1, [(3, 4)], low=0.5),
    case("pow_-2.5", lambda m, x: m.pow(x, -2.5), [(3, 4)], low=0.5),
    case("pow_float_int_valued", lambda m, x: x ** 2.0, [(3, 4)]),
    case("pow_scalar_at_zero", lambda m, x: m.pow(x, 0) + x ** 1 + x ** 2 + x ** 3, [a(0.0, 0.0, 1.0)]),
    case("pow_tensor", lambda m, x, y: x ** y, [(3, 4), (3, 4)], low=0.2),
    case("pow_tensor_base_zero", lambda m, x, y: x ** y, [a(0, 0, 0, 0, 0, 2.0), a(0, 1, 2, 2.5, 3, 0)]),
    case("pow_tensor_base_zero_neg_exp", lambda m, x, y: x ** y, [a(0, 0, 1.5), a(-1, -0.5, -1)]),
    case("pow_tensor_negative_base_int_exp", lambda m, x, y: x ** y, [a(-1.5, -2.0, -0.5), a(2, 3, -1)]),
    # unary math
    case("exp", lambda m, x: x.exp(), [(3, 4)]),
    case("exp_fn", lambda m, x: m.exp(x), [(2, 0, 3)]),
    case("log", lambda m, x: x.log(), [(3, 4)], low=0.1),
    case("log_zero", lambda m, x: m.log(x), [a(0.0, 1.0, 2.0)]),
    case("log1p", lambda m, x: x.log1p(), [(3, 4)], low=-0.9),
    case("sqrt", lambda m, x: x.sqrt(), [(3, 4)], low=0.1),
    case("rsqrt", lambda m, x: x.rsqrt(), [(3, 4)], low=0.1),
    case("abs", lambda m, x: x.abs(), [(3, 4)]),
    case("abs_zero", lambda m, x: abs(x), [a(-1.0, 0.0, 2.0)]),
    case("sign", lambda m, x: x.sign(), [a(-1.5, 0.0, 2.0, -0.0)]),
    case("sin", lambda m, x: x.sin(), [(3, 4)]),
    case("cos", lambda m, x: x.cos(), [(3, 4)]),
    case("tanh", lambda m, x: x.tanh(), [(3, 4)]),
    case("tanh_large", lambda m, x: m.tanh(x), [a(-1000, -30, 0, 30, 1000)]),
    case("sigmoid", lambda m, x: x.sigmoid(), [(3, 4)]),
    case("sigmoid_large", lambda m, x: m.sigmoid(x), [a(-1000, -50, -1, 0, 1, 50, 1000)]),
    case("square", lambda m, x: m.square(x), [(3, 4)]),
    case("reciprocal", lambda m, x: x.reciprocal(), [(3, 4)], low=0.5),
    case("erf", lambda m, x: x.erf(), [(3, 4)], low=-4, high=4),
    case("erf_values", lambda m, x: m.erf(x), [a(-6, -2.5, -2, -1.9, -0.3, 0, 1e-8, 0.3, 1.99, 2, 3.1, 6, 30)]),
    # activations
    case("relu", lambda m, x: x.relu(), [(3, 4)]),
    case("relu_zero", lambda m, x: m.relu(x), [a(-1.0, 0.0, 1.0)]),
    case("leaky_relu", lambda m, x: F(m).leaky_relu(x), [(3, 4)]),
    case("leaky_relu_slope", lambda m, x: F(m).leaky_relu(x, 0.2), [a(-1.0, 0.0, 1.0, 3.0)]),
    case("gelu", lambda m, x: F(m).gelu(x), [(3, 4)], low=-4, high=4),
    case("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), [(3, 4)], low=-4, high=4),
    case("gelu_large", lambda m, x: F(m).gelu(x), [a(-30, -8, 0, 8, 30)]),
    case("silu", lambda m, x: F(m).silu(x), [(3, 4)], low=-6, high=6),
    case("silu_large", lambda m, x: F(m).silu(x), [a(-1000, -40, 0, 40, 1000)]),
    case("softplus", lambda m, x: F(m).softplus(x), [(3, 4)], low=-5, high=5),
    case("softplus_beta", lambda m, x: F(m).softplus(x, beta=2.0), [(3, 4)], low=-5, high=5),
    case("softplus_threshold", lambda m, x: F(m).softplus(x, beta=0.5, threshold=1.0), [(3, 4)], low=-5, high=5),
    case("softplus_large", lambda m, x: F(m).softplus(x), [a(-1000, -30, 0, 19.9, 20, 20.1, 1000)]),
    case("softsign", lambda m, x: F(m).softsign(x), [(3, 4)], low=-5, high=5),
    case("softsign_large", lambda m, x: F(m).softsign(x), [a(-1e8, -1.0, 0.0, 1.0, 1e8)]),
    # maximum/minimum with ties: torch splits the gradient half/half
    case("maximum_ties", lambda m, x, y: m.maximum(x, y), [a(1, 2, 3, -1), a(1, 0, 3, 5)]),
    case("minimum_ties", lambda m, x, y: m.minimum(x, y), [a(1, 2, 3, -1), a(1, 0, 3, 5)]),
    case("maximum_scalar", lambda m, x: m.maximum(x, m.tensor(0.5, dtype=m.float64)), [(3, 4)]),
    case("maximum_same", lambda m, x: m.maximum(x, x), [(3, 4)]),
    # clamp
    case("clamp_both", lambda m, x: x.clamp(-0.5, 0.7), [(3, 4)]),
    case("clamp_min", lambda m, x: m.clamp(x, min=0.1), [(3, 4)]),
    case("clamp_max", lambda m, x: m.clamp(x, max=0.1), [(3, 4)]),
    case("clamp_int_bounds", lambda m, x: m.clamp(x, -1, 1), [(3, 4)]),
    case("clamp_at_bounds", lambda m, x: m.clamp(x, -1, 1), [a(-2, -1, 0, 1, 2)]),
    case("clamp_min_gt_max", lambda m, x: m.clamp(x, 1, -1), [(3, 4)]),
    case("clamp_int_float_bounds", lambda m, x: m.clamp(x, 0.5), [a(-1, 1, 3, dtype=np.int64)], grad=False),
    case("clamp_int_int_bounds", lambda m, x: m.clamp(x, 0, 2), [a(-1, 1, 3, dtype=np.int32)], grad=False),
    case("clip_alias", lambda m, x: m.clip(x, -0.5, 0.5), [(3, 4)]),
    case("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo, hi), [(3, 4), (4,), (3, 1)]),
    case("clamp_tensor_min", lambda m, x, lo: m.clamp(x, min=lo), [(3, 4), (3, 4)]),
    case("clamp_tensor_max", lambda m, x, hi: m.clamp(x, max=hi), [(3, 4), (1, 4)]),
    case("clamp_tensor_min_scalar_max", lambda m, x, lo: m.clamp(x, lo, m.tensor(0.5, dtype=m.float64)), [(3, 4), (4,)]),
    # where
    case("where_scalar_other", lambda m, x: m.where(x > 0, x, 0.0), [(3, 4)]),
    case("where_scalar_input", lambda m, x: m.where(x > 0, 1.5, x), [(3, 4)]),
    case("where_broadcast_cond", lambda m, c, x, y: m.where(c, x, y), [a(1, 0, 1, 1, dtype=bool), (3, 1), (1, 4)]),
    case("where_method", lambda m, x, y: x.where(x < y, y), [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_op(fn, inputs, kw):
    check(fn, inputs, **kw)


# ------------------------------------------------------------------ bool-valued ops, forward only
R = np.array([[-1.0, 0.0, 1.0, 2.0], [2.0, 1.0, -1.0, 0.5], [0.0, 0.0, 3.0, -2.0]])
B1 = np.array([[True, False, True, False]])
B2 = np.array([[True], [False], [True]])
SPECIAL = np.array([0.0, 1.5, -INF, INF, NAN, -0.0])
BOOL_CASES = [
    case("eq", lambda m, x, y: x == y, [R, R.T.reshape(3, 4)]),
    case("ne", lambda m, x, y: x != y, [R, R[::-1].copy()]),
    case("lt", lambda m, x, y: x < y, [R, R[:1]]),
    case("le", lambda m, x, y: x <= y, [R, R[:1]]),
    case("gt", lambda m, x, y: x > y, [R, R[:, :1]]),
    case("ge", lambda m, x, y: x >= y, [R, R[:, :1]]),
    case("eq_scalar", lambda m, x: x == 0, [R]),
    case("lt_scalar_float", lambda m, x: x < 0.5, [R]),
    case("gt_reflected", lambda m, x: 0.5 > x, [R]),
    case("fn_forms", lambda m, x, y: (m.eq(x, y), m.ne(x, y), m.lt(x, y), m.le(x, y), m.gt(x, y), m.ge(x, y)), [R, R[1:2]]),
    case("cmp_int_float", lambda m, x, y: (x < y, x == y), [a(1, 2, 3, dtype=np.int64), a(1.0, 2.5, 2.0)]),
    case("cmp_nan", lambda m, x: (x == x, x != x, x < 1, x >= 0), [SPECIAL]),
    case("logical_and", lambda m, x, y: m.logical_and(x, y), [B1, B2]),
    case("logical_or", lambda m, x, y: m.logical_or(x, y), [B1, B2]),
    case("logical_xor", lambda m, x, y: m.logical_xor(x, y), [B1, B2]),
    case("logical_not", lambda m, x: m.logical_not(x), [B1]),
    case("logical_on_floats", lambda m, x, y: (m.logical_and(x, y), m.logical_not(x)), [R, R[:1]]),
    case("bool_operators", lambda m, x, y: (x & y, x | y, x ^ y, ~x), [B1, B2]),
    case("isfinite", lambda m, x: m.isfinite(x), [SPECIAL]),
    case("isnan", lambda m, x: m.isnan(x), [SPECIAL]),
    case("isinf", lambda m, x: m.isinf(x), [SPECIAL]),
    case("predicates_methods", lambda m, x: (x.isfinite(), x.isnan(), x.isinf()), [SPECIAL.reshape(2, 3)]),
    case("sign_bool", lambda m, x: m.sign(x), [a(True, False)]),
    case("bitwise_int", lambda m, x, y: (x & y, x | y, x ^ y, ~x, x & 6), [a(1, -2, 12, dtype=np.int64), a(3, 5, 4, dtype=np.int64)]),
    case("reflected_int_ops", lambda m, x: (7 // x, 6 & x, 1 | x, 3 ^ x, x // 2), [a(1, -2, 12, dtype=np.int64)]),
    case("floordiv_float", lambda m, x: (x // 0.5, 3.0 // x), [a(1.5, -2.2, 0.7)]),
    case("bitwise_int32", lambda m, x: (x & 3, ~x), [a(1, -2, 12, dtype=np.int32)]),
    case("int_pow_negative_exponent", lambda m, x, y: (x ** y, 2 ** y), [a(0, 1, -1, -1, 2, -2, 3, dtype=np.int64), a(-1, -3, -3, -2, -1, -2, 2, dtype=np.int64)]),
    case("int_pow", lambda m, x: (x ** 2, x ** 0, 3 ** x), [a(0, 1, -1, 4, dtype=np.int64)]),
    case("isfinite_int", lambda m, x: m.isfinite(x), [a(1, 2, dtype=np.int64)]),
]


@pytest.mark.parametrize("fn,inputs,kw", BOOL_CASES)
def test_bool_op(fn, inputs, kw):
    check(fn, inputs, grad=False, **kw)


def test_comparisons_record_no_grad():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    assert not (x > 1).requires_grad and (x > 1).dtype is tt.bool


# ------------------------------------------------------------------ float32
F32_CASES = [
    case("add_bcast", lambda m, x, y: x + y, [(3, 1, 4), (2, 4)]),
    case("mul_scalar", lambda m, x, y: x * y * 0.5, [(3, 4), (4,)]),
    case("div", lambda m, x, y: x / y, [(3, 4), (3, 4)], low=0.5),
    case("pow", lambda m, x: x ** 3 + x ** 0.5, [(3, 4)], low=0.1),
    case("exp_log", lambda m, x: x.exp() + x.log(), [(3, 4)], low=0.1),
    case("tanh_sigmoid", lambda m, x: x.tanh() * x.sigmoid(), [(3, 4)]),
    case("sigmoid_large", lambda m, x: x.sigmoid(), [a(-1000, -50, 0, 50, 1000)]),
    case("gelu", lambda m, x: F(m).gelu(x), [(3, 4)], low=-4, high=4),
    case("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), [(3, 4)], low=-4, high=4),
    case("silu_softplus", lambda m, x: F(m).silu(x) + F(m).softplus(x), [(3, 4)], low=-5, high=5),
    case("erf", lambda m, x: x.erf(), [(3, 4)], low=-4, high=4),
    case("maximum_clamp", lambda m, x, y: m.maximum(x, y).clamp(-0.5, 0.5), [(3, 4), (4,)]),
    case("rsqrt_sqrt", lambda m, x: x.rsqrt() + x.sqrt(), [(3, 4)], low=0.2),
]


@pytest.mark.parametrize("fn,inputs,kw", F32_CASES)
def test_float32(fn, inputs, kw):
    out = check(fn, inputs, dtype="float32", double_backward=False, **kw)
    assert out.dtype is tt.float32


# ------------------------------------------------------------------ dtype promotion
def make(m, kind):
    """A tensor of the named kind for either library ('int32', 'float64_0d', 'py_float', ...)."""
    if kind.startswith("py_"):
        return {"py_float": 2.5, "py_int": 3, "py_bool": True}[kind]
    name, zero_d = kind.replace("_0d", ""), kind.endswith("_0d")
    arr = np.array(1 if zero_d else [1, 0, 2]).astype(name)
    return m.tensor(arr) if m is tt else torch.tensor(arr)


PROMOTION = [
    ("int32", "int64", "add"), ("int64", "float16", "add"), ("float32", "py_float", "mul"),
    ("int64", "py_float", "mul"), ("int32", "py_float", "mul"), ("float64_0d", "float32", "mul"),
    ("float32", "float64_0d", "mul"), ("int64", "float64_0d", "mul"), ("bool", "int64", "add"),
    ("bool", "int32", "add"), ("int64", "int64", "div"), ("int32", "int32", "div"),
    ("int32", "py_int", "add"), ("int32", "int64_0d", "add"), ("float16", "py_float", "mul"),
    ("float16", "float32", "add"), ("float16", "float64_0d", "add"), ("bool", "py_int", "add"),
    ("bool", "py_float", "mul"), ("bool", "bool", "add"), ("int64", "py_bool", "mul"),
    ("py_int", "int32", "sub"), ("py_float", "int64", "div"), ("int32", "py_int", "div"),
    ("int32", "float32", "maximum"), ("int64_0d", "int32_0d", "add"), ("float32_0d", "int64", "add"),
    ("float64_0d", "float16_0d", "add"), ("int32", "float16", "eq"), ("int64", "py_float", "pow"),
    ("int32", "py_int", "pow"), ("py_int", "int32", "pow"), ("float32", "float64", "where"),
]
BINOPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "pow": lambda x, y: x ** y, "eq": lambda x, y: x == y,
          "maximum": lambda x, y: (tt if isinstance(x, tt.Tensor) else torch).maximum(x, y),
          "where": lambda x, y: (tt if isinstance(x, tt.Tensor) else torch).where(x > 0, x, y)}


@pytest.mark.parametrize("left,right,op", PROMOTION, ids=lambda v: str(v))
def test_promotion(left, right, op):
    got = BINOPS[op](make(tt, left), make(tt, right))
    want = BINOPS[op](make(torch, left), make(torch, right))
    assert f"torch.{got.dtype.name}" == str(want.dtype), (left, right, op, got.dtype, want.dtype)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want.double().numpy(), rtol=1e-3)


@pytest.mark.parametrize("kinds", [("int32", "int64"), ("int64", "float16"), ("float64_0d", "float32"),
                                   ("bool", "int32"), ("int32", "py_float"), ("float16_0d", "int64")])
def test_result_type(kinds):
    got = tt.result_type(*(make(tt, k) for k in kinds))
    assert f"torch.{got.name}" == str(torch.result_type(*(make(torch, k) for k in kinds)))


@pytest.mark.parametrize("fn", [lambda m, x: x.exp(), lambda m, x: x.sqrt(), lambda m, x: x.sigmoid(),
                                lambda m, x: x / 2, lambda m, x: x * 0.5, lambda m, x: x ** 0.5],
                         ids=["exp", "sqrt", "sigmoid", "div", "mul_float", "pow_float"])
def test_int_inputs_give_float32(fn):
    check(fn, [a(1, 4, 9, dtype=np.int64)], grad=False, rtol=1e-6)


@pytest.mark.parametrize("np_dtype", [np.uint8, np.int16, np.dtype(">f8")], ids=str)
def test_unsupported_numpy_dtypes_are_converted(np_dtype):
    for t in (tt.from_numpy(np.array([1, 2], dtype=np_dtype)), tt.tensor(np.array([1, 2], dtype=np_dtype))):
        assert t.data.dtype == t.dtype.np and (t + 1).dtype is t.dtype


@pytest.mark.parametrize("divisor", [1.5, -0.7, 3.0])
def test_remainder_matches_torch(divisor):
    from tinytensor.testing import compare_with_torch
    import torch
    compare_with_torch(lambda a: a % divisor, lambda a: a % divisor, [(3, 4)], double_backward=True)
    compare_with_torch(lambda a: 7.5 % a, lambda a: 7.5 % a, [np.array([0.5, 1.3, -2.2, 3.1])],
                       grad=False)
    ints = np.arange(-7, 7)
    assert (tt.tensor(ints) % 3).tolist() == (torch.tensor(ints) % 3).tolist()


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
def test_rounding_matches_torch_with_zero_gradient(name):
    x = np.array([[-2.5, -1.5, -0.4, 0.0], [0.5, 1.5, 2.5, 3.7]])
    compare_with_torch(lambda a: getattr(a, name)(), lambda a: getattr(a, name)(), [x],
                       double_backward=True)
    ints = tt.tensor([1, -2, 3])
    assert getattr(ints, name)().tolist() == [1, -2, 3]
