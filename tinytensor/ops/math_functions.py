"""The rest of torch's elementwise math: inverse and hyperbolic trigonometry, log2/log10,
exp2/expm1, and the binary atan2, copysign, fmod, hypot, logaddexp and lerp.

Each slope (derivative formula) is written once and evaluated twice: by `backward` on
Tensors through tinytensor ops (so create_graph differentiates it again) and by
`backward_arrays` on raw arrays through numpy/cupy, which share the operators and the
function names used here (`m.sqrt`, `m.where`, ...). Gradient formulas follow PyTorch's
derivatives.yaml, so values at domain edges (acosh(1), atanh(+-1), atan2(0, 0)) agree.
"""
import math
from types import SimpleNamespace

import numpy as np

from ..core.function import Function
from ..core.rules import Rule
from ..core.tensor import Tensor
from ..core.forward_ad import elementwise_jvp
from ..dtypes import get_default_dtype
from .elementwise import (_xp, as_tensor_like, binary_operands, cast, exp, float_operand, sqrt,
                          trunc, where)

_LN2, _LN10 = math.log(2.0), math.log(10.0)

__all__ = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2",
           "log10", "exp2", "expm1", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
           "arctanh", "atan2", "arctan2", "hypot", "logaddexp", "copysign", "fmod", "lerp"]


# ---------------------------------------------------------------- unary
class _Unary:
    """y = f(x) elementwise, f being numpy's/cupy's `np_name`. `slope(v, m)` is dy/dx in terms
    of v: the input x, or the output y where `from_output` (tan, exp2, expm1 save only y)."""
    compile_rule = Rule(transcendental=True)
    np_name = None
    from_output = False
    jvp = staticmethod(elementwise_jvp)

    @classmethod
    def forward(cls, ctx, x):
        with np.errstate(divide="ignore", invalid="ignore"):  # domain edges give inf/nan, as torch
            y = getattr(_xp(x), cls.np_name)(x)
        ctx.save_for_backward(y if cls.from_output else x)
        return y

    @classmethod
    def backward(cls, ctx, g):
        return g * cls.slope(ctx.saved_tensor(0), _TENSOR_MATH)

    @classmethod
    def backward_arrays(cls, ctx, g):
        v = ctx.saved_array(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return g * cls.slope(v, _xp(v))


class Tan(_Unary, Function):
    np_name, from_output = "tan", True

    @staticmethod
    def slope(y, m):
        return 1.0 + y * y


class Asin(_Unary, Function):
    np_name = "arcsin"

    @staticmethod
    def slope(x, m):
        return 1.0 / m.sqrt(1.0 - x * x)


class Acos(_Unary, Function):
    np_name = "arccos"

    @staticmethod
    def slope(x, m):
        return -1.0 / m.sqrt(1.0 - x * x)


class Atan(_Unary, Function):
    np_name = "arctan"

    @staticmethod
    def slope(x, m):
        return 1.0 / (x * x + 1.0)


class Sinh(_Unary, Function):
    np_name = "sinh"

    @staticmethod
    def slope(x, m):
        return m.cosh(x)


class Cosh(_Unary, Function):
    np_name = "cosh"

    @staticmethod
    def slope(x, m):
        return m.sinh(x)


class Asinh(_Unary, Function):
    np_name = "arcsinh"

    @staticmethod
    def slope(x, m):
        return 1.0 / m.sqrt(x * x + 1.0)


class Acosh(_Unary, Function):
    np_name = "arccosh"

    @staticmethod
    def slope(x, m):
        return 1.0 / m.sqrt(x * x - 1.0)  # inf at x = 1, nan below, as torch


class Atanh(_Unary, Function):
    np_name = "arctanh"

    @staticmethod
    def slope(x, m):
        return 1.0 / (1.0 - x * x)


class Log2(_Unary, Function):
    np_name = "log2"

    @staticmethod
    def slope(x, m):
        return 1.0 / (x * _LN2)


class Log10(_Unary, Function):
    np_name = "log10"

    @staticmethod
    def slope(x, m):
        return 1.0 / (x * _LN10)


class Exp2(_Unary, Function):
    np_name, from_output = "exp2", True

    @staticmethod
    def slope(y, m):
        return y * _LN2


class Expm1(_Unary, Function):
    np_name, from_output = "expm1", True

    @staticmethod
    def slope(y, m):
        return y + 1.0


def tan(x):
    return Tan.apply(float_operand(x, "tan"))


def asin(x):
    return Asin.apply(float_operand(x, "asin"))


def acos(x):
    return Acos.apply(float_operand(x, "acos"))


def atan(x):
    return Atan.apply(float_operand(x, "atan"))


def sinh(x):
    return Sinh.apply(float_operand(x, "sinh"))


def cosh(x):
    return Cosh.apply(float_operand(x, "cosh"))


def asinh(x):
    return Asinh.apply(float_operand(x, "asinh"))


def acosh(x):
    return Acosh.apply(float_operand(x, "acosh"))


def atanh(x):
    return Atanh.apply(float_operand(x, "atanh"))


def log2(x):
    return Log2.apply(float_operand(x, "log2"))


def log10(x):
    return Log10.apply(float_operand(x, "log10"))


def exp2(x):
    return Exp2.apply(float_operand(x, "exp2"))


def expm1(x):
    return Expm1.apply(float_operand(x, "expm1"))


arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


# ---------------------------------------------------------------- binary
def _float_operands(a, b, op):
    """One common dtype, floating: integer/bool operands compute in the default float dtype."""
    a, b = binary_operands(a, b, op)
    if a.data.dtype.kind != "f":
        dt = get_default_dtype()
        a, b = cast(a, dt), cast(b, dt)
    return a, b


class _Binary:
    """out = f(a, b) elementwise; `grads(g, a, b, out, m)` gives both input gradients, written
    once for Tensors and arrays. Needs saved (a, b, out)."""
    compile_rule = Rule(transcendental=True)
    np_name = None
    jvp = staticmethod(elementwise_jvp)

    @classmethod
    def forward(cls, ctx, a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = getattr(_xp(a), cls.np_name)(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @classmethod
    def backward(cls, ctx, g):
        return cls._select(ctx, cls.grads(g, *ctx.saved_tensors, _TENSOR_MATH))

    @classmethod
    def backward_arrays(cls, ctx, g):
        a, b, out = ctx.saved_arrays
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ga, gb = cls.grads(g, a, b, out, _xp(a))
        return cls._select(ctx, (_like(ga, g), _like(gb, g)))

    @staticmethod
    def _select(ctx, grads):
        return tuple(gr if need else None for gr, need in zip(grads, ctx.needs_input_grad))


def _like(v, g):
    """An array gradient in g's dtype (xp.where with a Python 0.0 would give float64)."""
    return v.astype(g.dtype, copy=False)


class Atan2(_Binary, Function):
    np_name = "arctan2"

    @staticmethod
    def grads(g, a, b, out, m):
        d = a * a + b * b
        recip = m.where(d == 0, 0.0, 1.0 / d)  # torch: a zero gradient at (0, 0), not nan
        return g * b * recip, g * -a * recip


class Hypot(_Binary, Function):
    np_name = "hypot"

    @staticmethod
    def grads(g, a, b, out, m):
        return g * a / out, g * b / out


class Logaddexp(_Binary, Function):
    """log(e^a + e^b); Logaddexp2 the same in base 2 (`power`: the inverse of its log)."""
    np_name, power = "logaddexp", "exp"

    @classmethod
    def grads(cls, g, a, b, out, m):
        power = getattr(m, cls.power)
        return g / (power(b - a) + 1.0), g / (power(a - b) + 1.0)


class Logaddexp2(Logaddexp):
    np_name, power = "logaddexp2", "exp2"


class Copysign(_Binary, Function):
    compile_rule = Rule()   # bits, no function evaluated
    np_name = "copysign"

    @staticmethod
    def grads(g, a, b, out, m):
        # torch: the ratio out / a is +-1, and 0 where a is 0; b's gradient is a constant zero
        # (not g * 0, which would carry a nan of g into double backward)
        return g * m.where(a == 0, 0.0, out / a), m.zeros_like(b)


class Fmod(_Binary, Function):
    """C's fmod: the remainder of a / b truncated toward zero, with the sign of a."""
    compile_rule = Rule()
    np_name = "fmod"

    @staticmethod
    def grads(g, a, b, out, m):
        return g, g * -m.trunc(a / b)  # trunc(a / b) is piecewise constant


def atan2(input, other):
    return Atan2.apply(*_float_operands(input, other, "atan2"))


arctan2 = atan2


def hypot(input, other):
    return Hypot.apply(*_float_operands(input, other, "hypot"))


def logaddexp(input, other):
    return Logaddexp.apply(*_float_operands(input, other, "logaddexp"))


def copysign(input, other):
    return Copysign.apply(*_float_operands(input, other, "copysign"))


def fmod(input, other):
    a, b = binary_operands(input, other, "fmod")
    kind = a.data.dtype.kind
    if kind == "b":
        raise TypeError("fmod: bool tensors are not supported (as in torch); convert with .int()")
    if kind in "iu":  # integers stay integers, and have no gradient
        return FmodInt.apply(a, b)
    return Fmod.apply(a, b)


class FmodInt(Function):
    """fmod of integers (C's %: the sign of the dividend). The divisor is checked here, in
    the op, so a compiled program checks each call's divisor too."""
    name = "fmod_int"

    @staticmethod
    def forward(ctx, a, b):
        if not bool(b.all()):
            raise ZeroDivisionError(f"fmod: integer division by zero (divisor {_plain_divisor(b)})")
        return _xp(a).fmod(a, b)


def _plain_divisor(b):
    """b (an array) as an error message names it."""
    return b.item() if b.ndim == 0 else f"tensor of shape {tuple(b.shape)} with a zero"


class Lerp(Function):
    """start + weight * (end - start), evaluated from the nearer end as torch does, so
    lerp(a, b, 1) is exactly b."""
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, start, end, weight):
        ctx.save_for_backward(start, end, weight)
        xp = _xp(start)
        diff = end - start
        near_start = xp.abs(weight) < 0.5
        return xp.where(near_start, start + weight * diff, end - diff * (1.0 - weight))

    @staticmethod
    def backward(ctx, g):
        return Lerp._grads(g, *ctx.saved_tensors, ctx.needs_input_grad)

    @staticmethod
    def backward_arrays(ctx, g):
        return Lerp._grads(g, *ctx.saved_arrays, ctx.needs_input_grad)

    @staticmethod
    def _grads(g, start, end, weight, needs):
        ns, ne, nw = needs
        return ((g * (1.0 - weight)) if ns else None, (g * weight) if ne else None,
                (g * (end - start)) if nw else None)


def lerp(input, end, weight):
    start, end = _float_operands(input, end, "lerp")
    if isinstance(weight, Tensor):
        if weight.dtype is not start.dtype:
            weight = cast(weight, start.dtype)
    else:
        weight = as_tensor_like(float(weight), start)
    return Lerp.apply(start, end, weight)


# the functions the slopes call, as tinytensor ops; the array forms find them on numpy/cupy
_TENSOR_MATH = SimpleNamespace(
    sqrt=sqrt, sinh=sinh, cosh=cosh, exp=exp, exp2=exp2, where=where, trunc=trunc,
    zeros_like=lambda t: Tensor._make(_xp(t.data).zeros_like(t.data), t.device, False))
