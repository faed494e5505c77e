"""Complex numbers (issue 23): conj, real, imag, view_as_real/view_as_complex, complex,
polar, angle, sgn and |z|.

Gradients follow torch's convention: for a real loss L of z = x + iy, z.grad is
dL/dx + i dL/dy (twice the conjugate Wirtinger derivative dL/dz*). An op that is
holomorphic in its inputs gets it from its real backward (ops/complex_rules.py); the ops
here are not holomorphic (conj, real, imag, |z|, angle, sgn) or change between real and
complex dtypes, so each writes its own backward (in tinytensor ops only: no array fast
path, which tests/tinytensor/test_backward_arrays.py would hold to real samples).

tinytensor conjugates eagerly: torch's conj() sets a lazy "conjugate bit" that
resolve_conj() materialises, here conj() returns the conjugated values at once, so
is_conj() is always False and resolve_conj()/resolve_neg() return their input.
"""
import math

from ..core.forward_ad import linear_jvp
from ..core.function import Function
from ..core.primitives import cast
from ..core.tensor import Tensor
from ..dtypes import float16, float32, float64
from ..messages import OpError
from .elementwise import _xp, add, cos, div, mul, sin, sub, where

__all__ = ["complex", "polar", "view_as_real", "view_as_complex", "real", "imag", "angle", "conj", "conj_physical", "resolve_conj", "resolve_neg", "sgn", "is_conj", "is_neg", "isreal", "abs_complex"]


_PART_DTYPES = (float16, float32, float64)


def _check_tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def _check_complex(x, op, refusal):
    """x a complex Tensor, or a RuntimeError: `op`: `refusal` (naming {dtype} and {shape})."""
    _check_tensor(x, op)
    if not x.is_complex():
        raise RuntimeError(f"{op}: " + refusal.format(dtype=x.dtype.name, shape=tuple(x.shape)))


class _Own(Function):
    """Every op of this module handles complex inputs itself (forward, backward and jvp)."""
    complex_rule = "own"


class _Linear(_Own):
    """A real-linear op (conj, the parts, the views). Forward mode (issue 27) pushes a tangent
    through the map dz -> J dz: the op applied to it."""
    jvp = staticmethod(linear_jvp)


# ---------------------------------------------------------------- conjugation
class ConjPhysical(_Linear):
    @staticmethod
    def forward(ctx, x):
        return _xp(x).conj(x)

    @staticmethod
    def backward(ctx, g):
        return ConjPhysical.apply(g)


def conj_physical(x):
    """The complex conjugate, computed (a copy); a real tensor's copy."""
    _check_tensor(x, "conj_physical")
    return ConjPhysical.apply(x)


def conj(x):
    """The complex conjugate (computed at once, see the module note); a real tensor itself."""
    _check_tensor(x, "conj")
    return ConjPhysical.apply(x) if x.is_complex() else x


def resolve_conj(x):
    """torch materialises a lazy conjugate here; tinytensor's conj() is never lazy."""
    _check_tensor(x, "resolve_conj")
    return x


def resolve_neg(x):
    """torch materialises a lazy negation here; tinytensor never makes one."""
    _check_tensor(x, "resolve_neg")
    return x


def is_conj(x):
    return False


def is_neg(x):
    return False


# ---------------------------------------------------------------- parts
class _Part(_Linear):
    """x.real or x.imag (`part`): a view of the complex array's memory."""
    is_view = True
    part = None

    @classmethod
    def forward(cls, ctx, x):
        return getattr(x, cls.part)


class Real(_Part):
    part = "real"

    @staticmethod
    def backward(ctx, g):   # a real gradient of the real part: the same, as a complex number
        return cast(g, ctx.in_meta[0][1])


class Imag(_Part):
    part = "imag"

    @staticmethod
    def backward(ctx, g):   # d/dy of the imaginary part: torch's gradient is i * g
        return Complex.apply(mul(g, 0.0), g)


def real(x):
    """The real part (a view, as in torch); a real tensor itself."""
    _check_tensor(x, "real")
    return Real.apply(x) if x.is_complex() else x


def imag(x):
    """The imaginary part (a view); torch refuses it for real tensors, and so does tinytensor."""
    _check_complex(x, "imag", "is not implemented for tensors with non-complex dtypes (got "
                   "{dtype}, shape {shape}), as in torch")
    return Imag.apply(x)


class Complex(_Own):

    @staticmethod
    def forward(ctx, re, im):
        xp = _xp(re)
        shape = xp.broadcast_shapes(re.shape, im.shape)
        # parts assigned, not re + 1j * im: 1j * inf would make a nan real part
        out = xp.empty(shape, dtype=xp.result_type(re.dtype, xp.complex64))
        out.real = re
        out.imag = im
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (Real.apply(g) if na else None), (Imag.apply(g) if nb else None)

    @staticmethod
    def jvp(ctx, tre, tim):
        return Complex.apply(tre if tre is not None else mul(tim, 0.0),
                             tim if tim is not None else mul(tre, 0.0))


def _parts(a, b, op, names):
    _check_tensor(a, op)
    _check_tensor(b, op)
    if a.dtype not in _PART_DTYPES or a.dtype is not b.dtype:
        raise TypeError(f"{op}: expected both {names[0]} and {names[1]} to be float16, float32 "
                        f"or float64 tensors of one dtype, got {a.dtype.name} {tuple(a.shape)} "
                        f"and {b.dtype.name} {tuple(b.shape)} (as torch)")
    if a.dtype is float16:
        raise TypeError(f"{op}: float16 parts would make complex32, which NumPy cannot store; "
                        "use float32 or float64")


def complex(real, imag):
    """real + i imag (broadcast), complex64 from float32 parts, complex128 from float64."""
    _parts(real, imag, "complex", ("real", "imag"))
    return Complex.apply(real, imag)


class Polar(_Own):

    @staticmethod
    def forward(ctx, r, theta):
        xp = _xp(r)
        # asarray: NumPy's products of 0-d arrays are scalars
        out = Complex.forward(None, xp.asarray(r * xp.cos(theta)), xp.asarray(r * xp.sin(theta)))
        ctx.save_for_backward(out, theta)
        return out

    @staticmethod
    def jvp(ctx, tr, ttheta):
        """dz = dr e^(i theta) + i z dtheta (e^(i theta) from theta itself: sgn(z) is wrong
        for r <= 0, where torch's forward mode also takes cos and sin of theta)."""
        out, theta = ctx.saved_tensor(0), ctx.saved_tensor(1)
        res = None
        if tr is not None:
            res = Complex.apply(mul(tr, cos(theta)), mul(tr, sin(theta)))
        if ttheta is not None:
            turn = mul(mul(out, 1j), ttheta)
            res = turn if res is None else add(res, turn)
        return res

    @staticmethod
    def backward(ctx, g):
        out = ctx.saved_tensor(0)
        na, nb = ctx.needs_input_grad
        # torch's formulas: d/dr through sgn(z) (so a negative r flips it, and z = 0 gives
        # 0), d/dtheta = i z exactly; each the real part of g times the conjugate
        ga = Real.apply(mul(g, ConjPhysical.apply(sgn(out)))) if na else None
        gb = Real.apply(mul(g, ConjPhysical.apply(mul(out, 1j)))) if nb else None
        return ga, gb


def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)), gradients as torch's (through sgn of the result)."""
    _parts(abs, angle, "polar", ("abs", "angle"))
    return Polar.apply(abs, angle)


# ---------------------------------------------------------------- real <-> (..., 2) views
class ViewAsReal(_Linear):
    is_view = True

    @staticmethod
    def forward(ctx, x):
        xp = _xp(x)
        real = x.real.dtype
        if x.flags.c_contiguous:
            return x.reshape(-1).view(real).reshape(x.shape + (2,))
        return xp.stack((x.real, x.imag), axis=-1)   # a copy: strided complex has no real view here

    @staticmethod
    def backward(ctx, g):
        return ViewAsComplex.apply(g)


def _as_complex(x):
    xp = _xp(x)
    x = xp.ascontiguousarray(x)
    return x.view(xp.result_type(x.dtype, xp.complex64))[..., 0]


class ViewAsComplex(_Linear):
    is_view = True

    @staticmethod
    def forward(ctx, x):
        return _as_complex(x)

    @staticmethod
    def backward(ctx, g):
        return ViewAsReal.apply(g)


def view_as_real(x):
    """A complex tensor's (..., 2) real view: [..., 0] the real, [..., 1] the imaginary parts."""
    _check_complex(x, "view_as_real", "is only supported for complex tensors, got {dtype} {shape}")
    return ViewAsReal.apply(x)


def view_as_complex(x):
    """The complex tensor whose parts are x[..., 0] and x[..., 1] (x float32 or float64)."""
    _check_tensor(x, "view_as_complex")
    if x.dtype not in (float32, float64):
        raise RuntimeError(f"view_as_complex: is only supported for float32 and float64 "
                           f"tensors, got {x.dtype.name} {tuple(x.shape)}")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise OpError(f"view_as_complex: tensor must have a last dimension of size 2, got shape "
                      f"{tuple(x.shape)}")
    return ViewAsComplex.apply(x)


# ---------------------------------------------------------------- modulus, argument, sign
class AbsComplex(_Own):
    name = "abs"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _xp(x).abs(x)

    @staticmethod
    def backward(ctx, g):   # d|z| = Re(conj(sgn z) dz): torch's gradient is g * sgn(z), 0 at 0
        return mul(g, sgn(ctx.saved_tensor(0)))

    @staticmethod
    def jvp(ctx, t):   # Re(conj(sgn z) dz)
        return Real.apply(mul(ConjPhysical.apply(sgn(ctx.saved_tensor(0))), t))


def abs_complex(x):
    return AbsComplex.apply(x)


class Angle(_Own):

    @staticmethod
    def forward(ctx, x):
        xp = _xp(x)
        ctx.save_for_backward(x)
        if x.dtype.kind != "c":   # pi for negative reals, 0 otherwise, nan for nan (as torch)
            return xp.where(x < 0, x.dtype.type(math.pi), xp.where(x != x, x, x.dtype.type(0)))
        return xp.angle(x)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensor(0)
        if not x.is_complex():
            return mul(g, 0.0)
        # theta = atan2(y, x): dL/dx + i dL/dy = g (-y + i x) / |z|^2 = g * i z / |z|^2
        a2 = Real.apply(mul(x, ConjPhysical.apply(x)))
        return mul(g, div(mul(x, 1j), a2))

    @staticmethod
    def jvp(ctx, t):
        x = ctx.saved_tensor(0)
        if not x.is_complex():   # piecewise constant
            return None
        # dtheta = Im(conj(z) dz) / |z|^2
        a2 = Real.apply(mul(x, ConjPhysical.apply(x)))
        return div(Imag.apply(mul(ConjPhysical.apply(x), t)), a2)


def angle(x):
    """The argument of each element, in (-pi, pi]; of a real tensor 0 or pi."""
    _check_tensor(x, "angle")
    if x.dtype.category < 2:
        x = cast(x, float32)
    return Angle.apply(x)


class Sgn(_Own):

    @staticmethod
    def forward(ctx, x):
        xp = _xp(x)
        if x.dtype.kind != "c":   # torch's sgn(nan) is 0, NumPy's sign(nan) nan
            return xp.where(x != x, x.dtype.type(0), xp.sign(x))
        a = xp.abs(x)
        out = xp.where(a == 0, 0, x / xp.where(a == 0, 1, a)).astype(x.dtype)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.in_meta[0][1].is_complex:
            return mul(g, 0.0)
        x, s = ctx.saved_tensors
        # s = z / |z| has ds = (dz - s Re(conj(s) dz)) / |z|; torch's gradient is the adjoint
        a = AbsComplex.apply(x)
        zero = a.__eq__(0.0)
        safe = where(zero, 1.0, a)
        return where(zero, 0.0, div(sub(g, mul(s, Real.apply(mul(g, ConjPhysical.apply(s))))), safe))

    @staticmethod
    def jvp(ctx, t):   # ds = (dz - s Re(conj(s) dz)) / |z|, 0 at 0; a real sign is constant
        if not ctx.in_meta[0][1].is_complex:
            return None
        x, s = ctx.saved_tensors
        a = AbsComplex.apply(x)
        zero = a.__eq__(0.0)
        safe = where(zero, 1.0, a)
        return where(zero, 0.0, div(sub(t, mul(s, Real.apply(mul(ConjPhysical.apply(s), t)))), safe))


def sgn(x):
    """z / |z| (0 at 0) for complex tensors; sign(x) for real ones, as torch."""
    _check_tensor(x, "sgn")
    if x.dtype.category < 2:
        from .elementwise import sign
        return sign(x)
    return Sgn.apply(x)


# ---------------------------------------------------------------- complex-aware products and tests
def isreal(input):
    """True where the imaginary part is 0 (everywhere for a real tensor)."""
    _check_tensor(input, "isreal")
    if not input.is_complex():
        from ..creation import ones
        return ones(*input.shape, dtype="bool", device=input.device)
    return Imag.apply(input).__eq__(0.0)
