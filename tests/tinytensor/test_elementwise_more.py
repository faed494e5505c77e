"""The top-level elementwise names of issue 23 (ops/special_functions.py, ops/elementwise_more.py)
against torch: float64 values, gradients and double backward in one-line cases, the integer,
bool and edge-value behaviour, torch's errors, Tensor methods, and compiled replays of the
ops whose result or check depends on the values."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch

from .cases import array as a, case

INF, NAN = math.inf, math.nan


def check_double(fn, inputs, **kw):
    kw.setdefault("double_backward", True)
    return compare_with_torch(lambda *xs: fn(tt, *xs), lambda *xs: fn(torch, *xs), inputs, **kw)


UNIT = a(0.05, 0.3, 0.5, 0.77, 0.95)
MIXED = a(-2.5, -0.7, 0.0, 0.4, 1.0, 3.2)
CASES = [
    case("erfc", lambda m, x: m.erfc(x), [MIXED]),
    case("erfinv", lambda m, x: m.erfinv(x), [a(-0.99, -0.5, 0.0, 0.3, 0.9)]),
    case("lgamma", lambda m, x: m.lgamma(x), [a(-1.5, 0.2, 1.0, 2.0, 3.5, 20.0)]),
    case("digamma", lambda m, x: m.digamma(x), [a(-1.5, 0.2, 1.0, 3.5, 20.0)]),
    case("polygamma_1", lambda m, x: m.polygamma(1, x), [a(-1.5, 0.2, 1.0, 3.5, 20.0)]),
    case("polygamma_method", lambda m, x: x.polygamma(2), [a(0.2, 1.0, 3.5)]),
    case("mvlgamma", lambda m, x: m.mvlgamma(x, 4), [a(1.6, 2.0, 7.5)]),
    case("i0", lambda m, x: m.i0(x), [a(-30.0, -2.0, 0.0, 1.5, 26.0)]),
    case("igamma_x", lambda m, x: m.igamma(m.full_like(x, 2.5), x), [a(0.1, 1.0, 3.0, 9.0)]),
    case("igammac_x", lambda m, x: m.igammac(m.full_like(x, 2.5), x), [a(0.1, 1.0, 3.0, 9.0)]),
    case("xlogy", lambda m, x, y: m.xlogy(x, y), [a(0.0, 1.5, -2.0, 0.0), a(2.0, 0.5, 3.0, 0.0)]),
    case("logit", lambda m, x: m.logit(x), [UNIT]),
    case("logit_eps", lambda m, x: m.logit(x, eps=0.2), [UNIT]),
    case("sinc", lambda m, x: m.sinc(x), [a(-1.5, -0.2, 0.5, 1.0, 2.3)]),
    # at 0 first order only: torch's second derivative there is a 0/0 nan (ours is 0)
    case("sinc_at_0", lambda m, x: m.sinc(x), [a(-0.2, 0.0, 1.0)], double_backward=False),
    case("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), [MIXED, a(1.0, -3.0, 0.0, 0.4, 5.0, -1.0)]),
    case("float_power", lambda m, x, y: m.float_power(x, y), [a(0.5, 1.5, 2.0), a(-1.0, 2.0, 0.5)]),
    case("float_power_scalar", lambda m, x: m.float_power(x, 3), [MIXED]),
    case("fmax", lambda m, x, y: m.fmax(x, y), [a(1.0, NAN, 2.0, 3.0), a(0.5, 1.0, NAN, 3.0)]),
    case("fmin", lambda m, x, y: m.fmin(x, y), [a(1.0, NAN, 2.0, 3.0), a(0.5, 1.0, NAN, 3.0)]),
    case("frac", lambda m, x: m.frac(x), [a(-2.5, -0.3, 0.0, 1.75)]),
    case("frexp", lambda m, x: m.frexp(x), [a(-5.0, 0.3, 1.0, 1000.0)]),
    case("ldexp", lambda m, x, y: m.ldexp(x, y), [MIXED, a(-1.0, 2.0, 3.0, 0.5, 0.0, 4.0)]),
    case("nan_to_num", lambda m, x: m.nan_to_num(x, nan=1.5, posinf=9.0), [a(NAN, INF, -INF, 2.0)]),
    case("clamp_min", lambda m, x, y: m.clamp_min(x, y), [a(1.0, -2.0, 3.0, NAN), a(0.0, 0.0, 5.0, 1.0)]),
    case("clamp_max", lambda m, x, y: m.clamp_max(x, y), [a(1.0, -2.0, 3.0, 0.5), a(0.0, 0.0, 5.0, NAN)]),
    case("clamp_min_scalar", lambda m, x: m.clamp_min(x, 0.5), [MIXED]),
    case("deg2rad_rad2deg", lambda m, x: m.rad2deg(m.deg2rad(x) * 2.0), [MIXED]),
    case("true_divide", lambda m, x, y: m.true_divide(x, y), [MIXED, a(1.0, 2.0, -3.0, 0.5, 4.0, 8.0)]),
    case("positive", lambda m, x: m.positive(x) * 2.0, [MIXED]),
    case("nextafter", lambda m, x, y: m.nextafter(x, y), [MIXED, a(INF, -INF, 1.0, 0.0, 1.0, 3.2)]),
]


@pytest.mark.parametrize("fn, inputs, kw", CASES)
def test_float64_values_gradients_double_backward(fn, inputs, kw):
    check_double(fn, inputs, **kw)


def _same(ours, theirs, rtol=1e-12):
    """float32: ours is the float64 value rounded, torch's its own float32 arithmetic."""
    o, t = ours.numpy(), theirs.numpy()
    assert o.dtype == t.dtype, (o.dtype, t.dtype)
    np.testing.assert_allclose(o, t, rtol=1e-6 if o.dtype == np.float32 else rtol,
                               atol=1e-7 if o.dtype == np.float32 else 1e-14)


def test_integer_and_bool_inputs_compute_in_the_default_float():
    i = tt.tensor([1, 2, 5])
    ti = torch.tensor([1, 2, 5])
    for name in ("erfc", "erfinv", "lgamma", "digamma", "i0", "sinc", "logit", "deg2rad", "rad2deg"):
        _same(getattr(tt, name)(i), getattr(torch, name)(ti))
    _same(tt.lgamma(tt.tensor([True, False])), torch.lgamma(torch.tensor([True, False])))
    _same(tt.float_power(i, 2), torch.float_power(ti, 2))           # float64, as torch
    _same(tt.float_power(2, tt.tensor([0.5, 3.0], dtype=tt.float32)),
          torch.float_power(2, torch.tensor([0.5, 3.0])))
    _same(tt.ldexp(tt.tensor([1.0, 3.0]), tt.tensor([2, -1])), torch.ldexp(torch.tensor([1.0, 3.0]), torch.tensor([2, -1])))
    _same(tt.xlogy(2.0, tt.tensor([0.5, 3.0])), torch.xlogy(2.0, torch.tensor([0.5, 3.0])))


def test_integer_ops():
    x, y = np.array([12, -18, 0, 7, 0]), np.array([8, 12, 5, 0, 0])
    for name in ("gcd", "lcm", "floor_divide"):
        if name == "floor_divide":
            y = np.array([8, 12, 5, -3, 2])
        _same(getattr(tt, name)(tt.tensor(x), tt.tensor(y)), getattr(torch, name)(torch.tensor(x), torch.tensor(y)))
    _same(tt.floor_divide(tt.tensor([7.5, -7.5]), 2.0), torch.floor_divide(torch.tensor([7.5, -7.5]), 2.0))
    with pytest.raises(TypeError, match="gcd"):
        tt.gcd(tt.tensor([1.0]), tt.tensor([2.0]))


def test_predicates_and_edges():
    x = np.array([-INF, -2.0, -0.0, 0.0, 3.0, INF, NAN])
    tx, th = tt.tensor(x), torch.tensor(x)
    for name in ("signbit", "isneginf", "isposinf", "isreal"):
        _same(getattr(tt, name)(tx), getattr(torch, name)(th))
        _same(getattr(tt, name)(tt.tensor([-1, 0, 2])), getattr(torch, name)(torch.tensor([-1, 0, 2])))
    _same(tt.signbit(tt.tensor([True, False])), torch.signbit(torch.tensor([True, False])))
    _same(tt.nan_to_num(tx), torch.nan_to_num(th))
    _same(tt.nan_to_num(tt.tensor(x, dtype=tt.float32)), torch.nan_to_num(torch.tensor(x, dtype=torch.float32)))
    _same(tt.nan_to_num(tt.tensor([1, 2])), torch.nan_to_num(torch.tensor([1, 2])))
    _same(tt.heaviside(tx, tt.tensor([0.5], dtype=tt.float64)), torch.heaviside(th, torch.tensor([0.5], dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="heaviside"):
        tt.heaviside(tx, tt.tensor([1]))
    with pytest.raises(TypeError, match="positive"):
        tt.positive(tt.tensor([True]))
    m, e = tt.frexp(tx[1:5])
    tm, te = torch.frexp(th[1:5])
    _same(m, tm)
    _same(e, te)
    assert tt.frexp(tx).mantissa is not None


def test_isin():
    x = np.array([[1, 4, 2], [7, 2, 9]])
    for invert in (False, True):
        _same(tt.isin(tt.tensor(x), tt.tensor([2, 9]), invert=invert),
              torch.isin(torch.tensor(x), torch.tensor([2, 9]), invert=invert))
    _same(tt.isin(tt.tensor(x), 4), torch.isin(torch.tensor(x), 4))
    _same(tt.isin(4, tt.tensor(x)), torch.isin(4, torch.tensor(x)))


def test_hash_tensor():
    x = np.array([[0.5, -1.25, 3.0], [2.0, 0.0, -0.0]])
    for kw in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}, {"dim": (0, 1)}):
        got = tt.hash_tensor(tt.tensor(x), **kw)
        want = torch.hash_tensor(torch.tensor(x), **kw)
        assert got.dtype is tt.uint64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for v in (np.array([1.5, 2.5], dtype=np.float32), np.array([3, -4]), np.array([True, False])):
        np.testing.assert_array_equal(tt.hash_tensor(tt.tensor(v)).numpy(), torch.hash_tensor(torch.tensor(v)).numpy())


def test_igamma_edges_and_no_derivative_in_a():
    a_ = np.array([0.0, 0.0, 1.0, INF, 2.0, -1.0, 3.0, 1e-3, 50.0, 500.0, 2.0])
    x = np.array([0.0, 1.0, 0.0, 1.0, INF, 1.0, NAN, 5.0, 49.0, 510.0, 1e-200])
    for name in ("igamma", "igammac"):
        np.testing.assert_allclose(getattr(tt, name)(tt.tensor(a_), tt.tensor(x)).numpy(),
                                   getattr(torch, name)(torch.tensor(a_), torch.tensor(x)).numpy(),
                                   rtol=1e-9, atol=1e-14)
    av = tt.tensor([2.0], dtype=tt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="igamma"):
        tt.igamma(av, tt.tensor([1.0], dtype=tt.float64)).sum().backward()


def test_lgamma_digamma_edges():
    x = np.array([-INF, -3.0, -2.5, -0.0, 0.0, 1e-300, 1.0, 2.0, 1e10, 1e306, INF, NAN])
    _same(tt.lgamma(tt.tensor(x)), torch.lgamma(torch.tensor(x)))
    _same(tt.digamma(tt.tensor(x)), torch.digamma(torch.tensor(x)))


def test_mvlgamma_outside_the_old_domain_is_torchs():
    """torch 2.13 no longer refuses x <= (p-1)/2: lgamma's poles give inf, nan stays nan."""
    x = np.array([0.0, 0.7, 1.0, 2.5, NAN, INF, -INF])
    for p in (1, 3):
        _same(tt.mvlgamma(tt.tensor(x), p), torch.mvlgamma(torch.tensor(x), p))


def test_two_python_numbers_divide():
    _same(tt.floor_divide(-4.8, -7.5), torch.floor_divide(-4.8, -7.5) if False else
          torch.floor_divide(torch.tensor(-4.8), -7.5))


def test_compiled_replays_recompute():
    def f(x, y):
        return (tt.fmax(x, y) + tt.nan_to_num(x / y) + tt.lgamma(x.abs() + 1.0) + tt.erfinv(x * 0.1),
                tt.isin(x, y), tt.frexp(x)[1], tt.hash_tensor(x))
    compiled = tt.compile(f)
    for xs, ys in (([1.0, -2.0, 0.0], [0.5, 0.0, 0.0]), ([3.0, 4.5, -1.0], [3.0, 1.0, 2.0])):
        x, y = tt.tensor(xs, dtype=tt.float64), tt.tensor(ys, dtype=tt.float64)
        for got, want in zip(compiled(x, y), f(x, y)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_methods():
    x = tt.tensor([0.25, 0.5], dtype=tt.float64)
    th = torch.tensor([0.25, 0.5], dtype=torch.float64)
    for name in ("erfc", "erfinv", "lgamma", "digamma", "i0", "logit", "sinc", "frac", "signbit",
                 "isneginf", "isposinf", "isreal", "nan_to_num", "deg2rad", "rad2deg", "positive"):
        _same(getattr(x, name)(), getattr(th, name)())
    for name in ("xlogy", "igamma", "igammac", "logaddexp2", "float_power", "fmax", "fmin",
                 "ldexp", "nextafter", "clamp_min", "clamp_max", "true_divide", "floor_divide"):
        _same(getattr(x, name)(x), getattr(th, name)(th))
    _same(x.mvlgamma(1), th.mvlgamma(1))
    _same(x.polygamma(1), th.polygamma(1), rtol=1e-9)   # torch's trigamma: 1e-10 relative
