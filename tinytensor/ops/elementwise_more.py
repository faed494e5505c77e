"""The rest of torch's elementwise names: fmax/fmin, frac, frexp/ldexp, gcd/lcm, heaviside,
nextafter, signbit, isneginf/isposinf, isin (isreal: ops/complex.py), nan_to_num, clamp_min/clamp_max,
deg2rad/rad2deg, true_divide/floor_divide, positive, float_power, logaddexp2 and hash_tensor.

Each is one recorded op (or a composition of recorded ops), so tt.compile re-runs it on every
call's values. Gradients are torch's (derivatives.yaml); integer-only or bool-valued ops carry
none.
"""
import math
from collections import namedtuple

import numpy as np

from ..core.function import Function
from ..core.primitives import cast
from ..core.tensor import Tensor
from ..core.forward_ad import elementwise_jvp
from ..dtypes import float64, from_numpy_dtype
from ..messages import OpError
from .elementwise import (_Predicate, _SavedOperands, _xp, as_tensor_like, binary_operands,
                          clone, div, float_operand, isnan, logical_not, mul, pow, where)
from .math_functions import Logaddexp2, _float_operands, exp2

__all__ = ["fmax", "fmin", "frac", "frexp", "ldexp", "gcd", "lcm", "heaviside", "nextafter",
           "signbit", "isneginf", "isposinf", "isin", "nan_to_num", "clamp_min",
           "clamp_max", "deg2rad", "rad2deg", "true_divide", "floor_divide", "positive",
           "float_power", "logaddexp2", "hash_tensor"]


def _tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _zero_like(g):
    return g * 0.0


class _Selecting(_SavedOperands, Function):
    """One of the two operands elementwise (NumPy's `np_name`: a maximum or a minimum); the
    gradient goes to a where `gets(a, b)`'s first mask is true, to b where its second is."""

    @classmethod
    def backward(cls, ctx, g):
        gets_a, gets_b = cls.gets(*ctx.saved_tensors)
        zero = _zero_like(g)
        need_a, need_b = ctx.needs_input_grad
        return (where(gets_a, g, zero) if need_a else None,
                where(gets_b, g, zero) if need_b else None)


# ---------------------------------------------------------------- fmax, fmin
class _FExtreme(_Selecting):
    """fmax/fmin: the larger/smaller operand, the other one where one is nan. torch's
    gradient goes to a where a wins or ties or b is nan, else to b."""

    @classmethod
    def gets(cls, a, b):
        a_wins = ((a >= b) if cls.np_name == "fmax" else (a <= b)) | isnan(b)
        return a_wins, logical_not(a_wins)


class Fmax(_FExtreme):
    np_name = "fmax"


class Fmin(_FExtreme):
    np_name = "fmin"


def fmax(input, other):
    return Fmax.apply(*binary_operands(input, other, "fmax"))


def fmin(input, other):
    return Fmin.apply(*binary_operands(input, other, "fmin"))


# ---------------------------------------------------------------- frac, frexp, ldexp
class Frac(Function):
    """x - trunc(x), with x's sign; the gradient passes unchanged (torch)."""
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        return x - _xp(x).trunc(x)

    @staticmethod
    def backward(ctx, g):
        return g


def frac(input):
    x = _tensor(input, "frac")
    if x.data.dtype.kind != "f":
        raise TypeError(f"frac: expected a floating-point tensor, got {x.dtype} (as torch)")
    return Frac.apply(x)


class FrexpMantissa(Function):
    """The mantissa m of x = m 2^e, |m| in [0.5, 1); dm/dx = 2^-e."""
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        m, e = _xp(x).frexp(x)
        ctx.save_for_backward(x)
        return m

    @staticmethod
    def backward(ctx, g):
        return g / exp2(cast(FrexpExponent.apply(ctx.saved_tensor(0)), g.dtype))


class FrexpExponent(_Predicate):
    """The integer exponent e of x = m 2^e (int32, as torch)."""

    @staticmethod
    def forward(ctx, x):
        return _xp(x).frexp(x)[1].astype(np.int32)


Frexp = namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input):
    x = _tensor(input, "frexp")
    if x.data.dtype.kind != "f":
        raise TypeError(f"frexp: only floating-point tensors are supported, got {x.dtype} "
                        f"(as torch)")
    return Frexp(FrexpMantissa.apply(x), FrexpExponent.apply(x))


def ldexp(input, other):
    """input * 2^other (torch's own definition, so its gradients follow)."""
    a, b = _float_operands(input, other, "ldexp")
    return mul(a, exp2(b))


# ---------------------------------------------------------------- gcd, lcm
class _IntegerOnly(_Predicate):
    np_name = None

    @classmethod
    def forward(cls, ctx, a, b):
        return getattr(_xp(a), cls.np_name)(a, b).astype(a.dtype, copy=False)


class Gcd(_IntegerOnly):
    np_name = "gcd"


class Lcm(_IntegerOnly):
    np_name = "lcm"


def _integers(a, b, op):
    a, b = binary_operands(a, b, op)
    if a.data.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected integer tensors, got {a.dtype} (as torch)")
    return a, b


def gcd(input, other):
    return Gcd.apply(*_integers(input, other, "gcd"))


def lcm(input, other):
    return Lcm.apply(*_integers(input, other, "lcm"))


# ---------------------------------------------------------------- heaviside, nextafter
class Heaviside(_Predicate):
    """0 for x < 0, values for x == 0, 1 for x > 0; no gradient (torch: not differentiable)."""

    @staticmethod
    def forward(ctx, x, values):
        xp = _xp(x)
        return xp.where(x == 0, values, (x > 0).astype(x.dtype)).astype(x.dtype, copy=False)


def heaviside(input, values):
    x = _tensor(input, "heaviside")
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside: values must be a Tensor, got {type(values).__name__}")
    if x.dtype is not values.dtype:
        raise OpError(f"heaviside is not yet implemented for tensors with different dtypes "
                      f"({x.dtype} and {values.dtype}), as in torch")
    return Heaviside.apply(x, values)


class Nextafter(_SavedOperands, Function):
    """The next float after x toward y; torch's gradient: dx = g where x != y (0 where the
    result is y itself), dy = 0."""
    np_name = "nextafter"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        zero = _zero_like(g)
        return (where(a == b, zero, g) if need_a else None), (zero if need_b else None)


def nextafter(input, other):
    a, b = binary_operands(input, other, "nextafter")
    if a.data.dtype.kind != "f":
        raise TypeError(f"nextafter: expected floating-point tensors, got {a.dtype}")
    return Nextafter.apply(a, b)


# ---------------------------------------------------------------- predicates
class Signbit(_Predicate):
    @staticmethod
    def forward(ctx, x):
        xp = _xp(x)
        return xp.zeros(x.shape, dtype=bool) if x.dtype == np.bool_ else xp.signbit(x)


class Isneginf(_Predicate):
    @staticmethod
    def forward(ctx, x):
        return _xp(x).isneginf(x) if x.dtype.kind == "f" else _xp(x).zeros(x.shape, dtype=bool)


class Isposinf(_Predicate):
    @staticmethod
    def forward(ctx, x):
        return _xp(x).isposinf(x) if x.dtype.kind == "f" else _xp(x).zeros(x.shape, dtype=bool)


def signbit(input):
    return Signbit.apply(_tensor(input, "signbit"))


def isneginf(input):
    return Isneginf.apply(_tensor(input, "isneginf"))


def isposinf(input):
    return Isposinf.apply(_tensor(input, "isposinf"))


class Isin(_Predicate):
    @staticmethod
    def forward(ctx, elements, test, invert):
        xp = _xp(elements)
        return xp.isin(elements, test.reshape(-1), invert=invert)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is among `test_elements` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: expected at least one Tensor")
    ref = elements if isinstance(elements, Tensor) else test_elements
    if not isinstance(elements, Tensor):
        elements = as_tensor_like(elements, ref, from_numpy_dtype(np.result_type(
            ref.data.dtype, np.asarray(elements))))
    if not isinstance(test_elements, Tensor):
        test_elements = as_tensor_like(test_elements, ref, elements.dtype)
    return Isin.apply(elements, test_elements, invert=bool(invert))


# ---------------------------------------------------------------- nan_to_num
class NanToNum(Function):
    """nan -> nan (0), +inf -> posinf (the dtype's max), -inf -> neginf (its lowest);
    torch's gradient: g where x is finite, 0 elsewhere."""
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        ctx.save_for_backward(x)
        xp = _xp(x)
        info = np.finfo(x.dtype)
        return xp.nan_to_num(x, nan=nan, posinf=info.max if posinf is None else posinf,
                             neginf=info.min if neginf is None else neginf)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensor(0)
        return where(x.isfinite(), g, _zero_like(g))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    x = _tensor(input, "nan_to_num")
    if x.data.dtype.kind != "f":
        return clone(x)   # integers and bools have no nan or inf
    return NanToNum.apply(x, nan=float(nan), posinf=None if posinf is None else float(posinf),
                          neginf=None if neginf is None else float(neginf))


# ---------------------------------------------------------------- clamp_min, clamp_max
class _ClampOne(_Selecting):
    """max(x, bound) (clamp_min) or min(x, bound) (clamp_max), nan from either side.
    torch: x gets g where it is kept (x >= min, x <= max), a tensor bound where it wins
    (x < min, x > max): at a nan x neither does."""

    @classmethod
    def gets(cls, x, bound):
        if cls.np_name == "maximum":
            return x >= bound, x < bound
        return x <= bound, x > bound


class ClampMin(_ClampOne):
    np_name = "maximum"


class ClampMax(_ClampOne):
    np_name = "minimum"


def clamp_min(input, min):
    x = _tensor(input, "clamp_min")
    return ClampMin.apply(*binary_operands(x, min, "clamp_min"))


def clamp_max(input, max):
    x = _tensor(input, "clamp_max")
    return ClampMax.apply(*binary_operands(x, max, "clamp_max"))


# ---------------------------------------------------------------- scalings, divisions
def deg2rad(input):
    return mul(float_operand(_tensor(input, "deg2rad"), "deg2rad"), math.pi / 180.0)


def rad2deg(input):
    return mul(float_operand(_tensor(input, "rad2deg"), "rad2deg"), 180.0 / math.pi)


def _numbers_as_tensor(input, other):
    """torch takes two Python numbers here (a 0-d result): the first becomes a tensor."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from ..creation import tensor
        input = tensor(input)
    return input


def true_divide(input, other):
    return div(_numbers_as_tensor(input, other), other)


def floor_divide(input, other):
    return div(_numbers_as_tensor(input, other), other, rounding_mode="floor")


def positive(input):
    x = _tensor(input, "positive")
    if x.data.dtype == np.bool_:
        raise TypeError("positive: the `+` operator, on a bool tensor is not supported (as torch)")
    return x


def float_power(input, exponent):
    """input ** exponent computed in float64 (torch's float_power), whatever the dtypes."""
    if isinstance(input, Tensor):
        base = cast(input, float64) if input.dtype is not float64 else input
        if isinstance(exponent, Tensor) and exponent.dtype is not float64:
            exponent = cast(exponent, float64)
        elif not isinstance(exponent, Tensor):
            exponent = float(exponent)
        return pow(base, exponent)
    exponent = _tensor(exponent, "float_power")
    exponent = cast(exponent, float64) if exponent.dtype is not float64 else exponent
    return pow(as_tensor_like(float(input), exponent), exponent)


def logaddexp2(input, other):
    return Logaddexp2.apply(*_float_operands(input, other, "logaddexp2"))


# ---------------------------------------------------------------- hash_tensor
class HashTensor(_Predicate):
    """The xor of the elements' 64-bit patterns (floats as float64, integers and bools as
    int64), over `dim` or all dimensions; uint64, as torch.hash_tensor(mode=0)."""

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        xp = _xp(x)
        wide = x.astype(np.float64 if x.dtype.kind == "f" else np.int64)
        bits = wide.view(np.uint64)
        axis = tuple(range(x.ndim)) if dim is None else dim
        return xp.bitwise_xor.reduce(bits, axis=axis, keepdims=keepdim) if bits.ndim else \
            bits.copy()


def hash_tensor(input, dim=None, *, keepdim=False, mode=0):
    x = _tensor(input, "hash_tensor")
    if mode != 0:
        raise OpError(f"hash_tensor: only mode=0 (xor reduction) is supported, got mode={mode}")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        nd = max(x.ndim, 1)
        for d in dims:
            if not -nd <= d < nd:
                raise OpError(f"hash_tensor: dim {d} is out of range for a tensor of shape "
                              f"{tuple(x.shape)}")
        dim = tuple(sorted({d % nd for d in dims})) if x.ndim else None
    return HashTensor.apply(x, dim=dim, keepdim=bool(keepdim))

