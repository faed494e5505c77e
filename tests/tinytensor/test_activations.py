"""F.elu ... F.softmin (ops/activations.py) against torch.nn.functional: values, gradients
and double backward in float64 (oracle.check), the corners of the piecewise ones, large
inputs, inplace=True, dtypes and a float32 pass."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch

from .oracle import F, check, with_squares


def a(*values, dtype=np.float64):
    return np.array(values, dtype=dtype)


def case(name, fn, inputs, **kw):
    return pytest.param(fn, inputs, kw, id=name)


def first_order(fn, inputs, **kw):
    return compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), inputs, **kw)


CORNERS = a(-4.0, -3.0, -1.0, -0.0, 0.0, 1.0, 3.0, 6.0, 7.0)
CASES = [
    case("elu", lambda m, x: F(m).elu(x), [(3, 4)], low=-3, high=3),
    case("elu_alpha", lambda m, x: F(m).elu(x, alpha=0.5), [(3, 4)], low=-3, high=3),
    case("selu", lambda m, x: F(m).selu(x), [(3, 4)], low=-3, high=3),
    case("celu", lambda m, x: F(m).celu(x, alpha=0.7), [(3, 4)], low=-3, high=3),
    case("celu_default", lambda m, x: F(m).celu(x), [(2, 0, 3)]),
    case("mish", lambda m, x: F(m).mish(x), [(3, 4)], low=-5, high=5),
    case("hardswish", lambda m, x: F(m).hardswish(x), [(3, 4)], low=-5, high=5),
    case("hardtanh", lambda m, x: F(m).hardtanh(x), [(3, 4)]),
    case("hardtanh_bounds", lambda m, x: F(m).hardtanh(x, -0.5, 1.5), [(3, 4)]),
    case("relu6", lambda m, x: F(m).relu6(x), [(3, 4)], low=-3, high=9),
    case("logsigmoid", lambda m, x: F(m).logsigmoid(x), [(3, 4)], low=-6, high=6),
    case("softmin_last", lambda m, x: F(m).softmin(x, dim=-1), [(3, 4)]),
    case("softmin_first", lambda m, x: F(m).softmin(x, 0), [(3, 4, 2)]),
    # the corners: torch's slope (and second derivative) exactly at 0, +-3, the bounds
    case("elu_corners", lambda m, x: (F(m).elu(x), F(m).elu(x, 0.5), F(m).selu(x), F(m).celu(x, 2.0)), [CORNERS]),
    case("hardswish_corners", lambda m, x: F(m).hardswish(x), [CORNERS]),
    case("hardtanh_corners", lambda m, x: (F(m).hardtanh(x), F(m).hardtanh(x, -3.0, 3.0), F(m).relu6(x)), [CORNERS]),
    case("mish_logsigmoid_corners", lambda m, x: (F(m).mish(x), F(m).logsigmoid(x)), [CORNERS]),
    # large inputs: no overflow, torch's limits
    case("logsigmoid_large", lambda m, x: F(m).logsigmoid(x), [a(-1000.0, -40.0, 0.0, 40.0, 1000.0)]),
    case("elu_large", lambda m, x: (F(m).elu(x), F(m).selu(x), F(m).celu(x, 0.5)), [a(-1000.0, -40.0, 40.0, 1000.0)]),
    case("softmin_large", lambda m, x: F(m).softmin(x, -1), [a(-1000.0, 0.0, 1000.0)]),
    case("mish_moderate", lambda m, x: F(m).mish(x), [a(-30.0, -10.0, 10.0, 30.0)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_op(fn, inputs, kw):
    check(fn, inputs, **kw)


FIRST_ORDER = [
    # torch's mish backward computes softplus as log1p(exp(x)), whose second derivative is nan
    # past exp's overflow; ours stays finite, values and slopes agree
    case("mish_large", lambda m, x: F(m).mish(x), [a(-1000.0, -100.0, 100.0, 1000.0)]),
    # torch has no double backward for hardsigmoid (test below: ours is 0)
    case("hardsigmoid", lambda m, x: F(m).hardsigmoid(x), [(3, 4)], low=-5, high=5),
    case("hardsigmoid_corners", lambda m, x: F(m).hardsigmoid(x), [CORNERS]),
    # float64 first order runs backward_arrays
    case("all_backward_arrays", lambda m, x: (
        F(m).elu(x, 0.5), F(m).selu(x), F(m).celu(x, 2.0), F(m).mish(x), F(m).hardswish(x),
        F(m).hardtanh(x, -2.0, 2.5), F(m).relu6(x), F(m).logsigmoid(x)), [np.r_[CORNERS, np.linspace(-5, 8, 12)]]),
]


@pytest.mark.parametrize("fn,inputs,kw", FIRST_ORDER)
def test_first_order(fn, inputs, kw):
    first_order(fn, inputs, **kw)


def test_hardsigmoid_second_derivative_is_zero():
    # d2/dx2 of h(x)^2 / 2 is h'^2 + h h'', so it is h'^2 (1/36 strictly inside) when h'' = 0
    x = tt.tensor(CORNERS, dtype=tt.float64, requires_grad=True)
    h = tt.functional.hardsigmoid(x)
    (g,) = tt.grad((h * h * 0.5).sum(), x, create_graph=True)
    (gg,) = tt.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), np.where(np.abs(CORNERS) < 3, 1 / 36, 0.0), rtol=1e-12)


F32_CASES = [
    case("all", lambda m, x: (F(m).elu(x), F(m).selu(x), F(m).celu(x, 0.5), F(m).mish(x), F(m).hardswish(x),
                              F(m).hardsigmoid(x), F(m).hardtanh(x), F(m).relu6(x), F(m).logsigmoid(x),
                              F(m).softmin(x, 1)), [(3, 4)], low=-5, high=7),
]


@pytest.mark.parametrize("fn,inputs,kw", F32_CASES)
def test_float32(fn, inputs, kw):
    outs = first_order(fn, inputs, dtype="float32", **kw)
    assert all(o.dtype is tt.float32 for o in outs)


# ------------------------------------------------------------------ inplace=True
INPLACE = ["elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "hardtanh", "relu6"]


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_matches_torch(name):
    def fn(m, x):
        h = x * 1.5  # not a leaf: in-place on it is allowed with autograd, as in torch
        out = getattr(F(m), name)(h, inplace=True)
        assert out is h
        return h
    first_order(fn, [np.r_[CORNERS, np.linspace(-5, 8, 7)]])


def test_inplace_on_a_leaf_that_requires_grad_is_refused():
    with pytest.raises(RuntimeError, match="elu_: a leaf tensor that requires grad"):
        tt.functional.elu(tt.tensor([1.0, -1.0], requires_grad=True), inplace=True)


# ------------------------------------------------------------------ dtypes and arguments
def test_hardtanh_and_relu6_keep_integer_dtypes_like_torch():
    x = a(-7, -1, 0, 3, 9, dtype=np.int64)
    check(lambda m, x: (F(m).hardtanh(x), F(m).relu6(x), F(m).hardtanh(x, -2, 4)), [x], grad=False)


def test_float_functions_of_integers_compute_in_float32():
    # torch has no integer kernels for these; like tt.exp, we compute in the default float dtype
    x = tt.tensor([-2, 0, 3])
    for name in ("elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "logsigmoid"):
        out = getattr(tt.functional, name)(x)
        want = getattr(torch.nn.functional, name)(torch.tensor([-2.0, 0.0, 3.0]))
        assert out.dtype is tt.float32, name
        np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, err_msg=name)


def test_celu_alpha_zero_and_hardtanh_bounds_are_refused():
    with pytest.raises(ZeroDivisionError, match="celu: alpha must not be 0"):
        tt.functional.celu(tt.tensor([1.0]), alpha=0.0)
    with pytest.raises(ValueError, match=r"hardtanh: min_val \(2.0\) cannot be greater than max_val \(1.0\)"):
        tt.functional.hardtanh(tt.tensor([1.0]), 2.0, 1.0)


def test_softmin_dtype_and_implicit_dim_like_torch():
    x = np.arange(6.0).reshape(2, 3)
    out = tt.functional.softmin(tt.tensor(x, dtype=tt.float32), 1, dtype=tt.float64)
    assert out.dtype is tt.float64
    np.testing.assert_allclose(out.numpy(), torch.softmax(-torch.tensor(x), 1).numpy(), rtol=1e-12)
    for shape, dim in [((4,), 0), ((2, 3), 1), ((2, 3, 4), 0), ((2, 3, 4, 5), 1)]:
        v = np.random.default_rng(0).standard_normal(shape)
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
            got = tt.functional.softmin(tt.tensor(v))
        np.testing.assert_allclose(got.numpy(), torch.softmax(-torch.tensor(v), dim).numpy(), rtol=1e-12)


def test_graph_names_are_torch_names():
    x = tt.tensor([0.5, -0.5], requires_grad=True)
    F_ = tt.functional
    names = [f(x).grad_fn.name for f in (F_.elu, F_.selu, F_.celu, F_.relu6, F_.hardtanh, F_.logsigmoid)]
    assert names == ["elu", "selu", "celu", "relu6", "hardtanh", "logsigmoid"]
    assert math.isclose(F_.selu(tt.tensor(-1e9, dtype=tt.float64)).item(), -1.0507009873554805 * 1.6732632423543772)
