"""Gamma-family functions on whole arrays (NumPy or CuPy, `xp`), in float64: lgamma,
digamma, Hurwitz zeta (so polygamma), and the regularized incomplete gamma P and Q.

No element is visited by a Python loop: each method is a fixed sequence of array passes
(a recurrence run a bounded number of steps under a mask, a series summed until every
element has converged). Accuracy is ~1e-15 relative away from zeros of the function.
  lgamma   x >= 0.5: shift to z >= 15 (log of the product of the shifts), then Stirling's
           series with 8 Bernoulli terms; x < 0.5: reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
  digamma  shift to z >= 15, asymptotic series; x < 0: reflection psi(1 - x) - pi / tan(pi x)
  zeta     Euler-Maclaurin: sum (q + k)^-s up to q + k >= 10, the integral of the tail and
           12 Bernoulli corrections (as Cephes, the library torch's own zeta follows)
  igamma   P by its power series where x < a + 1, Q by its continued fraction (modified
           Lentz) elsewhere; the prefactor x^a e^-x / Gamma(a) is taken in logs
"""
import math
from fractions import Fraction

import numpy as np

# B_2, B_4, ..., B_24
_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
              Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510),
              Fraction(43867, 798), Fraction(-174611, 330), Fraction(854513, 138),
              Fraction(-236364091, 2730)]
# Stirling: lgamma(z) ~ (z - 1/2) log z - z + log(2 pi)/2 + sum B_2k / (2k (2k-1) z^(2k-1))
_STIRLING = [float(b / (2 * k * (2 * k - 1))) for k, b in enumerate(_BERNOULLI[:8], 1)]
# digamma(z) ~ log z - 1/(2z) - sum B_2k / (2k z^2k)
_DIGAMMA = [float(b / (2 * k)) for k, b in enumerate(_BERNOULLI[:8], 1)]
# zeta's Euler-Maclaurin corrections divide by (2k)! / B_2k
_ZETA_A = [float(Fraction(math.factorial(2 * k)) / b) for k, b in enumerate(_BERNOULLI, 1)]
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SHIFT_TO = 15.0
_ZETA_MAX_STEPS = 1e8   # ~1 s per element that far down
_EPS = np.finfo(np.float64).eps


def _errstate():
    return np.errstate(all="ignore")


def _abs_sin_pi(xp, x):
    """|sin(pi x)| with the argument reduced first (exact), so exactly 0 at integers."""
    return xp.abs(xp.sin(math.pi * (x - xp.round(x))))


def _lgamma_near_one(xp, e):
    """lgamma(1 + e) for |e| <= 1/2: -gamma e + sum_k (-1)^k zeta(k) e^k / k, exactly 0 at
    e = 0 (Stirling after shifting would leave ~1e-15 there, where lgamma crosses zero)."""
    r = xp.zeros_like(e)
    for c in reversed(_NEAR_ONE):
        r = r * e + c
    return r * e


def lgamma(xp, x):
    x = xp.asarray(x, dtype=np.float64)
    out = _lgamma_stirling(xp, x)
    with _errstate():
        # [0.5, 1.5): the series at 1; [1.5, 2.5): lgamma(x) = log(x - 1) + lgamma(x - 1)
        near1 = (x >= 0.5) & (x < 1.5)
        near2 = (x >= 1.5) & (x < 2.5)
        e = xp.where(near1, x - 1.0, xp.where(near2, x - 2.0, 0.0))
        series = _lgamma_near_one(xp, e)
        out = xp.where(near1, series, out)
        return xp.where(near2, series + xp.log1p(e), out) + 0.0   # +0.0: lgamma(1) = +0


def _lgamma_stirling(xp, x):
    with _errstate():
        reflect = x < 0.5
        z = xp.where(reflect, 1.0 - x, x)
        z = xp.where(xp.isfinite(z), z, xp.abs(z))  # +-inf -> inf (lgamma(-inf) = inf, as torch)
        log_shift = xp.zeros_like(z)
        prod = xp.ones_like(z)
        for _ in range(int(_SHIFT_TO)):
            small = z < _SHIFT_TO
            prod = xp.where(small, prod * z, prod)
            z = xp.where(small, z + 1.0, z)
        log_shift = xp.log(prod)
        inv = 1.0 / z
        inv2 = inv * inv
        series = xp.zeros_like(z)
        for c in reversed(_STIRLING):
            series = series * inv2 + c
        series *= inv
        out = (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + series - log_shift
        out = xp.where(xp.isinf(z), xp.inf, out)
        reflected = math.log(math.pi) - xp.log(_abs_sin_pi(xp, x)) - out
        return xp.where(reflect & xp.isfinite(x), reflected, out)


def digamma(xp, x):
    x = xp.asarray(x, dtype=np.float64)
    with _errstate():
        reflect = x < 0.5
        z = xp.where(reflect, 1.0 - x, x)
        acc = xp.zeros_like(z)
        for _ in range(int(_SHIFT_TO)):
            small = z < _SHIFT_TO
            acc = xp.where(small, acc - 1.0 / z, acc)
            z = xp.where(small, z + 1.0, z)
        inv2 = 1.0 / (z * z)
        series = xp.zeros_like(z)
        for c in reversed(_DIGAMMA):
            series = series * inv2 + c
        series *= inv2
        out = xp.log(z) - 0.5 / z - series + acc
        # psi(x) = psi(1 - x) - pi / tan(pi x); tan through the reduced sin and cos
        r = x - xp.round(x)                     # tan has period 1
        reflected = out - math.pi * xp.cos(math.pi * r) / xp.sin(math.pi * r)
        out = xp.where(reflect, reflected, out)
        # torch: psi(+-0) = -+inf, nan at the negative integers and at -inf
        out = xp.where(x == 0, xp.copysign(xp.inf, -x), out)
        out = xp.where((x < 0) & (x == xp.floor(x)), xp.nan, out)
        return xp.where(x == xp.inf, xp.inf, out)


def zeta(xp, s, q):
    """Hurwitz zeta sum_k (q + k)^-s, torch.special.zeta(s, q) (Cephes' conventions)."""
    s, q = xp.broadcast_arrays(xp.asarray(s, dtype=np.float64), xp.asarray(q, dtype=np.float64))
    with _errstate():
        # the direct sum: Cephes adds (q + k)^-s for k = 0..m, m = max(9, ceil(9 - q)), so that
        # the last q + m >= 9; a negative q needs |q| terms (q below -_ZETA_MAX_STEPS: nan)
        too_low = (q < -_ZETA_MAX_STEPS) & (q != xp.floor(q))
        pole = (q <= 0) & (q == xp.floor(q))        # inf below, whatever the sum
        qs = xp.where(too_low | pole | ~xp.isfinite(q), 1.0, q)
        m = xp.where(qs < 9.0, xp.maximum(9.0, xp.ceil(9.0 - qs)), 9.0)
        total = _direct_sum(xp, s.reshape(-1), qs.reshape(-1), m.reshape(-1)).reshape(s.shape)
        a = qs + m
        b = a ** -s
        total = xp.where(xp.isfinite(q), total, q ** -s)
        w = a
        total = total + b * w / (s - 1.0) - 0.5 * b
        poch = xp.ones_like(s)
        k = 0.0
        done = xp.zeros(s.shape, dtype=bool)
        for A in _ZETA_A:
            poch = poch * (s + k)
            b = b / w
            t = poch * b / A
            t = xp.where(done, 0.0, t)
            total = total + t
            done = done | (xp.abs(t / total) < _EPS)
            k += 1.0
            poch = poch * (s + k)
            b = b / w
            k += 1.0
        out = total
        out = xp.where(s == 1.0, xp.inf, out)
        out = xp.where(s < 1.0, xp.nan, out)
        q_pole = (q <= 0) & (q == xp.floor(q))
        out = xp.where((q <= 0) & ~q_pole & (s != xp.floor(s)), xp.nan, out)
        out = xp.where(q_pole & ~(s <= 1.0), xp.inf, out)      # Cephes: a nan s too
        # q = inf: nan, as torch (Cephes)
        return xp.where((xp.isnan(s) & ~q_pole) | xp.isnan(q) | (q == xp.inf) | (too_low & ~q_pole),
                        xp.nan, out)


def _direct_sum(xp, s, q, m):
    """sum_{k=0..m} (q + k)^-s per element (1-d arrays), as 2-d blocks of rows rather than a
    Python step per k: a q of -13437.7 costs one block, not 13447 passes."""
    out = xp.empty_like(q)
    if q.size == 0:
        return out
    order = xp.argsort(m)                      # rows of similar length share a block
    m_sorted = m[order]
    lo = 0
    while lo < q.size:
        width = int(m_sorted[min(lo + 4095, q.size - 1)]) + 1
        hi = min(q.size, lo + max(1, (1 << 20) // width))
        width = int(m_sorted[hi - 1]) + 1
        rows = order[lo:hi]
        acc = xp.zeros(rows.shape, dtype=np.float64)
        for k0 in range(0, width, 1 << 20):     # a very long row: in pieces of 2^20 terms
            k = xp.arange(k0, min(width, k0 + (1 << 20)), dtype=np.float64)
            terms = (q[rows][:, None] + k) ** -s[rows][:, None]
            acc = acc + xp.where(k <= m[rows][:, None], terms, 0.0).sum(axis=1)
        out[rows] = acc
        lo = hi
    return out


def trigamma(xp, x):
    """psi'(x); below 1/2 by reflection, psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x), as torch
    (so a large negative x costs no long sum)."""
    x = xp.asarray(x, dtype=np.float64)
    with _errstate():
        reflect = x < 0.5
        direct = zeta(xp, 2.0, xp.where(reflect, 1.0 - x, x))
        s = xp.sin(math.pi * x)   # torch's unreduced sin(pi x): its values near the poles
        out = xp.where(reflect, (math.pi * math.pi) / (s * s) - direct, direct)
        return xp.where(x == xp.inf, 0.0, out)         # torch's trigamma(inf); zeta gives nan


def polygamma(xp, n, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; digamma for n = 0."""
    if n == 0:
        return digamma(xp, x)
    if n == 1:
        return trigamma(xp, x)
    x = xp.asarray(x, dtype=np.float64)
    with _errstate():
        sign = 1.0 if n % 2 else -1.0
        # x < 0 (not a pole): psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x), so no
        # sum of |x| terms (torch's Cephes runs it: the same value, 5e6 terms at x = -5e6)
        neg = (x < 0) & (x != xp.floor(x)) & xp.isfinite(x)
        at = xp.where(neg, 1.0 - x, x)
        direct = sign * math.exp(math.lgamma(n + 1.0)) * zeta(xp, float(n + 1), at)
        if not bool(neg.any()):
            return direct
        r = x - xp.round(x)                           # exact; cot has period 1
        c = xp.cos(math.pi * r) / xp.sin(math.pi * r)
        cot_derivative = np.polynomial.polynomial.polyval(c, _cot_derivative(n))
        return xp.where(neg, (-1.0) ** n * direct - math.pi * cot_derivative, direct)


def _cot_derivative(n):
    """Coefficients (in c = cot(pi x), lowest first) of d^n/dx^n cot(pi x):
    P_0 = c, P_k+1 = -pi (1 + c^2) P_k'(c)."""
    P = np.array([0.0, 1.0])
    for _ in range(n):
        P = -math.pi * np.polynomial.polynomial.polymul(np.polynomial.polynomial.polyder(P), [1.0, 0.0, 1.0])
    return P


_IGAMMA_STEPS = 4000  # enough for a up to ~1e6 near x = a (the series needs ~sqrt(a) log terms)


def _log_prefactor(xp, a, x):
    return a * xp.log(x) - x - lgamma(xp, a)


def _p_series(xp, a, x):
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)...(a+n))."""
    term = xp.ones_like(x)
    total = xp.ones_like(x)
    ap = a.copy()
    for i in range(_IGAMMA_STEPS):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if i % 16 == 15 and not bool(xp.any(xp.abs(term) > _EPS * xp.abs(total))):
            break
    return xp.exp(_log_prefactor(xp, a, x) - xp.log(a)) * total


def _q_fraction(xp, a, x):
    """Q(a, x) = x^a e^-x / Gamma(a) / (x + 1 - a - 1(1-a)/(x + 3 - a - ...)), modified Lentz."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = xp.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    h = d
    for i in range(1, _IGAMMA_STEPS):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = xp.where(xp.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = xp.where(xp.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if i % 16 == 15 and not bool(xp.any(xp.abs(delta - 1.0) > _EPS)):
            break
    return xp.exp(_log_prefactor(xp, a, x)) * h


def igamma(xp, a, x, upper):
    """Regularized lower (upper=False) or upper incomplete gamma, torch's edge values."""
    a, x = xp.broadcast_arrays(xp.asarray(a, dtype=np.float64), xp.asarray(x, dtype=np.float64))
    with _errstate():
        ok = (a > 0) & (x > 0) & xp.isfinite(a) & xp.isfinite(x)
        a1 = xp.where(ok, a, 1.0)
        x1 = xp.where(ok, x, 1.0)
        use_series = x1 < a1 + 1.0
        p = xp.zeros_like(a1)
        q = xp.zeros_like(a1)
        if bool(use_series.any()):
            p_s = _p_series(xp, xp.where(use_series, a1, 1.0), xp.where(use_series, x1, 0.5))
            p = xp.where(use_series, p_s, p)
        if bool((~use_series).any()):
            q_f = _q_fraction(xp, xp.where(use_series, 1.0, a1), xp.where(use_series, 3.0, x1))
            q = xp.where(use_series, q, q_f)
        out = xp.where(use_series, 1.0 - p if upper else p, q if upper else 1.0 - q)
        lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)
        # the edges, in torch's order: P(a, 0) = 0, P(0, x > 0) = 1, P(inf, x) = 0, P(a, inf) = 1
        out = xp.where(x == 0, lo, out)
        out = xp.where(xp.isinf(x), hi, out)
        out = xp.where(xp.isinf(a), lo, out)
        out = xp.where(xp.isinf(a) & xp.isinf(x), xp.nan, out)
        out = xp.where((a == 0) & (x > 0), hi, out)
        out = xp.where((a == 0) & (x <= 0), xp.nan, out)
        bad = (a < 0) | (x < 0) | xp.isnan(a) | xp.isnan(x)
        return xp.where(bad, xp.nan, out)


# lgamma(1 + e) = sum_k c_k e^k: c_1 = -Euler's gamma, c_k = (-1)^k zeta(k) / k; 60 terms
# reach 2^-60 at |e| = 1/2. zeta(k) from the zeta above, once, at import.
_NEAR_ONE = [-0.5772156649015329] + [
    float((-1) ** k * z / k) for k, z in zip(range(2, 61), zeta(np, np.arange(2.0, 61.0), 1.0))]
