"""Special functions NumPy lacks (erf, erfc), written with NumPy so every backend can run them.

For a = |x| the line is cut into pieces, each a polynomial (coefficients in _erf_coeffs.py,
made by `python -m tinytensor.tools.erf_coeffs`):
  a < 0.5       erf(x) = x * P(x*x)             (erfc = 1 - erf: no cancellation there; float32: a < 1)
  0.5 <= a < 4  erfc(a) = exp(-a*a) * erfcx(a), erfcx a polynomial on [0.5, 1), [1, 2), [2, 4)
  a >= 4        erfc(a) = exp(-a*a) * Q(1 / (a*a)) / a     (0 once exp underflows, a > 27.3)
and erf(x) = sign(x) (1 - erfc(a)), erfc(-a) = 2 - erfc(a). Everything is computed in float64;
float64 inputs get polynomials accurate to ~2 ulp and an exp(-a*a) split so that the rounding of
a*a does not cost exp's relative accuracy a*a ulp; the other dtypes get cheaper polynomials
(1e-10 relative), which rounded to float32 are within 1 ulp of the exact value.

Speed: each piece runs only on its own elements (gathered once), and long arrays go through in
chunks that stay in cache, so the ~15 NumPy passes of a piece do not each sweep main memory.
CuPy ships erf itself, so on CUDA we call it.
"""
import numpy as np

from ._erf_coeffs import PIECES

# a's piece: 0 small (and nan), 1..3 erfcx, 4 tail; float32's small piece reaches 1 (no cx1)
_EDGES = {True: (0.5, 1.0, 2.0, 4.0), False: (1.0, 1.0, 2.0, 4.0)}
_CHUNK = 1 << 16  # elements per pass: 512 KiB of float64; measured best of 2^12..2^22 on EPYC
_INV_SQRT_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


def erf(xp, a):
    if xp is not np:
        # cupyx comes with CuPy, which is optional: only CUDA arrays get here
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(a)
    return _evaluate(a, complement=False)


def erfc(xp, a):
    if xp is not np:
        from cupyx.scipy.special import erfc as cupy_erfc
        return cupy_erfc(a)
    return _evaluate(a, complement=True)


def gelu_exact(a):
    """x * (1 + erf(x / sqrt 2)) / 2 on a NumPy array, in one chunked sweep (float64 inside)."""
    def body(x, out, coeffs, precise):
        _chunk(x * _INV_SQRT_2, out, coeffs, precise, False)
        out += 1.0
        out *= 0.5   # halved before the product (exact either way): x * 2 overflows past 9e307
        out *= x
    return _chunked(a, body)


def gelu_exact_slope(a):
    """d gelu / dx = (1 + erf(x / sqrt 2)) / 2 + x exp(-x*x / 2) / sqrt(2 pi), one chunked sweep."""
    def body(x, out, coeffs, precise):
        _chunk(x * _INV_SQRT_2, out, coeffs, precise, False)
        out += 1.0
        out *= 0.5
        pdf = x * x
        pdf *= -0.5
        np.exp(pdf, out=pdf)
        pdf *= x
        pdf *= _INV_SQRT_2PI
        out += pdf
    return _chunked(a, body)


def _evaluate(a, complement):
    return _chunked(a, lambda x, out, coeffs, precise: _chunk(x, out, coeffs, precise, complement))


def _chunked(a, body):
    """body(x, out, coeffs, precise) on float64 chunks of a, the result in a's dtype."""
    a = np.asarray(a)
    precise = a.dtype == np.float64
    coeffs = PIECES["float64" if precise else "float32"]
    x = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    out = np.empty_like(x)
    with np.errstate(under="ignore", over="ignore", invalid="ignore", divide="ignore"):
        for lo in range(0, x.size, _CHUNK):
            body(x[lo:lo + _CHUNK], out[lo:lo + _CHUNK], coeffs, precise)
    return out.reshape(a.shape).astype(a.dtype, copy=False)


def _horner(coeffs, t):
    """sum coeffs[i] t^i, in place on one new array."""
    r = t * coeffs[-1]
    r += coeffs[-2]
    for c in coeffs[-3::-1]:
        r *= t
        r += c
    return r


def _poly(piece, v):
    mid, half, coeffs = piece
    t = v - mid
    t *= 1.0 / half
    return _horner(coeffs, t)


def _chunk(x, out, coeffs, precise, complement):
    ax = np.abs(x)
    # a few compares, ~20x cheaper than np.digitize's binary search; nan compares false: piece 0
    edges = _EDGES[precise]
    piece = (ax >= edges[0]).view(np.int8)
    for edge in edges[1:]:
        piece += ax >= edge
    first, last = int(piece.min()), int(piece.max())
    for k in range(first, last + 1):
        if first == last:
            idx, xs, v = slice(None), x, ax
        else:
            idx = np.flatnonzero(piece == k)
            if idx.size == 0:
                continue
            xs, v = x[idx], ax[idx]
        if k == 0:
            r = _poly(coeffs["small"], xs * xs)
            r *= xs  # erf, odd and exact in sign (erf(-0) = -0)
            if complement:
                np.subtract(1.0, r, out=r)
        else:
            sq = v * v
            if k < 4:
                r = _poly(coeffs[f"cx{k}"], v)
            else:
                # erfc(27.3) underflows to 0 already; the clamp keeps inf out of a - z (nan stays)
                v = np.minimum(v, 30.0)
                sq = v * v
                r = _poly(coeffs["tail"], 1.0 / sq)
                r /= v
            if precise:
                # a*a = z*z + (a - z)(a + z) with z = a's top 24 bits: z*z is exact, so
                # exp(-z*z) exp(-(a - z)(a + z)) keeps exp's accuracy however large a*a is
                z = v.astype(np.float32).astype(np.float64)
                d = (v - z) * (v + z)
                np.multiply(z, z, out=sq)
                np.negative(sq, out=sq)
                r *= np.exp(sq, out=sq)
                np.negative(d, out=d)
                r *= np.exp(d, out=d)
            else:
                np.negative(sq, out=sq)
                r *= np.exp(sq, out=sq)
            # r = erfc(|x|)
            if complement:
                r = np.where(xs < 0, 2.0 - r, r)
            else:
                np.subtract(1.0, r, out=r)
                np.copysign(r, xs, out=r)
        out[idx] = r
