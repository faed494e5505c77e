"""Special functions NumPy lacks (erf), written with NumPy so every backend can run them.

erf(x) for |x| < 2 sums its Maclaurin series; for |x| >= 2 it evaluates erfc(x) with
the Laplace continued fraction, which converges fast there. Both are done in float64
with enough terms for ~1e-15 absolute accuracy (float32 inputs take fewer terms).
CuPy ships erf itself, so on CUDA we call it.
"""
import math

import numpy as np

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(xp, a):
    if xp is not np:
        # cupyx comes with CuPy, which is optional: only CUDA arrays get here
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(a)
    out_dtype = a.dtype
    precise = out_dtype == np.float64
    x = a.astype(np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax < 2.0
    xs = x[small]
    out[small] = _erf_series(xs, 42 if precise else 26)
    big = ~small
    xb = ax[big]
    out[big] = np.copysign(1.0 - _erfc_cf(xb, 60 if precise else 30), x[big])
    return out.astype(out_dtype, copy=False)


def _erf_series(x, terms):
    # erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, terms):
        term *= -x2 / n
        total += term / (2 * n + 1)
    return total * _TWO_OVER_SQRT_PI


def _erfc_cf(x, depth):
    # erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), x >= 2
    t = x.copy()
    for k in range(depth, 0, -1):
        t = x + (k / 2.0) / t
    with np.errstate(under="ignore"):
        return np.exp(-x * x) / (math.sqrt(math.pi) * t)
