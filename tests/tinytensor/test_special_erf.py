"""erf / erfc of ops/special.py against math's and torch's over dense sweeps, tails and the
special values; float32 within 1 ulp of the float64 reference (torch's own bound)."""
import math

import numpy as np
import pytest
import torch

from tinytensor.ops.special import erf, erfc, gelu_exact, gelu_exact_slope

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 0.5, 1.0, 2.0, 4.0,
           np.nextafter(0.5, 0), np.nextafter(4.0, 0), 27.0, 27.5, -27.5, 1e300]


def _sweep64():
    tiny = np.geomspace(1e-320, 30, 6000)
    return np.concatenate([np.linspace(-30, 30, 60001), tiny, -tiny, SPECIAL])


@pytest.mark.parametrize("name, ours, ref, max_ulp", [("erf", erf, math.erf, 2), ("erfc", erfc, math.erfc, 5)])
def test_float64_matches_math_to_a_few_ulp(name, ours, ref, max_ulp):
    x = _sweep64()
    got = ours(np, x)
    want = np.array([ref(v) for v in x])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    # relative to the value, in ulp (math's own error, ~1 ulp, is inside the bound)
    ok = finite & (want != 0)
    ulp = np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))
    assert ulp.max() <= max_ulp + 1, (name, x[ok][ulp.argmax()], ulp.max())
    zero_ref = finite & (want == 0)
    assert np.all(np.abs(got[zero_ref]) < 1e-320)


def test_signed_zero_and_infinities():
    x = np.array([0.0, -0.0, np.inf, -np.inf])
    for dtype in (np.float64, np.float32):
        e = erf(np, x.astype(dtype))
        np.testing.assert_array_equal(e, [0.0, -0.0, 1.0, -1.0])
        np.testing.assert_array_equal(np.signbit(e), [False, True, False, True])
        np.testing.assert_array_equal(erfc(np, x.astype(dtype)), [1.0, 1.0, 0.0, 2.0])


@pytest.mark.parametrize("fn, th", [(erf, torch.erf), (erfc, torch.erfc)])
def test_float32_within_one_ulp_of_float64_reference(fn, th):
    tiny = np.geomspace(1e-45, 12, 100000).astype(np.float32)
    x = np.concatenate([np.linspace(-12, 12, 400001, dtype=np.float32), tiny, -tiny,
                        np.array(SPECIAL[:8], dtype=np.float32)])
    got = fn(np, x)
    assert got.dtype == np.float32
    want = np.array([(math.erf if fn is erf else math.erfc)(float(v)) for v in x[::7]])
    sub, want32 = got[::7].astype(np.float64), want.astype(np.float32)
    ulp = np.abs(sub - want) / np.spacing(np.maximum(np.abs(want32), np.float32(1.4e-45))).astype(np.float64)
    assert np.nanmax(ulp) <= 1.0
    # torch's float32 erf is within 1 ulp as well, so the two are within 2 of each other
    np.testing.assert_array_max_ulp(got, th(torch.from_numpy(x)).numpy(), maxulp=2)


def test_gelu_helpers_match_float64_formulas():
    x = np.concatenate([np.linspace(-40, 40, 20001), [0.0, -0.0, np.inf, -np.inf]])
    t = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.gelu(t)
    y.backward(torch.ones_like(t))
    # for x < 0, 1 + erf cancels in torch's formula as in ours: absolute error ~ |x| eps
    np.testing.assert_allclose(gelu_exact(x), y.detach().numpy(), rtol=4e-16, atol=1e-14)
    np.testing.assert_allclose(gelu_exact_slope(x[:-2]), t.grad.numpy()[:-2], rtol=1e-15, atol=1e-16)
    assert np.isnan(gelu_exact(np.array([np.nan]))[0])
    x32 = x.astype(np.float32)
    # float32 is computed in float64 inside, so it is the float64 value rounded (torch's float32
    # GELU loses more where 1 + erf cancels, x < -3)
    ref = torch.nn.functional.gelu(torch.from_numpy(x32.astype(np.float64))).numpy()
    got = gelu_exact(x32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[:-2], ref[:-2], rtol=6e-8, atol=1e-44)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_and_silu_fast_path_match_torch_at_extremes(dtype):
    # the in-place 1 / (1 + exp(-x)) path: torch's formula, so its flush to 0 where exp(-x)
    # overflows (x < -88.7 in float32) is torch's too; 0-d inputs still work
    import tinytensor as tt
    import tinytensor.functional as F
    x = np.array([-1000, -745, -104, -100, -88.5, -20, -1, -0.0, 0, 1e-30, 3, 20, 100, 1000], dtype=dtype)
    for ours, theirs in ((tt.sigmoid, torch.sigmoid), (F.silu, torch.nn.functional.silu)):
        a = tt.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ya, yb = ours(a), theirs(b)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=4 * np.finfo(dtype).eps, atol=0)
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=8 * np.finfo(dtype).eps, atol=1e-300)
        assert ours(tt.tensor(dtype(-2.0))).numpy().shape == ()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_gelu_in_place_path_has_the_expressions_bits(dtype):
    # the in-place NumPy path must round exactly as the written expression (the Tensor path
    # and the compiler's kernels are held bitwise to it)
    from tinytensor.ops.elementwise import Gelu, _SQRT_2_OVER_PI
    x = (np.random.default_rng(3).standard_normal(5000) * 4).astype(dtype)
    expr = 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    t = Gelu._tanh_inner(x)
    t += 1.0
    t *= x * 0.5
    np.testing.assert_array_equal(t, expr)
    np.testing.assert_array_equal(Gelu._tanh_slope(x), Gelu._slope(x, "tanh", np.tanh, None, np.exp))
