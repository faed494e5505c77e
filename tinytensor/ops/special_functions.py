"""torch's special functions as tinytensor ops: the gamma family (lgamma, digamma, polygamma,
mvlgamma, igamma, igammac, zeta), the error-function family (erfc, erfinv, erfcx, ndtr, ndtri,
log_ndtr), Bessel and Airy functions, entr, sinc, xlogy, xlog1py and logit.

Values come from the array modules (_gamma_arrays, _normal_arrays, _bessel_arrays, special.py
for erf/erfc), evaluated in float64 and rounded to the input's dtype; integer and bool inputs
compute in the default float dtype, as in torch. Each gradient is torch's formula
(derivatives.yaml) written in tinytensor ops, so create_graph differentiates it again. Where
torch has no derivative (the Bessel J/Y/K, Airy, igamma's and zeta's first argument) backward
raises, naming the op, as torch does.
"""
import math

import numpy as np

from ..core.function import Function
from ..messages import OpError
from . import _bessel_arrays as B
from . import _gamma_arrays as G
from . import _normal_arrays as N
from . import special as S
from .elementwise import (_xp, binary_operands, exp, float_operand, log, sign, sin, cos, where)
from .forward_mode import add
from .math_functions import _float_operands

__all__ = ["erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma",
           "igammac", "xlogy", "logit", "sinc"]

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _no_derivative(op, what="input"):
    raise RuntimeError(f"{op}: the derivative with respect to {what} is not implemented "
                       f"(torch has none either)")


# ---------------------------------------------------------------- unary
class _Unary(Function):
    """y = f(x), f an array function (xp, float64 array) -> float64 array; `slope(x, y)` is
    dy/dx in tinytensor ops, or None where torch has no derivative."""
    fn = None
    slope = None

    @classmethod
    def forward(cls, ctx, x):
        y = cls.fn(_xp(x), x).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, y)
        return y

    @classmethod
    def backward(cls, ctx, g):
        if cls.slope is None:
            _no_derivative(cls.name)
        x, y = ctx.saved_tensors
        return g * cls.slope(x, y)

    jvp = backward   # forward mode: elementwise, so the tangent is slope * t


def _unary(name, fn, slope=None):
    """A _Unary subclass named for the op (its tape name)."""
    return type(name.title().replace("_", ""), (_Unary,), {
        "name": name, "fn": staticmethod(fn), "slope": None if slope is None else staticmethod(slope)})


def _erfc_array(xp, x):
    return S.erfc(xp, x)


Erfc = _unary("erfc", _erfc_array, lambda x, y: exp(-(x * x)) * (-2.0 / _SQRT_PI))
Erfinv = _unary("erfinv", N.erfinv, lambda x, y: exp(y * y) * (0.5 * _SQRT_PI))
Erfcx = _unary("erfcx", N.erfcx, lambda x, y: 2.0 * x * y - 2.0 / _SQRT_PI)
Ndtr = _unary("ndtr", N.ndtr, lambda x, y: exp(-0.5 * x * x) * (1.0 / _SQRT_2PI))
Ndtri = _unary("ndtri", N.ndtri, lambda x, y: exp(0.5 * y * y) * _SQRT_2PI)
LogNdtr = _unary("log_ndtr", N.log_ndtr, lambda x, y: exp(-(y + 0.5 * x * x)) * (1.0 / _SQRT_2PI))
Lgamma = _unary("lgamma", G.lgamma, lambda x, y: digamma(x))
Digamma = _unary("digamma", G.digamma, lambda x, y: polygamma(1, x))
I0 = _unary("i0", B.i0, lambda x, y: i1(x))
I0e = _unary("i0e", B.i0e, lambda x, y: i1e(x) - sign(x) * y)


def _not_tiny(x):
    """torch's i1/i1e backward: |x| > eps takes the formula, the rest (0 and nan) 1/2."""
    return x.abs() > float(np.finfo(x.data.dtype).eps)


def _i1_slope(x, y):
    # torch: I0(x) - I1(x)/x, and 1/2 (the limit at 0) where |x| <= eps or x is nan
    big = _not_tiny(x)
    safe = where(big, x, 1.0)
    return where(big, i0(safe) - y / safe, 0.5)


def _i1e_slope(x, y):
    big = _not_tiny(x)
    safe = where(big, x, 1.0)
    return where(big, i0e(safe) - y * (sign(safe) + 1.0 / safe), 0.5)


I1 = _unary("i1", B.i1, _i1_slope)
I1e = _unary("i1e", B.i1e, _i1e_slope)


def _entr_array(xp, x):
    with np.errstate(all="ignore"):
        out = -x * xp.log(xp.where(x > 0, x, 1.0))
        out = xp.where(x == 0, 0.0, out)
        return xp.where(x < 0, -xp.inf, xp.where(xp.isnan(x), xp.nan, out))


Entr = _unary("entr", _entr_array, lambda x, y: -(log(x) + 1.0))


def _sinc_array(xp, x):
    with np.errstate(all="ignore"):
        px = math.pi * x
        return xp.where(x == 0, 1.0, xp.sin(px) / px)


def _sinc_slope(x, y):
    px = x * math.pi
    safe = where(x == 0, 1.0, x)
    return where(x == 0, 0.0, (cos(px) * px - sin(px)) / (safe * safe * math.pi))


Sinc = _unary("sinc", _sinc_array, _sinc_slope)

# no derivative in torch: backward raises
BesselJ0 = _unary("bessel_j0", lambda xp, x: B.bessel(xp, x, "j0"))
BesselJ1 = _unary("bessel_j1", lambda xp, x: B.bessel(xp, x, "j1"))
BesselY0 = _unary("bessel_y0", lambda xp, x: B.bessel(xp, x, "y0"))
BesselY1 = _unary("bessel_y1", lambda xp, x: B.bessel(xp, x, "y1"))
ModifiedBesselI0 = _unary("modified_bessel_i0", B.i0)
ModifiedBesselI1 = _unary("modified_bessel_i1", B.i1)
ModifiedBesselK0 = _unary("modified_bessel_k0", lambda xp, x: B.k(xp, x, 0))
ModifiedBesselK1 = _unary("modified_bessel_k1", lambda xp, x: B.k(xp, x, 1))
ScaledModifiedBesselK0 = _unary("scaled_modified_bessel_k0", lambda xp, x: B.k_scaled(xp, x, 0))
ScaledModifiedBesselK1 = _unary("scaled_modified_bessel_k1", lambda xp, x: B.k_scaled(xp, x, 1))
SphericalBesselJ0 = _unary("spherical_bessel_j0", B.spherical_j0)
AiryAi = _unary("airy_ai", B.airy_ai)


def _apply_unary(cls, x, op):
    return cls.apply(float_operand(x, op))


def erfc(x):
    return _apply_unary(Erfc, x, "erfc")


def erfinv(x):
    return _apply_unary(Erfinv, x, "erfinv")


def erfcx(x):
    return _apply_unary(Erfcx, x, "special.erfcx")


def ndtr(x):
    return _apply_unary(Ndtr, x, "special.ndtr")


def ndtri(x):
    return _apply_unary(Ndtri, x, "special.ndtri")


def log_ndtr(x):
    return _apply_unary(LogNdtr, x, "special.log_ndtr")


def lgamma(x):
    return _apply_unary(Lgamma, x, "lgamma")


def digamma(x):
    return _apply_unary(Digamma, x, "digamma")


def i0(x):
    return _apply_unary(I0, x, "i0")


def i0e(x):
    return _apply_unary(I0e, x, "special.i0e")


def i1(x):
    return _apply_unary(I1, x, "special.i1")


def i1e(x):
    return _apply_unary(I1e, x, "special.i1e")


def entr(x):
    return _apply_unary(Entr, x, "special.entr")


def sinc(x):
    return _apply_unary(Sinc, x, "sinc")


# ---------------------------------------------------------------- polygamma, mvlgamma
class Polygamma(Function):
    """psi^(n)(x); its derivative is psi^(n+1)(x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        return G.polygamma(_xp(x), n, x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        return g * Polygamma.apply(ctx.saved_tensor(0), n=ctx.attrs["n"] + 1)

    jvp = backward


def polygamma(n, input):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise OpError(f"polygamma: n must be non-negative, got {n}")
    return Polygamma.apply(float_operand(input, "polygamma"), n=int(n))


class Mvlgamma(Function):
    """log of the multivariate gamma function of dimension p:
    p(p-1)/4 log(pi) + sum_j lgamma(x - j/2). torch 2.13 no longer refuses x <= (p-1)/2
    (lgamma's poles give inf there), so neither does this."""

    @staticmethod
    def forward(ctx, x, p):
        xp = _xp(x)
        ctx.save_for_backward(x)
        total = xp.full(x.shape, p * (p - 1) / 4.0 * math.log(math.pi))
        for j in range(p):
            total = total + G.lgamma(xp, x - 0.5 * j)
        return total.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensor(0)
        slope = digamma(x)
        for j in range(1, ctx.attrs["p"]):
            slope = slope + digamma(x - 0.5 * j)
        return g * slope

    jvp = backward


def mvlgamma(input, p):
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise OpError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    return Mvlgamma.apply(float_operand(input, "mvlgamma"), p=int(p))


# ---------------------------------------------------------------- binary
class Xlogy(Function):
    """x log y, 0 where x == 0 (unless y is nan); `log1p` selects x log(1 + y) (xlog1py)."""

    @staticmethod
    def forward(ctx, x, y, log1p):
        xp = _xp(x)
        ctx.save_for_backward(x, y)
        with np.errstate(all="ignore"):
            out = x * (xp.log1p(y) if log1p else xp.log(y))
        return xp.where((x == 0) & ~xp.isnan(y), xp.zeros((), x.dtype), out).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        edge = -1.0 if ctx.attrs["log1p"] else 0.0
        need_x, need_y = ctx.needs_input_grad
        gx = gy = None
        if need_x:
            gx = Xlogy.apply(*binary_operands(g, y, "xlogy"), log1p=ctx.attrs["log1p"])
            gx = where((x == 0) & (y <= edge), 0.0, gx)
        if need_y:
            gy = g * x / ((y + 1.0) if ctx.attrs["log1p"] else y)
        return gx, gy

    @staticmethod
    def jvp(ctx, tx, ty):   # backward's two terms with the tangents for g, added
        x, y = ctx.saved_tensors
        shifted = ctx.attrs["log1p"]
        out = None
        if tx is not None:
            out = Xlogy.apply(*binary_operands(tx, y, "xlogy"), log1p=shifted)
            out = where((x == 0) & (y <= (-1.0 if shifted else 0.0)), 0.0, out)
        if ty is not None:
            out = add(out, ty * x / ((y + 1.0) if shifted else y))
        return out


def xlogy(input, other):
    return Xlogy.apply(*_float_operands(input, other, "xlogy"), log1p=False)


def xlog1py(input, other):
    return Xlogy.apply(*_float_operands(input, other, "special.xlog1py"), log1p=True)


class _SecondInputOnly:
    """f(a, b) that torch differentiates in b only: `grad(ctx, g, a, b)` is b's gradient for
    an output gradient g, and b's tangent for g = db; a gradient or tangent of a is refused by
    name (`op(ctx)`, `first`). A mixin before Function."""

    @classmethod
    def backward(cls, ctx, g):
        if ctx.needs_input_grad[0]:
            _no_derivative(cls.op(ctx), cls.first)
        return None, cls.grad(ctx, g, *ctx.saved_tensors)

    @classmethod
    def jvp(cls, ctx, ta, tb):
        if ta is not None:
            _no_derivative(cls.op(ctx), cls.first)
        return cls.grad(ctx, tb, *ctx.saved_tensors)


class Zeta(_SecondInputOnly, Function):
    """Hurwitz zeta(x, q) = sum_k (q + k)^-x; d/dq = -x zeta(x + 1, q), none in x (as torch)."""
    first = "input (x)"

    @staticmethod
    def forward(ctx, x, q):
        ctx.save_for_backward(x, q)
        return G.zeta(_xp(x), x, q).astype(x.dtype, copy=False)

    @staticmethod
    def op(ctx):
        return "special.zeta"

    @staticmethod
    def grad(ctx, g, x, q):
        return g * -x * Zeta.apply(x + 1.0, q)


def zeta(input, other):
    return Zeta.apply(*_float_operands(input, other, "special.zeta"))


class Igamma(_SecondInputOnly, Function):
    """Regularized incomplete gamma P(a, x) (upper=False) or Q(a, x) (igammac); torch has a
    derivative in x only: +-x^(a-1) e^-x / Gamma(a)."""
    first = "input (a)"

    @staticmethod
    def forward(ctx, a, x, upper):
        ctx.save_for_backward(a, x)
        return G.igamma(_xp(a), a, x, upper).astype(a.dtype, copy=False)

    @staticmethod
    def op(ctx):
        return "igammac" if ctx.attrs["upper"] else "igamma"

    @staticmethod
    def grad(ctx, g, a, x):
        density = exp((a - 1.0) * log(x) - x - lgamma(a))
        return (-g if ctx.attrs["upper"] else g) * density


def igamma(input, other):
    return Igamma.apply(*_float_operands(input, other, "igamma"), upper=False)


def igammac(input, other):
    return Igamma.apply(*_float_operands(input, other, "igammac"), upper=True)


# ---------------------------------------------------------------- logit
class Logit(Function):
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given."""

    @staticmethod
    def forward(ctx, x, eps):
        xp = _xp(x)
        ctx.save_for_backward(x)
        z = x if eps is None else xp.clip(x, eps, 1.0 - eps)
        with np.errstate(all="ignore"):
            return xp.log(z / (1.0 - z)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensor(0)
        eps = ctx.attrs["eps"]
        core = g / (x * (1.0 - x))
        if eps is None:   # torch: nan outside [0, 1]
            return where((x < 0) | (x > 1), math.nan, core)
        return where((x < eps) | (x > 1.0 - eps), 0.0, core)

    jvp = backward


def logit(input, eps=None):
    return Logit.apply(float_operand(input, "logit"), eps=None if eps is None else float(eps))


# ---------------------------------------------------------------- orthogonal polynomials
# torch evaluates each at an integer degree n = int(n) by its three-term recurrence (0 for
# n < 0), with closed forms at the ends of [-1, 1] and, for large n inside, a trigonometric
# form; the recurrences here run under a mask, one pass per degree up to the largest n.

_MAX_DEGREE = 1 << 14   # one array pass per degree: past this, an element still finite is refused


def _recurrence(xp, x, n, first, second, step, op="special polynomial"):
    """P_n(x) from P_0 = first, P_1 = second, P_k = step(k, x, P_{k-1}, P_{k-2}). As torch,
    an element stops once its value is nan (past an overflow), so a huge n costs only the
    steps until then."""
    out = xp.where(n <= 0, first, second)
    p, q = first, second
    live = n >= 2
    k = 2
    while bool(live.any()):
        r = step(k, x, q, p)
        p, q = xp.where(live, q, p), xp.where(live, r, q)
        out = xp.where(live, r, out)
        live = live & (n > k) & ~xp.isnan(r)
        k += 1
        if k > _MAX_DEGREE and bool(live.any()):
            raise OpError(f"{op}: degree n = {int(n[live].max())} with finite values needs that "
                          f"many recurrence passes; tinytensor evaluates degrees up to {_MAX_DEGREE}")
    return xp.where(n < 0, 0.0, out)


def _odd(n):
    return (n % 2) == 1


def _chebyshev(kind, shifted):
    """T, U, V, W (kind 't', 'u', 'v', 'w'), on x or on the shifted 2x - 1."""
    def fn(xp, x, n):
        x = 2.0 * x - 1.0 if shifted else x
        ones = xp.ones_like(x)
        second = {"t": x, "u": 2.0 * x, "v": 2.0 * x - 1.0, "w": 2.0 * x + 1.0}[kind]
        inside = xp.abs(x) < 1.0
        big = n > 6
        with np.errstate(all="ignore"):
            # elements with a closed form (trigonometric, or x = +-1) skip the recurrence
            skip = (big & inside) | (xp.abs(x) == 1.0)
            out = _recurrence(xp, x, xp.where(skip, 0, n), ones, second,
                              lambda k, x, q, p: 2.0 * x * q - p)
            theta = xp.arccos(xp.clip(x, -1.0, 1.0))
            nf = n.astype(np.float64)
            trig = {"t": lambda: xp.cos(nf * theta),
                    "u": lambda: xp.sin((nf + 1.0) * theta) / xp.sin(theta),
                    "v": lambda: xp.cos((nf + 0.5) * theta) / xp.cos(0.5 * theta),
                    "w": lambda: xp.sin((nf + 0.5) * theta) / xp.sin(0.5 * theta)}[kind]()
        out = xp.where(big & inside & (n >= 0), trig, out)
        # the ends x = +-1, where the trigonometric forms are 0/0
        at_one = {"t": 1.0, "u": nf + 1.0, "v": 1.0, "w": 2.0 * nf + 1.0}[kind]
        sgn = xp.where(_odd(n), -1.0, 1.0)
        at_minus_one = {"t": sgn, "u": sgn * (nf + 1.0), "v": sgn * (2.0 * nf + 1.0),
                        "w": sgn}[kind]
        out = xp.where((x == 1.0) & (n >= 0), at_one, out)
        return xp.where((x == -1.0) & (n >= 0), at_minus_one, out)
    return fn


def _hermite_h(xp, x, n):
    return _recurrence(xp, x, n, xp.ones_like(x), 2.0 * x,
                       lambda k, x, q, p: 2.0 * x * q - 2.0 * (k - 1) * p)


def _hermite_he(xp, x, n):
    return _recurrence(xp, x, n, xp.ones_like(x), x, lambda k, x, q, p: x * q - (k - 1) * p)


def _laguerre(xp, x, n):
    out = _recurrence(xp, x, xp.where(x == 0, 0, n), xp.ones_like(x), 1.0 - x,
                      lambda k, x, q, p: ((2 * k - 1 - x) * q - (k - 1) * p) / k,
                      "special.laguerre_polynomial_l")
    return xp.where((x == 0) & (n >= 0), 1.0, out)


def _legendre(xp, x, n):
    out = _recurrence(xp, x, xp.where(xp.abs(x) == 1.0, 0, n), xp.ones_like(x), x,
                      lambda k, x, q, p: ((2 * k - 1) * x * q - (k - 1) * p) / k)
    sgn = xp.where(_odd(n), -1.0, 1.0)
    out = xp.where((x == 1.0) & (n >= 0), 1.0, out)
    return xp.where((x == -1.0) & (n >= 0), sgn, out)


class _Polynomial(Function):
    fn = None

    @classmethod
    def forward(cls, ctx, x, n):
        xp = _xp(x)
        x64, n_int = xp.broadcast_arrays(x.astype(np.float64), xp.trunc(n).astype(np.int64))
        with np.errstate(all="ignore"):
            out = xp.where(n_int < 0, 0.0, cls.fn(xp, x64, n_int))   # torch: 0 for n < 0
        return out.astype(x.dtype, copy=False)

    @classmethod
    def backward(cls, ctx, g):
        _no_derivative(cls.name)

    @classmethod
    def jvp(cls, ctx, *tangents):
        _no_derivative(cls.name)


def _polynomial(name, fn):
    cls = type(name.title().replace("_", ""), (_Polynomial,), {"name": name, "fn": staticmethod(fn)})

    def op(input, n):
        return cls.apply(*_float_operands(input, n, f"special.{name}"))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch.special.{name}(input, n): the polynomial of integer degree int(n) at input."
    return op


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", _chebyshev("t", False))
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", _chebyshev("u", False))
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", _chebyshev("v", False))
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", _chebyshev("w", False))
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", _chebyshev("t", True))
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", _chebyshev("u", True))
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", _chebyshev("v", True))
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", _chebyshev("w", True))
hermite_polynomial_h = _polynomial("hermite_polynomial_h", _hermite_h)
hermite_polynomial_he = _polynomial("hermite_polynomial_he", _hermite_he)
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", _laguerre)
legendre_polynomial_p = _polynomial("legendre_polynomial_p", _legendre)


def _unary_op(cls, op_name):
    def op(input):
        return cls.apply(float_operand(input, op_name))
    op.__name__ = op.__qualname__ = op_name.rsplit(".", 1)[-1]
    return op


# the public function of each class, named as torch.special names it
(bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_i0, modified_bessel_i1,
 modified_bessel_k0, modified_bessel_k1, scaled_modified_bessel_k0, scaled_modified_bessel_k1,
 spherical_bessel_j0, airy_ai) = (
    _unary_op(c, "special." + c.name)
    for c in (BesselJ0, BesselJ1, BesselY0, BesselY1, ModifiedBesselI0, ModifiedBesselI1,
              ModifiedBesselK0, ModifiedBesselK1, ScaledModifiedBesselK0, ScaledModifiedBesselK1,
              SphericalBesselJ0, AiryAi))
