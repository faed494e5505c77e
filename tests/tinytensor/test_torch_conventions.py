"""The issue-23 conventions tinytensor now shares with torch, each against torch directly:
NaN in sign/abs/relu/softsign/maximum/minimum/clamp, var/std's positional bool `unbiased`,
linspace with a tensor endpoint, remainder's divisor gradient, round(decimals=), arithmetic
of two Python numbers, rsub, and where tinytensor keeps torch's SIMD-body answer at NaN."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.testing import gradcheck

NAN, INF = math.nan, math.inf
X = np.array([NAN, -2.0, 0.0, 1.5, INF, -INF, NAN, 0.5])


def _grad(mod, fn, *arrays, cot=None):
    """(value, gradients of every input) of fn(mod, *inputs) for a fixed cotangent."""
    xs = [mod.tensor(a, requires_grad=True) for a in arrays]
    out = fn(mod, *xs)
    c = np.linspace(0.5, 2.0, out.numel()).reshape(tuple(out.shape)) if cot is None else cot
    grads = (tt.grad if mod is tt else torch.autograd.grad)(out, xs, mod.tensor(c))
    value = out.detach().numpy()
    return value, [g.detach().numpy() for g in grads]


def _same(fn, *arrays):
    v, gs = _grad(tt, fn, *arrays)
    tv, tgs = _grad(torch, fn, *arrays)
    np.testing.assert_allclose(v, tv, rtol=1e-12, equal_nan=True)
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g, tg, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("fn", [
    lambda m, x: m.sign(x),
    lambda m, x: m.abs(x),
    lambda m, x: m.relu(x),
    lambda m, x: (F if m is tt else torch.nn.functional).softsign(x),
], ids=["sign", "abs", "relu", "softsign"])
def test_nan_and_inf_in_unary_ops(fn):
    _same(fn, X)


@pytest.mark.parametrize("fn", [
    lambda m, a, b: m.maximum(a, b), lambda m, a, b: m.minimum(a, b),
    lambda m, a, b: m.max(a, b), lambda m, a, b: m.min(a, b),
], ids=["maximum", "minimum", "max", "min"])
def test_one_nan_operand_gives_both_the_gradient(fn):
    a = np.array([NAN, 1.0, 2.0, NAN, 3.0])
    b = np.array([0.0, NAN, 2.0, NAN, -1.0])
    _same(fn, a, b)


def test_clamp_with_a_nan_tensor_bound_is_nan():
    x = np.array([0.5, -3.0, 4.0, 1.0])
    lo = np.array([NAN, -1.0, 0.0, NAN])
    hi = np.array([2.0, NAN, 3.0, 0.5])
    _same(lambda m, x, lo, hi: m.clamp(x, lo, hi), x, lo, hi)
    _same(lambda m, x, lo: m.clamp(x, min=lo), x, lo)


def test_activations_at_nan_keep_torchs_simd_body_answer():
    """torch's own gradient at NaN differs between its vectorised body and its scalar tail
    (see known_failures.py); tinytensor gives the body's answer everywhere."""
    x = tt.tensor([NAN] * 3, requires_grad=True)
    g_ht, = tt.grad(F.hardtanh(x).sum(), [x])
    g_elu, = tt.grad(F.elu(x).sum(), [x])
    body = torch.full((16,), NAN, dtype=torch.float64, requires_grad=True)
    t_ht, = torch.autograd.grad(torch.nn.functional.hardtanh(body).sum(), [body])
    t_elu, = torch.autograd.grad(torch.nn.functional.elu(body).sum(), [body])
    assert (g_ht.numpy() == 0).all() and (t_ht.numpy() == 0).all()
    assert np.isnan(g_elu.numpy()).all() and np.isnan(t_elu.numpy()).all()


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("unbiased", [False, True])
def test_positional_bool_is_unbiased(name, unbiased):
    a = np.arange(12.0).reshape(3, 4) ** 1.5
    out = getattr(tt, name)(tt.tensor(a), unbiased)
    ref = getattr(torch, name)(torch.tensor(a), unbiased)
    for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        assert tuple(o.shape) == tuple(r.shape) == ()
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-13)
    method = getattr(tt.tensor(a), name, None)
    if method is not None:
        np.testing.assert_allclose(method(unbiased).numpy(), getattr(torch.tensor(a), name)(unbiased).numpy(),
                                   rtol=1e-13)


def test_linspace_tensor_endpoint_computes_in_the_requested_dtype():
    start = np.float32(0.1)
    out = tt.linspace(tt.tensor(start), -3, 50, dtype=tt.float64)
    ref = torch.linspace(torch.tensor(start), -3, 50, dtype=torch.float64)
    # float32 arithmetic would be 1e-8 off; torch and NumPy place the points a few ulps apart
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-14, atol=1e-15)


def test_remainder_divisor_gradient_uses_floor_division():
    """a / b rounds up onto an integer where Python's a // b does not: the divisor's
    gradient is -a // b, as torch's."""
    a = np.array([1.0, -7.0, 0.3, 5.0, 3.0])
    b = np.array([0.1, 0.7, -0.1, 2.5, 0.3])
    assert (np.floor(a / b) != np.floor_divide(a, b)).any()   # the inputs make the point
    _same(lambda m, a, b: m.remainder(a, b), a, b)
    x = tt.tensor(np.array([1.3, -2.2, 4.1]), requires_grad=True)
    d = tt.tensor(np.array([0.7, 0.9, -1.6]), requires_grad=True)
    gradcheck(lambda x, d: tt.remainder(x, d), [x, d])


@pytest.mark.parametrize("decimals", [0, 2, -2, 3])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_round_decimals(decimals, dtype):
    a = np.array([0.125, 1234.5678, -2.5, 1250.0, 0.0, -0.0049, 1e10 / 3]).astype(dtype)
    out = tt.round(tt.tensor(a), decimals=decimals)
    ref = torch.round(torch.tensor(a), decimals=decimals)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(tt.tensor(a).round(decimals=decimals).numpy(), ref.numpy())
    x = tt.tensor(a, requires_grad=True)
    g, = tt.grad(tt.round(x, decimals=decimals).sum(), [x])
    assert not g.numpy().any()


def test_round_decimals_refuses_integers_by_name():
    with pytest.raises(TypeError, match="round: decimals=2 is supported for floating-point"):
        tt.round(tt.tensor([1, 2]), decimals=2)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("a, b", [(2.5, -4.0), (3, 4), (7, 2.0), (-2, 0.5)])
def test_two_python_numbers(op, a, b):
    out, ref = getattr(tt, op)(a, b), getattr(torch, op)(a, b)
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-7)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_two_python_numbers_rounded_div(mode):
    out, ref = tt.div(-7.5, 2, rounding_mode=mode), torch.div(-7.5, 2, rounding_mode=mode)
    assert out.item() == ref.item() and str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]


def test_rsub():
    a, b = np.array([1.0, -2.0, 3.5]), np.array([[0.5], [2.0]])
    _same(lambda m, a, b: m.rsub(a, b), a, b)
    _same(lambda m, a, b: m.rsub(a, b, alpha=2.5), a, b)
    _same(lambda m, a: m.rsub(a, 3.0), a)
    _same(lambda m, a: 3.0 - a, a)
    assert tt.Tensor.__rsub__(2.5, tt.tensor([1.0])) is NotImplemented
    assert torch.Tensor.__rsub__(2.5, torch.tensor([1.0])) is NotImplemented


def test_relu_gradient_is_zero_where_relu_is_zero_even_for_a_nan_upstream_gradient():
    # torch's threshold_backward selects: 0 where the result is <= 0, whatever the gradient
    # (the compile fuzzer found eager's fast backward multiplying instead: nan * 0 = nan)
    import torch
    x = np.array([1.0, -1.0, 0.0, np.nan, 2.0])
    g = np.array([np.nan, np.nan, np.inf, 3.0, np.nan])
    X = tt.tensor(x, requires_grad=True)
    X.relu().backward(tt.tensor(g))
    T = torch.tensor(x, requires_grad=True)
    T.relu().backward(torch.tensor(g))
    np.testing.assert_array_equal(X.grad.numpy(), T.grad.numpy())


@pytest.mark.parametrize("name", ["hardtanh", "relu6", "hardsigmoid"])
def test_clamped_activations_select_their_gradient_as_torch_does(name):
    # 0 where the slope is 0, even where the upstream gradient is nan or inf (torch selects)
    import torch
    x = np.array([-7.0, -1.0, -0.5, 0.5, 2.0, 7.0])
    g = np.array([np.nan, np.inf, 1.0, 2.0, np.nan, np.inf])
    X = tt.tensor(x, requires_grad=True)
    getattr(F, name)(X).backward(tt.tensor(g))
    T = torch.tensor(x, requires_grad=True)
    getattr(torch.nn.functional, name)(T).backward(torch.tensor(g))
    # rtol: torch's float64 hardsigmoid slope is float32's 1/6 (0.1666666716...)
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=1e-7, atol=0)
