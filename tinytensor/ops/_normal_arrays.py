"""The error function's relatives on whole arrays (NumPy or CuPy), in float64: erfcx,
erfinv, erfcinv, ndtri and log_ndtr, all built on erf/erfc of special.py (their one home).

  erfcx(x) = exp(x^2) erfc(x): for 0 <= x < 25 the product, with exp(x^2) split as
           exp(z^2) exp((x - z)(x + z)) (z = x's top bits) so x^2's rounding costs nothing;
           for x >= 25 the asymptotic series (terms below 1e-20 by then); for x < 0
           2 exp(x^2) - erfcx(-x).
  erfcinv  Newton's method on log erfc(x) = log q (the log keeps q down to 1e-308 in range),
           from Winitzki's closed-form estimate (0.2% off), five steps.
  erfinv   Newton on erf(x) = y where |y| <= 1/2, else +-erfcinv(1 - |y|) (exact subtraction).
  ndtri(p) = -sqrt(2) erfcinv(2p), sqrt(2) erfcinv(2(1 - p)) for p > 1/2, and
           sqrt(2) erfinv(2p - 1) for |p - 1/2| <= 1/4 (all three subtractions exact).
  log_ndtr as torch: log(erfcx(-x/sqrt2) / 2) - x^2/2 for x < -1, else log1p(-erfc(x/sqrt2)/2).
"""
import math

import numpy as np

from . import special

_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)
_WINITZKI_A = 0.147


def _exp_square(xp, x):
    """exp(x * x) without the rounding of x * x (x >= 0, float64)."""
    x = xp.minimum(x, 27.0)                      # exp(27^2) already overflows to inf
    z = x.astype(np.float32).astype(np.float64)
    return xp.exp(z * z) * xp.exp((x - z) * (x + z))


def erfcx(xp, x):
    x = xp.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        a = xp.abs(x)
        near = xp.minimum(a, 25.0)
        direct = special.erfc(xp, near) * _exp_square(xp, near)
        far = xp.maximum(a, 25.0)
        inv = 1.0 / (2.0 * far * far)
        series = xp.ones_like(far)
        term = xp.ones_like(far)
        for k in range(1, 12):                  # sum (-1)^k (2k-1)!! / (2 x^2)^k
            term = term * -(2 * k - 1) * inv
            series = series + term
        asym = series / (far * _SQRT_PI)
        pos = xp.where(a < 25.0, direct, asym)
        out = xp.where(x < 0, 2.0 * _exp_square(xp, a) - pos, pos)
        return xp.where(xp.isnan(x), xp.nan, out)


def _winitzki(xp, q):
    """Estimate of erfcinv(q), q in (0, 1]; log(1 - y^2) as log(q (2 - q))."""
    log_term = xp.log(q * (2.0 - q))
    c = 2.0 / (math.pi * _WINITZKI_A) + 0.5 * log_term
    return xp.sqrt(xp.maximum(xp.sqrt(c * c - log_term / _WINITZKI_A) - c, 0.0))


def erfcinv(xp, q):
    """x with erfc(x) = q, q in [0, 2]; +inf at 0, -inf at 2, nan outside."""
    q = xp.asarray(q, dtype=np.float64)
    with np.errstate(all="ignore"):
        upper = q > 1.0
        r = xp.where(upper, 2.0 - q, q)            # exact for q in [1, 2]
        inside = (r > 0) & (r <= 1.0)
        r1 = xp.where(inside, r, 0.5)
        x = _winitzki(xp, r1)
        log_r = xp.log(r1)
        for _ in range(5):
            # h(x) = log erfc(x) - log r, h'(x) = -2 / (sqrt(pi) erfcx(x))
            cx = erfcx(xp, x)
            h = xp.log(cx) - x * x - log_r
            x = x + h * cx * (0.5 * _SQRT_PI)
        x = xp.where(inside, x, xp.where(r == 0, xp.inf, xp.nan))
        return xp.where(upper, -x, x)


def erfinv(xp, y):
    y = xp.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        a = xp.abs(y)
        small = a <= 0.5
        ys = xp.where(small, y, 0.0)
        x = ys * (0.5 * _SQRT_PI) * (1.0 + ys * ys * (math.pi / 12.0))  # series start
        for _ in range(4):
            x = x - (special.erf(xp, x) - ys) * (0.5 * _SQRT_PI) * xp.exp(x * x)
        big = xp.copysign(erfcinv(xp, xp.where(small, 1.0, 1.0 - a)), y)
        out = xp.where(small, x, big)
        return xp.where(a > 1.0, xp.nan, out)


def ndtri(xp, p):
    p = xp.asarray(p, dtype=np.float64)
    with np.errstate(all="ignore"):
        low = p <= 0.5
        q = xp.where(low, 2.0 * p, 2.0 * (1.0 - p))
        x = erfcinv(xp, q) * _SQRT2
        out = xp.where(low, -x, x)
        # near 1/2, 2p - 1 is exact and erf's own Newton keeps the small result's digits
        middle = xp.abs(p - 0.5) <= 0.25
        out = xp.where(middle, _SQRT2 * erfinv(xp, xp.where(middle, 2.0 * p - 1.0, 0.0)), out)
        return xp.where((p < 0) | (p > 1), xp.nan, out)


def ndtr(xp, x):
    x = xp.asarray(x, dtype=np.float64)
    return 0.5 * special.erfc(xp, -x * (1.0 / _SQRT2))


def log_ndtr(xp, x):
    x = xp.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        t = x * (1.0 / _SQRT2)
        # x^2/2 as 0.5 * x * x, the very expression the gradient adds back (y + x^2/2), so the
        # two cancel exactly where x^2/2 is ~1e12 and y is about -x^2/2
        left = xp.log(erfcx(xp, -t) * 0.5) - 0.5 * x * x
        right = xp.log1p(-special.erfc(xp, t) * 0.5)
        return xp.where(x < -1.0, left, right)
