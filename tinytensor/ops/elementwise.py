"""Elementwise ops: arithmetic, math functions, activations, comparisons, casts.

Binary ops promote their operands with `dtypes.result_type` (PyTorch's rules) before
the op runs, so each forward sees arrays of one dtype. Broadcasting is undone by the
engine, not here.
"""
import math

import numpy as np

from .. import dtypes
from ..autograd import STATE, plain
from ..function import Function
from ..tensor import Tensor
from . import special


# ---------------------------------------------------------------- operand handling
_CONSTANTS = {}  # (value, dtype, device) -> 0-d constant Tensor; constants are never modified
_CACHEABLE = (float, int, bool)


def as_tensor_like(value, ref, dtype=None):
    """A constant tensor holding `value` on ref's device (dtype: ref's unless given)."""
    if isinstance(value, Tensor):
        return value
    np_dtype = dtype.np if dtype is not None else ref.data.dtype
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        return Tensor(value, device=ref.device).to(dtypes.from_numpy_dtype(np_dtype))
    if value.__class__ not in _CACHEABLE:  # lists, tuples, NumPy scalars: no cache
        return Tensor._make(ref._device.xp.asarray(value, dtype=np_dtype), ref._device, False)
    key = (value, value.__class__, np_dtype, ref._device)
    if not value and math.copysign(1.0, value) < 0:
        key = ("-0.0", np_dtype, ref._device)  # -0.0 == 0.0 would share 0.0's entry
    t = _CONSTANTS.get(key)
    if t is None:
        t = Tensor._make(ref._device.xp.asarray(value, dtype=np_dtype), ref._device, False)
        if len(_CONSTANTS) < 4096 and value == value:  # NaN keys never match; skip them
            _CONSTANTS[key] = t
    return t


_NUMBERS = (float, int)


def binary_operands(a, b, op):
    """Tensors of one common dtype for a binary op; Python scalars become 0-d constants."""
    # fast paths: same dtypes, or a Python number that cannot change the tensor's dtype
    if a.__class__ is Tensor:
        if b.__class__ is Tensor:
            if a.data.dtype == b.data.dtype:
                return a, b
        elif b.__class__ in _NUMBERS and (a.data.dtype.kind == "f" or (
                b.__class__ is int and a.data.dtype.kind in "iu")):
            return a, as_tensor_like(b, a)
    elif a.__class__ in _NUMBERS and b.__class__ is Tensor and (b.data.dtype.kind == "f" or (
            a.__class__ is int and b.data.dtype.kind in "iu")):
        return as_tensor_like(a, b), b
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb and a.data.dtype == b.data.dtype:
        return a, b
    if not ta and not tb:
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    if not ta and not _is_scalar(a):
        a = Tensor(a, device=b.device)
    if not tb and not _is_scalar(b):
        b = Tensor(b, device=a.device)
    dt = dtypes.result_type(a, b)
    ref = a if isinstance(a, Tensor) else b
    a = as_tensor_like(a, ref, dt) if not isinstance(a, Tensor) else (a if a.dtype is dt else cast(a, dt))
    b = as_tensor_like(b, ref, dt) if not isinstance(b, Tensor) else (b if b.dtype is dt else cast(b, dt))
    return a, b


def _is_scalar(v):
    return isinstance(v, (int, float, bool, np.number, np.bool_))


def float_operand(x, op):
    """Math functions on integer/bool tensors compute in the default float dtype."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.data.dtype.kind != "f":
        return cast(x, dtypes.get_default_dtype())
    return x


# ---------------------------------------------------------------- casts and copies
class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = dtypes.from_numpy_dtype(x.dtype)
        return x.astype(dtype.np)

    @staticmethod
    def backward(ctx, g):
        return cast(g, ctx.src) if ctx.src.is_floating_point else None


def cast(x, dtype):
    dtype = dtypes.from_any(dtype)
    if x.dtype is dtype:
        return x
    return Cast.apply(x, dtype=dtype)


class ToDevice(Function):
    name = "to_device"

    @staticmethod
    def forward(ctx, x, device):
        from ..device import device_of_array, to_device_array
        ctx.src = device_of_array(x)
        return to_device_array(x, device)

    @staticmethod
    def backward(ctx, g):
        return to_device(g, ctx.src)


def to_device(x, device):
    # the output lives on the target device, which Function.apply cannot infer from inputs
    out = ToDevice.apply(x, device=device)
    out._device = device
    if out.grad_fn is not None:
        m = out.grad_fn.out_meta
        out.grad_fn.out_meta = tuple((s, d, device) for s, d, _ in m)
    return out


class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g


def clone(x):
    return Clone.apply(x)


# ---------------------------------------------------------------- arithmetic
class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, neg(g) if ctx.needs_input_grad[1] else None


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad  # a is needed only for b's gradient and vice versa
        if not STATE.grad_enabled:  # first order: straight on the arrays
            gd, dev = g.data, g._device
            return (Tensor._make(gd * ctx.saved_array(1), dev, False) if na else None,
                    Tensor._make(gd * ctx.saved_array(0), dev, False) if nb else None)
        return (g * ctx.saved_tensor(1) if na else None), (g * ctx.saved_tensor(0) if nb else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        b = ctx.saved_tensor(1)
        ga = g / b if na else None
        gb = neg(g * ctx.saved_tensor(0) / (b * b)) if nb else None  # a only for b's gradient
        return ga, gb


class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return neg(g)


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = _int_pow(a, b) if a.dtype.kind in "iu" else a ** b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        # b * a^(b-1) is 0 * inf = nan at a == 0, b == 0; PyTorch defines it as 0 where b == 0
        ga = where(eq(b, 0), 0.0, g * b * a ** (b - 1)) if na else None
        gb = None
        if nb:
            # d/db a^b = a^b log a; PyTorch defines it as 0 where a == 0 and b >= 0
            zero_base = logical_and(eq(a, 0), ge(b, 0))
            gb = g * where(zero_base, 0.0, out * log(a))  # g outside the where, as in PyTorch
        return ga, gb


class PowScalar(Function):
    name = "pow"

    @staticmethod
    def forward(ctx, x, exponent):
        ctx.save_for_backward(x)
        return x ** exponent

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.attrs["exponent"]
        if p == 0:
            return mul(g, 0.0)
        if p == 1:
            return g
        if p == 2:
            return g * (x * 2.0)
        return g * (pow(x, p - 1) * float(p))


def _int_pow(a, b):
    """Integer powers; negative exponents give 1 / a^|b| truncated, as in PyTorch (NumPy refuses)."""
    xp = _xp(a)
    negative = b < 0
    if not negative.any():
        return a ** b
    out = a ** xp.where(negative, 0, b)
    frac = xp.where(a == 1, 1, xp.where(a == -1, 1 - 2 * (b % 2), 0))
    return xp.where(negative, frac, out).astype(a.dtype, copy=False)


def add(a, b, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha) if isinstance(b, Tensor) else b * alpha
    a, b = binary_operands(a, b, "add")
    return Add.apply(a, b)


def sub(a, b, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha) if isinstance(b, Tensor) else b * alpha
    a, b = binary_operands(a, b, "sub")
    return Sub.apply(a, b)


def mul(a, b):
    a, b = binary_operands(a, b, "mul")
    return Mul.apply(a, b)


def div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        return _rounded_div(a, b, rounding_mode)
    a, b = binary_operands(a, b, "div")
    if a.data.dtype.kind != "f":  # true division of integers gives floats
        a, b = float_operand(a, "div"), float_operand(b, "div")
    return Div.apply(a, b)


def _rounded_div(a, b, mode):
    a, b = binary_operands(a, b, "div")
    if mode not in ("floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {plain(mode)!r}")
    xp = a.device.xp
    if mode == "floor":
        r = xp.floor_divide(a.data, b.data)
    else:
        r = a.data / b.data
        r = xp.trunc(r).astype(a.data.dtype) if a.data.dtype.kind != "f" else xp.trunc(r)
    return Tensor._make(r, a.device, False)


def neg(x):
    return Neg.apply(x)


def pow(x, exponent):
    if isinstance(x, Tensor) and _is_scalar(exponent) and not isinstance(exponent, bool):
        if x.data.dtype.kind != "f" and (isinstance(exponent, float) or exponent < 0):
            x = float_operand(x, "pow")
        return PowScalar.apply(x, exponent=exponent)
    a, b = binary_operands(x, exponent, "pow")
    return Pow.apply(a, b)


def square(x):
    return pow(x, 2)


def reciprocal(x):
    return div(1.0, float_operand(x, "reciprocal"))


# ---------------------------------------------------------------- unary math
class _TensorMath:
    """Math for backward formulas when the gradient graph is recorded (create_graph)."""
    exp = staticmethod(lambda x: exp(x))
    sin = staticmethod(lambda x: sin(x))
    cos = staticmethod(lambda x: cos(x))
    erf = staticmethod(lambda x: erf(x))
    sigmoid = staticmethod(lambda x: sigmoid(x))


class _ArrayMath:
    """The same functions on raw arrays: first-order backward without building Tensors."""

    def __init__(self, xp):
        self.exp, self.sin, self.cos = xp.exp, xp.sin, xp.cos
        self.erf = lambda x: special.erf(xp, x)
        self.sigmoid = lambda x: _sigmoid(xp, x)


_ARRAY_MATH = {}


def _array_math(a):
    xp = _xp(a)
    m = _ARRAY_MATH.get(xp)
    if m is None:
        m = _ARRAY_MATH[xp] = _ArrayMath(xp)
    return m


def _unary(name, fwd, bwd, save="input"):
    """Define a unary float op from forward(xp, x) and backward(m, g, s).

    `s` is the saved input (or output, with save="output"). The backward formula is
    written once with operators and `m.exp`/`m.sin`/...: on Tensors (differentiable, for
    create_graph) or, for a plain first-order backward, directly on the arrays.
    """
    def forward(ctx, x):
        y = fwd(_xp(x), x)
        ctx.save_for_backward(x if save == "input" else y)
        return y

    def backward(ctx, g):
        if STATE.grad_enabled:
            (s,) = ctx.saved_tensors
            return bwd(_TensorMath, g, s)
        gd = g.data
        (s,) = ctx.saved_arrays
        out = bwd(_array_math(gd), gd, s)
        return Tensor._make(out.astype(gd.dtype, copy=False), g._device, False)

    cls = type(name.capitalize(), (Function,), {
        "name": name, "forward": staticmethod(forward), "backward": staticmethod(backward)})

    def op(x):
        return cls.apply(float_operand(x, name))
    op.__name__ = name
    op.Function = cls
    return op


def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy").get_array_module(a)


exp = _unary("exp", lambda xp, x: xp.exp(x), lambda m, g, y: g * y, save="output")
log = _unary("log", lambda xp, x: xp.log(x), lambda m, g, x: g / x)
log1p = _unary("log1p", lambda xp, x: xp.log1p(x), lambda m, g, x: g / (x + 1.0))
sqrt = _unary("sqrt", lambda xp, x: xp.sqrt(x), lambda m, g, y: g / (y * 2.0), save="output")
rsqrt = _unary("rsqrt", lambda xp, x: 1.0 / xp.sqrt(x), lambda m, g, y: g * (y * y * y) * -0.5,
               save="output")
sin = _unary("sin", lambda xp, x: xp.sin(x), lambda m, g, x: g * m.cos(x))
cos = _unary("cos", lambda xp, x: xp.cos(x), lambda m, g, x: -(g * m.sin(x)))
tanh = _unary("tanh", lambda xp, x: xp.tanh(x), lambda m, g, y: g * (1.0 - y * y), save="output")
sigmoid = _unary("sigmoid", lambda xp, x: _sigmoid(xp, x), lambda m, g, y: g * (y * (1.0 - y)),
                 save="output")
erf = _unary("erf", lambda xp, x: special.erf(xp, x),
             lambda m, g, x: g * (m.exp(-(x * x)) * (2.0 / math.sqrt(math.pi))))
silu = _unary("silu", lambda xp, x: x * _sigmoid(xp, x),
              lambda m, g, x: g * _silu_grad(m, x))


def _sigmoid(xp, x):
    # split by sign so exp never overflows
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _silu_grad(m, x):
    s = m.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return abs(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * sign(x)


def abs_(x):
    if x.data.dtype.kind != "f":
        return Tensor._make(abs(x.data), x.device, False)
    return Abs.apply(x)


class Sign(Function):
    @staticmethod
    def forward(ctx, x):
        return _xp(x).sign(x)

    @staticmethod
    def backward(ctx, g):
        return mul(g, 0.0)


def sign(x):
    if x.data.dtype == np.bool_:  # NumPy has no sign for bool; torch returns the input
        return Tensor._make(x.data.copy(), x.device, False)
    return Sign.apply(x)


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        y = _xp(x).maximum(x, 0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * gt(y, 0)


def relu(x):
    return Relu.apply(x)


class LeakyRelu(Function):
    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        return _xp(x).where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return where(gt(x, 0), g, g * ctx.attrs["negative_slope"])


def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(float_operand(x, "leaky_relu"), negative_slope=float(negative_slope))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Gelu(Function):
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        xp = _xp(x)
        if approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
            return (0.5 * x * (1.0 + xp.tanh(inner))).astype(x.dtype, copy=False)
        return (0.5 * x * (1.0 + special.erf(xp, x * _INV_SQRT_2))).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.attrs["approximate"] == "tanh":
            x2 = x * x
            t = tanh((x + x2 * x * 0.044715) * _SQRT_2_OVER_PI)
            d = (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * ((1.0 + x2 * (3 * 0.044715)) * _SQRT_2_OVER_PI)
            return g * d
        cdf = (1.0 + erf(x * _INV_SQRT_2)) * 0.5
        pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
        return g * (cdf + x * pdf)


def gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {plain(approximate)!r}")
    return Gelu.apply(float_operand(x, "gelu"), approximate=approximate)


class Softplus(Function):
    @staticmethod
    def forward(ctx, x, beta, threshold):
        ctx.save_for_backward(x)
        xp = _xp(x)
        bx = x * beta
        soft = (xp.maximum(bx, 0) + xp.log1p(xp.exp(-xp.abs(bx)))) / beta
        return xp.where(bx > threshold, x, soft).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        beta, threshold = ctx.attrs["beta"], ctx.attrs["threshold"]
        bx = x * beta
        return where(gt(bx, threshold), g, g * sigmoid(bx))


def softplus(x, beta=1.0, threshold=20.0):
    return Softplus.apply(float_operand(x, "softplus"), beta=float(beta), threshold=float(threshold))


# ---------------------------------------------------------------- min/max/clamp/where
class Maximum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _xp(a).maximum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return _split_ties(g, gt(a, b), eq(a, b), ctx.needs_input_grad)


class Minimum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _xp(a).minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return _split_ties(g, lt(a, b), eq(a, b), ctx.needs_input_grad)


def _split_ties(g, a_wins, tie, needs):
    # like PyTorch: the winner takes the gradient, ties split it in half
    half = g * 0.5
    ga = where(a_wins, g, where(tie, half, 0.0)) if needs[0] else None
    gb = where(a_wins, 0.0, where(tie, half, g)) if needs[1] else None
    return ga, gb


def maximum(a, b):
    a, b = binary_operands(a, b, "maximum")
    return Maximum.apply(a, b)


def minimum(a, b):
    a, b = binary_operands(a, b, "minimum")
    return Minimum.apply(a, b)


class ClampScalar(Function):
    name = "clamp"

    @staticmethod
    def forward(ctx, x, min, max):
        ctx.save_for_backward(x)
        return _xp(x).clip(x, min, max).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.attrs["min"], ctx.attrs["max"]
        keep = None
        if lo is not None:
            keep = ge(x, lo)
        if hi is not None:
            keep = le(x, hi) if keep is None else logical_and(keep, le(x, hi))
        return g * keep


def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    dt = dtypes.result_type(x, *(v for v in (min, max) if v is not None))
    if dt is not x.dtype:  # clamp(int_tensor, 0.5) is a float tensor, as in torch
        x = cast(x, dt)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = where(lt(out, min), min, out)
        if max is not None:
            out = where(gt(out, max), max, out)
        return out
    return ClampScalar.apply(x, min=min, max=max)


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        return _xp(a).where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        zero = as_tensor_like(0, g)
        return (None,
                Where.apply(cond, g, zero) if na else None,
                Where.apply(cond, zero, g) if nb else None)


def where(cond, a, b):
    if not isinstance(cond, Tensor):
        raise TypeError("where: condition must be a bool Tensor")
    if cond.data.dtype != np.bool_:
        cond = cast(cond, dtypes.bool_)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        dt = dtypes.result_type(a, b)
        a = as_tensor_like(a, cond, dt)
    a, b = binary_operands(a, b, "where")
    return Where.apply(cond, a, b)


# ---------------------------------------------------------------- comparisons and logic
def _compare(name, fn):
    cls = type(name.capitalize(), (Function,), {
        "name": name,
        "forward": staticmethod(lambda ctx, a, b: fn(_xp(a), a, b)),
        "backward": staticmethod(lambda ctx, g: (None, None)),
    })

    def op(a, b):
        a, b = binary_operands(a, b, name)
        return cls.apply(a, b)
    op.__name__ = name
    return op


eq = _compare("eq", lambda xp, a, b: a == b)
ne = _compare("ne", lambda xp, a, b: a != b)
lt = _compare("lt", lambda xp, a, b: a < b)
le = _compare("le", lambda xp, a, b: a <= b)
gt = _compare("gt", lambda xp, a, b: a > b)
ge = _compare("ge", lambda xp, a, b: a >= b)
logical_and = _compare("logical_and", lambda xp, a, b: xp.logical_and(a, b))
logical_or = _compare("logical_or", lambda xp, a, b: xp.logical_or(a, b))
logical_xor = _compare("logical_xor", lambda xp, a, b: xp.logical_xor(a, b))


def _bitwise(name, fn):
    """Bitwise ops on integer and bool tensors (logical on bool), as torch's &, |, ^, ~."""
    def op(*args):
        for t in args:
            if isinstance(t, Tensor) and t.data.dtype.kind not in "biu":
                raise TypeError(f"{name}: only integer and bool tensors are supported, got "
                                f"{t.dtype.name}")
        return impl(*args)
    impl = _compare(name, fn) if name != "bitwise_not" else _predicate(name, fn)
    op.__name__ = name
    return op


def _predicate(name, fn):
    cls = type(name.capitalize(), (Function,), {
        "name": name,
        "forward": staticmethod(lambda ctx, x: fn(_xp(x), x)),
        "backward": staticmethod(lambda ctx, g: None),
    })

    def op(x):
        return cls.apply(x)
    op.__name__ = name
    return op


logical_not = _predicate("logical_not", lambda xp, x: xp.logical_not(x))
isfinite = _predicate("isfinite", lambda xp, x: xp.isfinite(x))
isnan = _predicate("isnan", lambda xp, x: xp.isnan(x))
isinf = _predicate("isinf", lambda xp, x: xp.isinf(x))
bitwise_and = _bitwise("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b))
bitwise_or = _bitwise("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b))
bitwise_xor = _bitwise("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b))
bitwise_not = _bitwise("bitwise_not", lambda xp, x: xp.invert(x))


# ---------------------------------------------------------------- remainder
class Remainder(Function):
    """a - floor(a / b) * b, with the sign of b (Python's and torch's `%`)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _xp(a).remainder(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        # floor(a / b) is piecewise constant, so it enters the gradient as a constant
        quotient = Tensor._make(_xp(a.data).floor(a.data / b.data), g._device, False)
        return (g if na else None), (-(g * quotient) if nb else None)


def remainder(a, b):
    a, b = binary_operands(a, b, "remainder")
    return Remainder.apply(a, b)


# ---------------------------------------------------------------- rounding
def _rounding(name, fn):
    """A piecewise-constant op: its gradient is zero almost everywhere (as in torch)."""
    cls = type(name.capitalize(), (Function,), {
        "name": name,
        "forward": staticmethod(lambda ctx, x: fn(_xp(x), x)),
        "backward": staticmethod(lambda ctx, g: mul(g, 0.0)),
    })

    def op(x):
        if x.data.dtype.kind != "f":
            return x  # integers are already whole
        return cls.apply(x)
    op.__name__ = name
    return op


floor = _rounding("floor", lambda xp, x: xp.floor(x))
ceil = _rounding("ceil", lambda xp, x: xp.ceil(x))
trunc = _rounding("trunc", lambda xp, x: xp.trunc(x))
round_ = _rounding("round", lambda xp, x: xp.round(x))  # half to even, like torch.round
