"""The activations of torch.nn.functional beyond relu/gelu/silu: elu, selu, celu, mish,
hardswish, hardsigmoid, hardtanh, relu6, logsigmoid, softmin.

Slopes are written once for Tensors (backward, differentiable again) and arrays
(backward_arrays), as in ops/elementwise.py. Where torch's gradient has a corner (elu at
0) the Tensor form takes the corner's value as a constant, so the second derivative there is
torch's too. `inplace=True` writes the result into the input through
ops/inplace.py, with its guards.
"""
import math
import warnings
from types import SimpleNamespace

import numpy as np

from ..core.function import Function
from ..core.rules import Rule
from ..kernels import c_eager as _c
from .elementwise import (_BySlope, _sigmoid, _xp, absolute, exp, float_operand, lt, minimum, neg, sigmoid,
                          softplus, tanh, where)
from .inplace import apply_inplace

__all__ = ["elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "hardtanh", "relu6",
           "logsigmoid", "softmin"]


def _maybe_inplace(x, inplace, op, fn):
    return apply_inplace(x, op + "_", fn) if inplace else fn(x)


# ---------------------------------------------------------------- elu, selu, celu
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


class Elu(Function):
    """scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1)): elu, and with torch's
    constants selu and celu (their own classes below, so graphs show the name used)."""
    compile_rule = Rule(transcendental=True)

    # The transcendental parts stay NumPy's (libm's expm1 and exp: the C kernels have no
    # expm1, and their exp is not NumPy's to the bit); the rest, the selects between the
    # branches and the products around them, runs as C kernels where the kernels run, bit
    # for bit NumPy's: NumPy's where branches per element and mispredicts half of random
    # signs (elu fwd+bwd (64,128,256) f32, Zen 5, 2 threads: 29.1 -> 5.7 ms; left: libm's
    # expm1 (1.8 ms), NumPy's exp and the min and product passes, one thread). `_value` and
    # `_times_slope` are the formulas for Tensors (the kernels' decomposition, and
    # backward) and arrays alike, given the expm1 or the exp.
    @staticmethod
    def _value(where, x, expm1_, alpha, scale):
        return where(x > 0, x * scale, expm1_ * (alpha * scale))

    @staticmethod
    def _times_slope(where, x, g, exp_, a):
        return g * where(x > 0, a["scale"], exp_ * (a["alpha"] * a["scale"] * a["input_scale"]))

    @staticmethod
    def forward(ctx, x, alpha, scale, input_scale):
        ctx.save_for_backward(x)
        xp = _xp(x)
        with np.errstate(over="ignore"):
            e = xp.expm1(xp.minimum(x, 0) * input_scale)
        if e.dtype == x.dtype:
            got = _c.elementwise("elu", lambda x, e: Elu._value(where, x, e, alpha, scale), [x, e], (alpha, scale))
            if got:
                return got[0]
        return Elu._value(xp.where, x, e, alpha, scale).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensor(0)
        # torch's second derivative is 0 at x = 0 (the mask is x < 0): there the exponent is
        # the constant 0, not x
        x_neg = where(lt(x, 0), x, 0.0)
        return Elu._times_slope(where, x, g, exp(x_neg * ctx.attrs["input_scale"]), ctx.attrs)

    jvp = backward   # elementwise: a diagonal (symmetric) Jacobian

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        a = ctx.attrs
        xp = _xp(x)
        e = xp.exp(xp.minimum(x, 0) * a["input_scale"])
        if e.dtype == g.dtype:
            got = _c.elementwise("elu_backward", lambda x, g, e: Elu._times_slope(where, x, g, e, a), [x, g, e],
                                 (a["alpha"], a["scale"], a["input_scale"]))
            if got:
                return got[0]
        return Elu._times_slope(xp.where, x, g, e, {**a, "scale": g.dtype.type(a["scale"])})


class Selu(Elu):
    pass


class Celu(Elu):
    pass


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, inplace, "elu", lambda t: Elu.apply(
        float_operand(t, "elu"), alpha=float(alpha), scale=1.0, input_scale=1.0))


def selu(input, inplace=False):
    return _maybe_inplace(input, inplace, "selu", lambda t: Selu.apply(
        float_operand(t, "selu"), alpha=_SELU_ALPHA, scale=_SELU_SCALE, input_scale=1.0))


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise ZeroDivisionError("celu: alpha must not be 0 (celu divides the input by alpha)")
    return _maybe_inplace(input, inplace, "celu", lambda t: Celu.apply(
        float_operand(t, "celu"), alpha=float(alpha), scale=1.0, input_scale=1.0 / alpha))


class _OfInput:
    """An elementwise activation y = `value(xp, x, **attrs)` (computed, then cast to x's dtype)
    that saves x. Its Jacobian is diagonal (symmetric): the tangent is its backward applied to
    it. A mixin before Function."""

    c_value = None   # value as a formula of Tensors, run as a C kernel: the same bits (tested)

    @classmethod
    def forward(cls, ctx, x, **attrs):
        ctx.save_for_backward(x)
        if cls.c_value is not None:
            got = _c.elementwise(cls.__name__.lower(), lambda t: cls.c_value(t, **attrs), [x], tuple(attrs.values()))
            if got:
                return got[0]
        return cls.value(_xp(x), x, **attrs).astype(x.dtype, copy=False)

    @classmethod
    def jvp(cls, ctx, t):
        return cls.backward(ctx, t)


# ---------------------------------------------------------------- mish
def _array_softplus(xp, x):
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


_TENSOR_MATH = SimpleNamespace(tanh=tanh, softplus=softplus, sigmoid=sigmoid)


class Mish(_OfInput, _BySlope, Function):
    """x * tanh(softplus(x)), softplus computed without overflow."""
    compile_rule = Rule(transcendental=True)
    tensor_math = _TENSOR_MATH
    array_math = staticmethod(lambda xp: SimpleNamespace(
        tanh=xp.tanh, softplus=lambda a: _array_softplus(xp, a), sigmoid=lambda a: _sigmoid(xp, a)))

    @staticmethod
    def value(xp, x):
        return x * xp.tanh(_array_softplus(xp, x))

    @staticmethod
    def _slope(x, m):
        t = m.tanh(m.softplus(x))
        return t + x * m.sigmoid(x) * (1.0 - t * t)


def mish(input, inplace=False):
    return _maybe_inplace(input, inplace, "mish", lambda t: Mish.apply(float_operand(t, "mish")))


# ---------------------------------------------------------------- piecewise linear
# The slopes are selects: in C where the kernels run (`_c.elementwise`, bit for bit NumPy's:
# the same operations on the same types), since NumPy's where branches per element and
# mispredicts half of random signs. Each slope is written once (`_grad(where, x, g, ...)`)
# for Tensors (backward, and the kernel's decomposition) and arrays (the NumPy fallback).
def _clip_0_6(t):
    """np.clip(t, 0, 6) in Tensor ops, a nan passing through (where np.clip keeps t's nan)."""
    return where(t < 0.0, 0.0, where(t > 6.0, 6.0, t))


class Hardswish(_OfInput, Function):
    """x * relu6(x + 3) / 6; torch's slope is x / 3 + 1/2 strictly inside (-3, 3), 0 from -3
    down and 1 from 3 up."""

    @staticmethod
    def value(xp, x):
        return x * xp.clip(x + 3.0, 0.0, 6.0) / 6.0

    @staticmethod
    def c_value(x):   # NumPy's four passes as one: the clip as selects (x + 3 is never -0)
        return x * _clip_0_6(x + 3.0) / 6.0

    @staticmethod
    def _grad(where, x, g):
        return g * where(x <= -3.0, 0.0, where(x < 3.0, x / 3.0 + 0.5, 1.0))

    @staticmethod
    def backward(ctx, g):
        return Hardswish._grad(where, ctx.saved_tensor(0), g)

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        got = _c.elementwise("hardswish_backward", lambda x, g: Hardswish._grad(where, x, g), [x, g])
        return got[0] if got else Hardswish._grad(_xp(x).where, x, g)


class Hardsigmoid(_OfInput, Function):
    """relu6(x + 3) / 6; the slope 1/6 strictly inside (-3, 3), as torch."""

    @staticmethod
    def value(xp, x):
        return xp.clip(x + 3.0, 0.0, 6.0) / 6.0

    @staticmethod
    def c_value(x):
        return _clip_0_6(x + 3.0) / 6.0

    # a select, as torch's: a nan g stays out where the slope is 0
    @staticmethod
    def _grad(where, abs, x, g):
        return where(abs(x) < 3.0, g * (1.0 / 6.0), 0.0)

    @staticmethod
    def backward(ctx, g):
        return Hardsigmoid._grad(where, absolute, ctx.saved_tensor(0), g)

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        got = _c.elementwise("hardsigmoid_backward", lambda x, g: Hardsigmoid._grad(where, absolute, x, g), [x, g])
        xp = _xp(x)
        return got[0] if got else Hardsigmoid._grad(xp.where, xp.abs, x, g)


class Hardtanh(_OfInput, Function):
    """clamp(x, min_val, max_val); the gradient passes strictly inside, as torch (so relu6,
    which is hardtanh(x, 0, 6), has a zero gradient at 0 and at 6)."""

    @staticmethod
    def value(xp, x, min_val, max_val):
        return xp.clip(x, min_val, max_val)

    # a select, as torch's: a nan g stays out where x is clamped
    @staticmethod
    def _grad(where, x, g, lo, hi):
        return where((x > lo) & (x < hi), g, 0.0)

    @staticmethod
    def backward(ctx, g):
        x, a = ctx.saved_tensor(0), ctx.attrs
        return Hardtanh._grad(where, x, g, a["min_val"], a["max_val"])

    @staticmethod
    def backward_arrays(ctx, g):
        x, a = ctx.saved_array(0), ctx.attrs
        lo, hi = a["min_val"], a["max_val"]
        got = _c.elementwise("hardtanh_backward", lambda x, g: Hardtanh._grad(where, x, g, lo, hi), [x, g],
                             (lo, hi))
        return got[0] if got else Hardtanh._grad(_xp(x).where, x, g, lo, hi)


class Relu6(Hardtanh):
    pass


def hardswish(input, inplace=False):
    return _maybe_inplace(input, inplace, "hardswish",
                          lambda t: Hardswish.apply(float_operand(t, "hardswish")))


def hardsigmoid(input, inplace=False):
    return _maybe_inplace(input, inplace, "hardsigmoid",
                          lambda t: Hardsigmoid.apply(float_operand(t, "hardsigmoid")))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    # integer tensors stay integer, as in torch (bounds are then whole numbers)
    cast_bound = float if input.data.dtype.kind == "f" else math.trunc
    return _maybe_inplace(input, inplace, "hardtanh", lambda t: Hardtanh.apply(
        t, min_val=cast_bound(min_val), max_val=cast_bound(max_val)))


def relu6(input, inplace=False):
    bound = float if input.data.dtype.kind == "f" else int
    return _maybe_inplace(input, inplace, "relu6", lambda t: Relu6.apply(
        t, min_val=bound(0), max_val=bound(6)))


# ---------------------------------------------------------------- logsigmoid, softmin
class Logsigmoid(_OfInput, Function):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for any finite x."""
    compile_rule = Rule(transcendental=True)

    @staticmethod
    def value(xp, x):
        return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))

    @classmethod
    def forward(cls, ctx, x):
        # libm's log1p(exp(-|x|)) stays NumPy's (the C kernels have no log1p); the min and
        # the subtraction are a C kernel where the kernels run, the same bits
        ctx.save_for_backward(x)
        xp = _xp(x)
        e = xp.log1p(xp.exp(-xp.abs(x)))
        got = _c.elementwise("logsigmoid", lambda x, e: minimum(x, 0.0) - e, [x, e])
        return got[0] if got else (xp.minimum(x, 0) - e).astype(x.dtype, copy=False)

    @staticmethod
    def _grad(x, g):
        return g * sigmoid(neg(x))

    @staticmethod
    def backward(ctx, g):
        return Logsigmoid._grad(ctx.saved_tensor(0), g)

    @staticmethod
    def backward_arrays(ctx, g):
        # in C where the kernels run: one fused pass on the pool's threads for NumPy's six.
        # The C sigmoid is not NumPy's to the bit (kernels/c_eager.py's tolerance, as the
        # sigmoid op's: tests/tinytensor/test_eager_kernels.py)
        x = ctx.saved_array(0)
        got = _c.elementwise("logsigmoid_backward", Logsigmoid._grad, [x, g])
        return got[0] if got else g * _sigmoid(_xp(x), -x)


def logsigmoid(input):
    return Logsigmoid.apply(float_operand(input, "logsigmoid"))


def implicit_softmax_dim(name, ndim, stacklevel):
    """torch's choice when softmax/log_softmax/softmin get no `dim`: 0 for 0-, 1- and 3-d
    inputs (a 3-d input was taken as unbatched C, H, W), else 1; with torch's warning.
    `stacklevel` counts from this function (1), as in torch's _get_softmax_dim."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input, dim); without dim, torch's legacy choice (0 for 0-, 1- and 3-d
    inputs, else 1) with its deprecation warning."""
    if dim is None:
        dim = implicit_softmax_dim("softmin", input.ndim, _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return neg(input).softmax(dim)  # softmax lies above this family: through the method
