"""Elementwise ops: arithmetic, math functions, activations, comparisons, casts.

Binary ops promote their operands with `dtypes.result_type` (PyTorch's rules) before
the op runs, so each forward sees arrays of one dtype. Broadcasting is undone by the
engine, not here. Every op is a Function subclass, plus the function users call.
"""
import math
import numbers

import numpy as np

from ..dtypes import (bool_, from_any, from_numpy_dtype, get_default_dtype, is_floating_np,
                      result_type)
from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.primitives import Cast, cast  # noqa: F401  (part of this family's namespace)
from ..core.rules import ANY, BOOL, FLOAT, FLOAT_OR_BOOL, Rule
from ..core.tensor import Tensor
from ..core.forward_ad import elementwise_jvp, linear_jvp, zero_jvp
from ..device import device_of_array, to_device_array
from ..kernels import c_eager as _c, c_rows as _c_rows
from ..messages import plain
from .special import erf as special_erf, erfc as special_erfc, gelu_exact, gelu_exact_slope
from ..device import xp_of as _xp


# ---------------------------------------------------------------- operand handling
_CONSTANTS = {}  # (value, dtype, device) -> 0-d constant Tensor; constants are never modified
_CACHEABLE = (float, int, bool)


def as_tensor_like(value, ref, dtype=None):
    """A constant tensor holding `value` on ref's device (dtype: ref's unless given)."""
    if isinstance(value, Tensor):
        return value
    np_dtype = dtype.np if dtype is not None else ref.data.dtype
    if isinstance(value, np.ndarray) or type(value).__module__.startswith("cupy"):
        return Tensor(value, device=ref.device).to(from_numpy_dtype(np_dtype))
    if value.__class__ not in _CACHEABLE:  # lists, tuples, NumPy scalars: no cache
        hooks = STATE.hooks
        if hooks.symbolic and hooks.is_size(value):
            # a number computed from dynamic sizes (a mean's 1/n): recomputed at each call
            return hooks.size_scalar(value, np_dtype, ref._device)
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


def _int_scalar(value, np_dtype, op):
    """A Python int operand as torch takes it against an integer tensor. Arithmetic, bitwise
    ops and comparisons read it as a 64-bit integer (values in [2**63, 2**64) as unsigned)
    and wrap it into the tensor's dtype, so int32 | 0xFFFFFFFF is int32 | -1; `where` (like
    torch's fill and clamp) refuses a value the dtype cannot hold."""
    if value.__class__ is not int or np_dtype.kind not in "iu":
        return value
    if not -(1 << 63) <= value < (1 << 64):
        raise OverflowError(f"{op}: Python integer {value} is too big to be a scalar operand: torch "
                            f"and tinytensor take integers in [-2**63, 2**64)")
    bits = 8 * np_dtype.itemsize
    if op == "where":
        info = np.iinfo(np_dtype)
        if not info.min <= value <= info.max:
            raise RuntimeError(f"where: value {value} cannot be converted to {np_dtype} without "
                               f"overflow (its range is [{int(info.min)}, {int(info.max)}])")
        return value
    value &= (1 << bits) - 1
    if np_dtype.kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


_NUMBERS = (float, int)


def binary_operands(a, b, op):
    """Tensors of one common dtype for a binary op; Python scalars become 0-d constants."""
    # fast paths: same dtypes, or a Python number that cannot change the tensor's dtype
    if a.__class__ is Tensor:
        if b.__class__ is Tensor:
            if a.data.dtype == b.data.dtype:
                return a, b
        elif b.__class__ in _NUMBERS and (is_floating_np(a.data.dtype) or (
                b.__class__ is int and a.data.dtype.kind in "iu")):
            return a, as_tensor_like(_int_scalar(b, a.data.dtype, op), a)
    elif a.__class__ in _NUMBERS and b.__class__ is Tensor and (is_floating_np(b.data.dtype) or (
            a.__class__ is int and b.data.dtype.kind in "iu")):
        return as_tensor_like(_int_scalar(a, b.data.dtype, op), b), b
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb and a.data.dtype == b.data.dtype:
        return a, b
    if not ta and not tb:
        if op in _TWO_NUMBERS and _is_scalar(a) and _is_scalar(b):
            # torch.add(2.5, 3): two numbers make a 0-d tensor of their result type
            dt = result_type(a, b)
            return Tensor(np.asarray(a, dtype=dt.np)), Tensor(np.asarray(b, dtype=dt.np))
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    if not ta and not _is_scalar(a):
        a = Tensor(a, device=b.device)
    if not tb and not _is_scalar(b):
        b = Tensor(b, device=a.device)
    dt = result_type(a, b)
    ref = a if isinstance(a, Tensor) else b
    a = as_tensor_like(_int_scalar(a, dt.np, op), ref, dt) if not isinstance(a, Tensor) else (
        a if a.dtype is dt else cast(a, dt))
    b = as_tensor_like(_int_scalar(b, dt.np, op), ref, dt) if not isinstance(b, Tensor) else (
        b if b.dtype is dt else cast(b, dt))
    return a, b


_TWO_NUMBERS = {"add", "sub", "mul", "div", "rsub"}   # torch's ops that take two numbers


def _is_scalar(v):
    return isinstance(v, (int, float, bool, np.number, np.bool_))


def float_operand(x, op):
    """Math functions on integer/bool tensors compute in the default float dtype."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if not is_floating_np(x.data.dtype) and x.data.dtype.kind != "c":
        return cast(x, get_default_dtype())
    return x


# ---------------------------------------------------------------- device copies and clones
class ToDevice(Function):
    compile_rule = Rule(flops=0)   # moves or picks elements: no arithmetic
    name = "to_device"

    @staticmethod
    def jvp(ctx, t):
        return to_device(t, ctx.attrs["device"])

    @staticmethod
    def forward(ctx, x, device):
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
    compile_rule = Rule(fuses=ANY, c="{0}", flops=0)
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def backward_arrays(ctx, g):
        return g


def clone(x, *, memory_format=None):
    """A copy on the tape; `memory_format` as torch's (preserve_format by default)."""
    out = Clone.apply(x)
    if memory_format is None:
        return out
    from .memory_format import apply_memory_format   # it builds on movement, above this module
    return apply_memory_format(out, memory_format, "clone")


# ---------------------------------------------------------------- arithmetic
class Add(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, commutes=True, c=lambda a, ins, t, C: C.arith("+", a, t))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g

    @staticmethod
    def backward_arrays(ctx, g):
        return g, g  # the engine gives each input its own copy where it must


class Sub(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, c=lambda a, ins, t, C: C.arith("-", a, t))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, neg(g) if ctx.needs_input_grad[1] else None

    @staticmethod
    def backward_arrays(ctx, g):
        return g, -g if ctx.needs_input_grad[1] else None


class Mul(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, commutes=True, c=lambda a, ins, t, C: C.arith("*", a, t))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad  # a is needed only for b's gradient and vice versa
        return (g * ctx.saved_tensor(1) if na else None), (g * ctx.saved_tensor(0) if nb else None)

    @staticmethod
    def backward_arrays(ctx, g):
        na, nb = ctx.needs_input_grad   # each input read only where the other's gradient is asked
        if na and nb:
            a, b = ctx.saved_array(0), ctx.saved_array(1)
            if a is b:   # x * x: g * x serves both (the engine adds them: 2 g x exactly)
                p = g * a
                return p, p
            return g * b, g * a
        return (g * ctx.saved_array(1) if na else None), (g * ctx.saved_array(0) if nb else None)


class Div(Function):
    compile_rule = Rule(fuses=FLOAT, c=lambda a, ins, t, C: C.arith("/", a, t))
    jvp = staticmethod(elementwise_jvp)

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

    @staticmethod
    def backward_arrays(ctx, g):
        na, nb = ctx.needs_input_grad
        b = ctx.saved_array(1)
        return (g / b if na else None), (-(g * ctx.saved_array(0) / (b * b)) if nb else None)


class Neg(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, c=lambda a, ins, t, C: C.neg(a[0], t))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return neg(g)

    @staticmethod
    def backward_arrays(ctx, g):
        return -g


class Pow(Function):
    compile_rule = Rule(transcendental=True)
    jvp = staticmethod(elementwise_jvp)

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


# x ** p that NumPy computes exactly (x*x, sqrt, 1/x, x): a kernel matches it bit for bit
_EXACT_POWERS = (1, 2, 0.5, -1)


def _pow_c(a, ins, t, C):
    x = a[0]
    return {1: x, 2: f"({x} * {x})", 0.5: f"sqrt{'f' if t == 'float' else ''}({x})",
            -1: f"({C.lit(1.0, t)} / {x})"}[ins.attrs["exponent"]]


class PowScalar(Function):
    compile_rule = Rule(fuses=FLOAT, fuses_if=lambda attrs: attrs.get("exponent") in _EXACT_POWERS, c=_pow_c,
                        transcendental=lambda attrs: attrs.get("exponent") not in _EXACT_POWERS + (0,))
    name = "pow"
    jvp = staticmethod(elementwise_jvp)

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

    @staticmethod
    def backward_arrays(ctx, g):
        x, p = ctx.saved_array(0), ctx.attrs["exponent"]
        if p == 0:
            return g * 0.0
        if p == 1:
            return g
        if p == 2:
            return g * (x * 2.0)
        return g * (x ** (p - 1) * float(p))


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


def rsub(input, other, alpha=1):
    """other - alpha * input: sub with its operands swapped (torch.rsub)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input, other = binary_operands(input, other, "rsub")
    return sub(other, input, alpha=alpha)


def div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        return _rounded_div(a, b, rounding_mode)
    a, b = binary_operands(a, b, "div")
    if not is_floating_np(a.data.dtype) and a.data.dtype.kind != "c":  # true division of integers gives floats
        a, b = float_operand(a, "div"), float_operand(b, "div")
    return Div.apply(a, b)


class RoundedDiv(Function):
    """a / b rounded toward -inf (mode "floor", Python's //) or toward 0 ("trunc"), in the
    inputs' dtype. Piecewise constant: its result carries no gradient (a recorded op, so a
    compiled program divides each call's values)."""

    @staticmethod
    def forward(ctx, a, b, mode):
        xp = _xp(a)
        if mode == "floor":
            r = xp.floor_divide(a, b)
        else:
            r = a / b
            r = xp.trunc(r).astype(a.dtype) if a.dtype.kind != "f" else xp.trunc(r)
        ctx.mark_non_differentiable(r)
        return r


def _rounded_div(a, b, mode):
    a, b = binary_operands(a, b, "div")
    if mode not in ("floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {plain(mode)!r}")
    return RoundedDiv.apply(a, b, mode=mode)


def neg(x):
    return Neg.apply(x)


def pow(x, exponent):
    if isinstance(exponent, np.generic) and isinstance(exponent, numbers.Number):
        exponent = exponent.item()  # a Python number keeps x's dtype, as in torch; np.float64 would not
    if isinstance(x, Tensor) and _is_scalar(exponent) and not isinstance(exponent, bool):
        if not is_floating_np(x.data.dtype) and not isinstance(exponent, float) and exponent < 0:
            raise RuntimeError(f"pow: integers to negative integer powers are not allowed, as in "
                               f"torch: {x.dtype.name} tensor ** {exponent}; use a float exponent "
                               f"({float(exponent)}) or a float tensor")
        if not is_floating_np(x.data.dtype) and isinstance(exponent, float):
            x = float_operand(x, "pow")
        return PowScalar.apply(x, exponent=exponent)
    a, b = binary_operands(x, exponent, "pow")
    return Pow.apply(a, b)


def square(x):
    return pow(x, 2)


def reciprocal(x):
    return div(1.0, float_operand(x, "reciprocal"))


# ---------------------------------------------------------------- unary math and activations
# Every op here is one Function subclass: forward on arrays, backward in tinytensor ops
# (differentiable again, for create_graph) and, where it pays, backward_arrays: the same
# first-order formula on raw arrays, which the engine runs when no gradient graph is built.
def _sigmoid(xp, x):
    if xp is np and x.dtype in (np.float32, np.float64):
        # torch's 1 / (1 + exp(-x)) in four in-place passes; exp overflowing to inf gives the
        # right 0 (as torch, it flushes x < -88.7 in float32 to 0 instead of a subnormal)
        e = np.negative(x, out=np.empty_like(x))  # an array even for 0-d x (out= needs one)
        with np.errstate(over="ignore"):
            np.exp(e, out=e)
        e += 1.0
        return np.reciprocal(e, out=e)
    # half precision: split by sign so exp never overflows (float16 would lose its subnormals)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


class Exp(Function):
    compile_rule = Rule(fuses=FLOAT, transcendental=True, c="tt_exp{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        got = _c.elementwise("exp", exp, [x])   # NumPy's exp: one thread, not vectorised on AVX2
        y = got[0] if got else _xp(x).exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensor(0)

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        # the formula's kernel: split over the pool's threads where NumPy's multiply is one
        got = _c.elementwise("exp_backward", lambda y, g: g * y, [y, g])
        return got[0] if got else g * y


class Log(Function):
    compile_rule = Rule(fuses=FLOAT, transcendental=True, c="tt_log{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        got = _c.elementwise("log", log, [x])
        return got[0] if got else _xp(x).log(x)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.saved_tensor(0)

    @staticmethod
    def backward_arrays(ctx, g):
        return g / ctx.saved_array(0)


class _OfSavedInput(Function):
    """NumPy's transcendental `np_name` of x, elementwise; x saved for the slope."""
    compile_rule = Rule(transcendental=True)
    jvp = staticmethod(elementwise_jvp)
    np_name = None

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return getattr(_xp(x), cls.np_name)(x)


class Log1p(_OfSavedInput):
    np_name = "log1p"

    @staticmethod
    def backward(ctx, g):
        return g / (ctx.saved_tensor(0) + 1.0)

    @staticmethod
    def backward_arrays(ctx, g):
        return g / (ctx.saved_array(0) + 1.0)


class Sqrt(Function):
    compile_rule = Rule(fuses=FLOAT, c="sqrt{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        y = _xp(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return g / (ctx.saved_tensor(0) * 2.0)

    @staticmethod
    def backward_arrays(ctx, g):
        return g / (ctx.saved_array(0) * 2.0)


class Rsqrt(Function):
    compile_rule = Rule(fuses=FLOAT, alone=True, c="({one} / sqrt{f}({0}))")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        y = 1.0 / _xp(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_tensor(0)
        return g * (y * y * y) * -0.5

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        return g * (y * y * y) * -0.5


class Sin(_OfSavedInput):
    np_name = "sin"

    @staticmethod
    def backward(ctx, g):
        return g * cos(ctx.saved_tensor(0))

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        return g * _xp(x).cos(x)


class Cos(_OfSavedInput):
    np_name = "cos"

    @staticmethod
    def backward(ctx, g):
        return -(g * sin(ctx.saved_tensor(0)))

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        return -(g * _xp(x).sin(x))


# Eager C kernels (kernels/c_eager.py): each hot activation's forward and first-order
# backward run the kernel the compiler generates from the op itself and from its
# `backward` formula, on big contiguous float arrays; NumPy otherwise.
class Tanh(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, transcendental=True, c="tt_tanh{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        got = _c.elementwise("tanh", tanh, [x])
        y = got[0] if got else _xp(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_tensor(0)
        return g * (1.0 - y * y)

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        got = _c.elementwise("tanh_backward", lambda y, g: g * (1.0 - y * y), [y, g])
        return got[0] if got else g * (1.0 - y * y)


class Sigmoid(Function):
    compile_rule = Rule(fuses=FLOAT, alone=True, cheap=True, transcendental=True, evaluates=("sigmoid",),
                        c=lambda a, ins, t, C: C.sigmoid(a[0], t))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        got = _c.elementwise("sigmoid", sigmoid, [x])
        y = got[0] if got else _sigmoid(_xp(x), x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_tensor(0)
        return g * (y * (1.0 - y))

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        got = _c.elementwise("sigmoid_backward", lambda y, g: g * (y * (1.0 - y)), [y, g])
        return got[0] if got else g * (y * (1.0 - y))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class Erf(Function):
    compile_rule = Rule(fuses=FLOAT, alone=True, transcendental=True, c="tt_erf{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        got = _c_rows.elementwise("erf", x)
        return got if got is not None else special_erf(_xp(x), x)

    @staticmethod
    def backward(ctx, g):
        return Erf._grad(ctx.saved_tensor(0), g)

    @staticmethod
    def _grad(x, g):
        return g * (exp(-(x * x)) * _TWO_OVER_SQRT_PI)

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        got = _c.elementwise("erf_backward", Erf._grad, [x, g])
        return got[0] if got else g * (_xp(x).exp(-(x * x)) * _TWO_OVER_SQRT_PI)


class Silu(Function):
    compile_rule = Rule(fuses=FLOAT, alone=True, cheap=True, transcendental=True, evaluates=("sigmoid",),
                        c=lambda a, ins, t, C: f"({a[0]} * {C.sigmoid(a[0], t)})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        got = _c.elementwise("silu", silu, [x])
        return got[0] if got else x * _sigmoid(_xp(x), x)

    @staticmethod
    def backward(ctx, g):
        return Silu._grad(ctx.saved_tensor(0), g)

    @staticmethod
    def _grad(x, g):
        s = sigmoid(x)
        return g * (s * (1.0 + x * (1.0 - s)))

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        got = _c.elementwise("silu_backward", Silu._grad, [x, g])
        if got:
            return got[0]
        s = _sigmoid(_xp(x), x)
        # s (1 + x (1 - s)) in place on one temporary: 5 passes, not 5 arrays
        t = 1.0 - s
        t *= x
        t += 1.0
        t *= s
        if getattr(g, "shape", None) == t.shape and g.dtype == t.dtype:
            t *= g
            return t
        return g * t


def exp(x):
    return Exp.apply(float_operand(x, "exp"))


def log(x):
    return Log.apply(float_operand(x, "log"))


def log1p(x):
    return Log1p.apply(float_operand(x, "log1p"))


def sqrt(x):
    return Sqrt.apply(float_operand(x, "sqrt"))


def rsqrt(x):
    return Rsqrt.apply(float_operand(x, "rsqrt"))


def sin(x):
    return Sin.apply(float_operand(x, "sin"))


def cos(x):
    return Cos.apply(float_operand(x, "cos"))


def tanh(x):
    return Tanh.apply(float_operand(x, "tanh"))


def sigmoid(x):
    return Sigmoid.apply(float_operand(x, "sigmoid"))


def erf(x):
    return Erf.apply(float_operand(x, "erf"))


def silu(x):
    return Silu.apply(float_operand(x, "silu"))


class Abs(Function):
    compile_rule = Rule(fuses=FLOAT, c="fabs{f}({0})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return abs(x)

    @staticmethod
    def _grad(x, g):
        return g * sign(x)

    @staticmethod
    def backward(ctx, g):
        return Abs._grad(ctx.saved_tensor(0), g)

    @staticmethod
    def backward_arrays(ctx, g):
        # in C where the kernels run: one pass on the pool's threads for NumPy's four
        x = ctx.saved_array(0)
        got = _c.elementwise("abs_backward", Abs._grad, [x, g])
        return got[0] if got else g * _sign_array(x)   # 0 at NaN, as torch's sgn


class AbsInt(Function):
    """|x| of an integer or bool array: no gradient, and kept out of the float kernels of
    the code generators (a recorded op all the same)."""

    @staticmethod
    def forward(ctx, x):
        return abs(x)


def absolute(x):
    if x.data.dtype.kind == "c":
        from .complex import abs_complex   # |z| is real: its own op (complex.py builds on this module)
        return abs_complex(x)
    if not is_floating_np(x.data.dtype):
        return AbsInt.apply(x)
    return Abs.apply(x)


def _sign_array(x):
    """torch's sign: (0 < x) - (x < 0), so NaN gives 0 (NumPy's sign gives NaN)."""
    xp = _xp(x)
    out = xp.sign(x)
    if out.dtype.kind == "f":
        out = xp.where(xp.isnan(x), out.dtype.type(0), out)
    return out


class Sign(Function):
    # in C as _sign_array: +-1, and +0 for +-0 and nan (codegen/tt_math.h says why on the bits)
    compile_rule = Rule(fuses=FLOAT, cheap=True, flops=0, c="tt_sign{f}({0})")
    jvp = staticmethod(zero_jvp)

    @staticmethod
    def forward(ctx, x):
        return _sign_array(x)

    @staticmethod
    def backward(ctx, g):
        return mul(g, 0.0)


def sign(x):
    if x.data.dtype == np.bool_:  # NumPy has no sign for bool; torch returns the input
        return clone(x)
    return Sign.apply(x)


class Relu(Function):
    compile_rule = Rule(fuses=FLOAT, cheap=True, c="(({0} > 0 || {0} != {0}) ? {0} : {zero})")
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x):
        y = _xp(x).maximum(x, 0)
        ctx.save_for_backward(y)
        return y

    # torch zeroes the gradient where the result is <= 0: a NaN input passes it through
    @staticmethod
    def _grad(y, g):
        return where(le(y, 0), 0.0, g)

    @staticmethod
    def backward(ctx, g):
        return Relu._grad(ctx.saved_tensor(0), g)

    @staticmethod
    def backward_arrays(ctx, g):
        # a select, as backward's where: a nan g stays out where y <= 0. In C: NumPy's where
        # branches per element, ~50% mispredicted on a ReLU's signs (2M floats: 8.6 ms, 1.2
        # ms on a sorted mask; Zen 5)
        y = ctx.saved_array(0)
        got = _c.elementwise("relu_backward", Relu._grad, [y, g])
        return got[0] if got else _xp(y).where(y <= 0, g.dtype.type(0), g)


def relu(x):
    return Relu.apply(x)


class LeakyRelu(Function):
    jvp = staticmethod(elementwise_jvp)

    # selects in C where the kernels run (Relu.backward_arrays says why); `_select` is the
    # formula for Tensors (the kernels' decomposition) and arrays alike
    @staticmethod
    def _select(where, x, a, b):
        return where(x > 0, a, b)

    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        got = _c.elementwise("leaky_relu", lambda x: LeakyRelu._select(where, x, x, x * negative_slope),
                             [x], (negative_slope,))
        return got[0] if got else LeakyRelu._select(_xp(x).where, x, x, x * negative_slope)

    @staticmethod
    def backward(ctx, g):
        x, slope = ctx.saved_tensor(0), ctx.attrs["negative_slope"]
        return LeakyRelu._select(where, x, g, g * slope)

    @staticmethod
    def backward_arrays(ctx, g):
        x, slope = ctx.saved_array(0), ctx.attrs["negative_slope"]
        got = _c.elementwise("leaky_relu_backward", lambda x, g: LeakyRelu._select(where, x, g, g * slope),
                             [x, g], (slope,))
        return got[0] if got else LeakyRelu._select(_xp(x).where, x, g, g * slope)


def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(float_operand(x, "leaky_relu"), negative_slope=float(negative_slope))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBE = 0.044715   # the tanh GELU's c in tanh(sqrt(2/pi) (x + c x^3)): its one spelling
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Gelu(Function):
    compile_rule = Rule(fuses=FLOAT, fuses_if=lambda attrs: attrs.get("approximate") in ("tanh", "none"),
                        alone=True, cheap=True, transcendental=True, in_kernel=True,
                        evaluates=lambda attrs: ("erfc_gelu",) if attrs["approximate"] == "none" else ("tanh_gelu",))
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        xp = _xp(x)
        if approximate == "tanh":
            got = _c.elementwise("gelu_tanh", lambda t: gelu(t, approximate="tanh"), [x])
            if got:
                return got[0]
            if xp is np and x.ndim:
                t = Gelu._tanh_inner(x)
                t += 1.0
                t *= x * 0.5
                return t
            return Gelu._tanh_form(x, xp.tanh).astype(x.dtype, copy=False)
        if ctx.records:   # the slope too, from the same cdf and exp: the backward is g * slope
            got = _c_rows.elementwise("gelu_erf_slope", x)
            if got is not None:
                ctx.save_for_backward(x, got[1])
                return got[0]
        got = _c_rows.elementwise("gelu_erf", x)
        if got is not None:
            return got
        if xp is np:
            return gelu_exact(x)  # one chunked sweep, not five passes over memory
        return (0.5 * x * (1.0 + special_erf(xp, x * _INV_SQRT_2))).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        # the slope as one op (a tape, a captured program and double backward see one
        # function of x, whose rule the compiler reads), its formula `_slope`
        x = ctx.saved_tensor(0)
        return g * (GeluErfSlope.apply(x) if ctx.attrs["approximate"] == "none" else GeluTanhSlope.apply(x))

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        xp = _xp(x)
        if ctx.attrs["approximate"] == "tanh":
            got = _c.elementwise("gelu_tanh_backward",
                                 lambda x, g: g * Gelu._slope(x, "tanh", tanh, erf, exp), [x, g])
            if got:
                return got[0]
        if xp is np and x.ndim and ctx.attrs["approximate"] == "tanh":
            slope = Gelu._tanh_slope(x)
            if getattr(g, "shape", None) == slope.shape and g.dtype == slope.dtype:
                slope *= g
                return slope
            return g * slope
        if ctx.attrs["approximate"] == "none":
            saved = ctx.saved_arrays
            if len(saved) == 2:   # the forward's C kernel's slope, times g on the pool's threads
                got = _c.elementwise("gelu_erf_slope_times", lambda s, g: g * s, [saved[1], g])
                return got[0] if got else g * saved[1]
            got = _c_rows.elementwise("gelu_erf_backward", x, g)
            if got is not None:
                return got
        if xp is np and ctx.attrs["approximate"] == "none":
            slope = gelu_exact_slope(x)
            if getattr(g, "shape", None) == slope.shape and g.dtype == slope.dtype:
                slope *= g  # our own array: no third one
                return slope
            return g * slope
        return g * Gelu._slope(x, ctx.attrs["approximate"], xp.tanh,
                               lambda a: special_erf(xp, a), xp.exp)

    @staticmethod
    def _tanh_arg(x):
        """sqrt(2/pi) (x + c x x x), the tanh GELU's argument of tanh: the one spelling of it,
        for Tensors and arrays alike (the NumPy forward's in-place `_tanh_inner` does these
        operations on these operands, in place)."""
        return _SQRT_2_OVER_PI * (x + _GELU_CUBE * x * x * x)

    @staticmethod
    def _tanh_form(x, tanh):
        """The tanh GELU, x 0.5 (1 + tanh(...)), for Tensors and arrays alike (the tanh
        first: a kernel's ops come in the order of the NumPy forward's)."""
        t = tanh(Gelu._tanh_arg(x))
        return x * 0.5 * (1.0 + t)

    @staticmethod
    def decompose(x, approximate):
        """The GELU in simpler ops, as a compiled kernel computes it (`compile_rule.in_kernel`):
        the tanh form as its NumPy forward's ops (the same tanh as the backward's, so a kernel
        holding both computes it once); the exact one as x cdf(x) with the float64 cdf shared
        with its slope's (`GeluCdf`)."""
        if approximate == "tanh":
            return Gelu._tanh_form(x, tanh)
        return GeluFromCdf.apply(x, GeluCdf.apply(x))

    @staticmethod
    def _tanh_inner(x):
        """tanh(sqrt(2/pi) (x + c x x x)) on a NumPy array in place on one temporary:
        the same operations on the same operands as the expression (IEEE * and + commute
        exactly), so the bits equal the Tensor path's and the compiler's."""
        t = x * _GELU_CUBE
        t *= x
        t *= x
        t += x
        t *= _SQRT_2_OVER_PI
        return np.tanh(t, out=t)

    @staticmethod
    def _tanh_slope(x):
        """_slope's tanh form, operation for operation, on three temporaries instead of ~12."""
        t = Gelu._tanh_inner(x)
        q = t * t
        np.subtract(1.0, q, out=q)
        h = x * 0.5
        h *= q                      # x * 0.5 * (1 - t t)
        np.multiply(x, x, out=q)
        q *= 3 * _GELU_CUBE
        q += 1.0
        q *= _SQRT_2_OVER_PI        # (1 + 3 c x x) sqrt(2/pi)
        h *= q
        t += 1.0
        t *= 0.5
        t += h
        return t

    @staticmethod
    def _slope(x, approximate, tanh, erf, exp):
        """d gelu / dx, written once for Tensors and arrays alike (they share the operators)."""
        if approximate == "tanh":
            x2 = x * x
            # tanh of the forward's very expression, rounded as it rounds there: a compiled
            # forward + backward computes it once (one sweep over x, one tanh per element)
            t = tanh(Gelu._tanh_arg(x))
            return (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * ((1.0 + x2 * (3 * _GELU_CUBE)) * _SQRT_2_OVER_PI)
        cdf = (1.0 + erf(x * _INV_SQRT_2)) * 0.5
        pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
        return cdf + x * pdf


def gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {plain(approximate)!r}")
    return Gelu.apply(float_operand(x, "gelu"), approximate=approximate)


# The GELU's slope as one op each (Gelu.backward records it), and the exact GELU's parts a
# kernel computes: the float64 cdf that gelu(x) and its slope of one x share (`decompose`).
def _gelu_c(fname, suffix32="f"):
    """The C of tt_math.h's `fname`, of its float flavour for float32 (`suffix32`)."""
    return lambda a, ins, t, C: (f"{fname}{suffix32 if ins.inputs[0].dtype.name == 'float32' else ''}"
                                 f"({', '.join(a)})")


def _tanh_array(x, xp):
    """tanh of an array (of array module xp) as the Tanh op computes it."""
    got = _c.elementwise("tanh", tanh, [x])
    return got[0] if got else xp.tanh(x)


class _GeluSlope(Function):
    """A GELU's slope as one op (Gelu.backward records it): one function of x to the compiler
    (its rule names what it evaluates, shared with a gelu(x) beside it in a kernel, where it is
    written as its `decompose` steps), and differentiable again (`_derivative`: the GELU's
    second derivative), in forward mode too."""
    jvp = staticmethod(elementwise_jvp)

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return cls._value(x)

    @classmethod
    def backward(cls, ctx, g):
        return g * cls._derivative(ctx.saved_tensor(0))


def _slope_rule(*evaluates):
    return Rule(fuses=FLOAT, alone=True, transcendental=True, in_kernel=True, evaluates=evaluates)


class GeluErfSlope(_GeluSlope):
    """d gelu(x) / dx of the exact GELU, as eager's NumPy backward computes it (in float64:
    `gelu_exact_slope`); C: tt_gelu_erf_slope[f], erfc(-x c1) / 2 + x pdf."""
    compile_rule = _slope_rule("erfc_gelu", "exp_gelu")
    name = "gelu_erf_slope"

    @staticmethod
    def _value(x):
        xp = _xp(x)
        if xp is np and x.ndim:
            return gelu_exact_slope(x)
        cdf = (1.0 + special_erf(xp, x * _INV_SQRT_2)) * 0.5
        return (cdf + x * (xp.exp(x * x * -0.5) * _INV_SQRT_2PI)).astype(x.dtype, copy=False)

    @staticmethod
    def _derivative(x):
        """gelu''(x) = pdf(x) (2 - x*x)"""
        return (x * x * -0.5).exp() * _INV_SQRT_2PI * (2.0 - x * x)

    @staticmethod
    def decompose(x):
        """In a kernel: cdf(x) + x pdf(x) with the cdf shared with a gelu(x) beside it."""
        return GeluSlopeFromCdf.apply(x, GeluCdf.apply(x))


class GeluTanhSlope(_GeluSlope):
    """d gelu(x) / dx of the tanh GELU (`Gelu._slope`: its tanh the forward's very expression's)."""
    compile_rule = _slope_rule("tanh_gelu")
    name = "gelu_tanh_slope"

    @staticmethod
    def _value(x):
        # `decompose`'s ops on arrays, its tanh the Tanh op's (a C kernel where there is one):
        # a kernel computing the steps, and the interpreter, get these bits
        xp = _xp(x)
        return xp.asarray(Gelu._slope(x, "tanh", lambda a: _tanh_array(a, xp), None, None)).astype(x.dtype)

    @staticmethod
    def _derivative(x):
        # u = sqrt(2/pi) (x + c x^3), t = tanh(u), slope = (1 + t) / 2 + x (1 - t t) u' / 2:
        # its derivative is (1 - t t) (u' - x t u'^2 + x u'' / 2), u'' = sqrt(2/pi) 6 c x
        t = tanh(Gelu._tanh_arg(x))
        du = (1.0 + x * x * (3 * _GELU_CUBE)) * _SQRT_2_OVER_PI
        return (1.0 - t * t) * (du - x * t * du * du + x * x * (3 * _GELU_CUBE * _SQRT_2_OVER_PI))

    @staticmethod
    def decompose(x):
        return Gelu._slope(x, "tanh", tanh, erf, exp)


class GeluCdf(Function):
    """cdf(x) = erfc(-x / sqrt 2) / 2 as float64, for x of either float dtype."""
    compile_rule = Rule(transcendental=True, evaluates=("erfc_gelu",), c=_gelu_c("tt_gelu_cdf", "32"))
    name = "gelu_cdf"

    @staticmethod
    def forward(ctx, x):
        xp = _xp(x)
        z = x.astype(np.float64) * -_INV_SQRT_2
        return special_erfc(xp, z) * 0.5


class GeluFromCdf(Function):
    """x cdf(x), rounded once to x's dtype: the exact GELU (tt_gelu_erf_cdf[f])."""
    compile_rule = Rule(c=_gelu_c("tt_gelu_erf_cdf"))
    name = "gelu_erf_from_cdf"

    @staticmethod
    def forward(ctx, x, cdf):
        return (x.astype(np.float64) * cdf).astype(x.dtype, copy=False)


class GeluSlopeFromCdf(Function):
    """cdf(x) (rounded to x's dtype first) + x pdf(x), rounded once to x's dtype: the exact
    GELU's slope (tt_gelu_erf_slope_cdf[f])."""
    compile_rule = Rule(transcendental=True, evaluates=("exp_gelu",), c=_gelu_c("tt_gelu_erf_slope_cdf"))
    name = "gelu_erf_slope_from_cdf"

    @staticmethod
    def forward(ctx, x, cdf):
        xp = _xp(x)
        xd = x.astype(np.float64)
        cdf = cdf.astype(x.dtype).astype(np.float64)   # rounded first, as tt_gelu_erf_slope_cdff does
        return (cdf + xd * (xp.exp(xd * xd * -0.5) * _INV_SQRT_2PI)).astype(x.dtype, copy=False)


class Softplus(Function):
    compile_rule = Rule(transcendental=True)
    jvp = staticmethod(elementwise_jvp)

    # libm's log1p(exp(-|bx|)) stays NumPy's (the C kernels have no log1p); the rest, NumPy's
    # five passes around it, is one C kernel where the kernels run, the same bits
    @staticmethod
    def _value(where, maximum, x, log1p_exp, beta, threshold):
        bx = x * beta
        return where(bx > threshold, x, (maximum(bx, 0.0) + log1p_exp) / beta)

    @staticmethod
    def forward(ctx, x, beta, threshold):
        ctx.save_for_backward(x)
        xp = _xp(x)
        e = xp.log1p(xp.exp(-xp.abs(x * beta)))
        got = _c.elementwise("softplus", lambda x, e: Softplus._value(where, maximum, x, e, beta, threshold),
                             [x, e], (beta, threshold))
        return got[0] if got else Softplus._value(xp.where, xp.maximum, x, e, beta, threshold).astype(
            x.dtype, copy=False)

    @staticmethod
    def _grad(x, g, beta, threshold):
        bx = x * beta
        return where(gt(bx, threshold), g, g * sigmoid(bx))

    @staticmethod
    def backward(ctx, g):
        return Softplus._grad(ctx.saved_tensor(0), g, ctx.attrs["beta"], ctx.attrs["threshold"])

    @staticmethod
    def backward_arrays(ctx, g):
        # in C where the kernels run: one fused pass on the pool's threads for NumPy's seven;
        # its sigmoid is the sigmoid op's C (not NumPy's to the bit: a tolerance, as that op's)
        x = ctx.saved_array(0)
        beta, threshold = ctx.attrs["beta"], ctx.attrs["threshold"]
        got = _c.elementwise("softplus_backward", lambda x, g: Softplus._grad(x, g, beta, threshold), [x, g],
                             (beta, threshold))
        if got:
            return got[0]
        xp = _xp(x)
        bx = x * beta
        return xp.where(bx > threshold, g, g * _sigmoid(xp, bx))


def softplus(x, beta=1.0, threshold=20.0):
    return Softplus.apply(float_operand(x, "softplus"), beta=float(beta), threshold=float(threshold))



class _BySlope:
    """backward = g * slope(x, m) of the saved input x, the slope written once: m is
    `tensor_math` (tinytensor ops: differentiable again) in backward, `array_math(xp)` in
    backward_arrays (first order). A mixin before Function."""

    @classmethod
    def backward(cls, ctx, g):
        return g * cls._slope(ctx.saved_tensor(0), cls.tensor_math)

    @classmethod
    def backward_arrays(cls, ctx, g):
        x = ctx.saved_array(0)
        return g * cls._slope(x, cls.array_math(_xp(x)))


class Softsign(_BySlope, Function):
    """softsign(x) = x / (1 + |x|); its slope 1 / (1 + |x|)^2 in terms of an `abs`."""
    jvp = staticmethod(elementwise_jvp)
    tensor_math, array_math = staticmethod(absolute), staticmethod(lambda xp: xp.abs)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / (1.0 + _xp(x).abs(x))

    @staticmethod
    def _slope(x, abs):
        d = 1.0 + abs(x)
        # + 0 * x: NaN at inf and NaN, where torch's composite x / (1 + |x|) has inf / inf
        return 1.0 / (d * d) + x * 0.0


def softsign(x):
    return Softsign.apply(float_operand(x, "softsign"))


# ---------------------------------------------------------------- min/max/clamp/where
class _SavedOperands:
    """An elementwise op of a and b that saves both: forward is NumPy's (CuPy's) `np_name`.
    A mixin before Function (as math_functions' _Unary), so that it is no op itself."""
    jvp = staticmethod(elementwise_jvp)
    np_name = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return getattr(_xp(a), cls.np_name)(a, b)


class _Extreme(_SavedOperands):
    """maximum / minimum of a and b: the gradient goes to the winner, ties split it."""

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        below, above = lt(a, b), gt(a, b)
        losers = (below, above) if cls.np_name == "maximum" else (above, below)   # a's, b's
        return _split_ties(g, *losers, eq(a, b), ctx.needs_input_grad)

    @classmethod
    def backward_arrays(cls, ctx, g):
        a, b = ctx.saved_arrays
        below, above = a < b, a > b
        losers = (below, above) if cls.np_name == "maximum" else (above, below)
        return _split_ties_arrays(g, *losers, a == b, ctx.needs_input_grad)


class Maximum(_Extreme, Function):
    compile_rule = Rule(fuses=FLOAT, c="(({0} > {1} || {0} != {0}) ? {0} : {1})")
    np_name = "maximum"


class Minimum(_Extreme, Function):
    compile_rule = Rule(fuses=FLOAT, c="(({0} < {1} || {0} != {0}) ? {0} : {1})")
    np_name = "minimum"


def _split_ties(g, a_loses, b_loses, tie, needs):
    # like PyTorch: the loser gets nothing, ties split the gradient in half, and where a NaN
    # makes every comparison false (the result is NaN) both operands get all of it
    half = g * 0.5
    ga = where(a_loses, 0.0, where(tie, half, g)) if needs[0] else None
    gb = where(b_loses, 0.0, where(tie, half, g)) if needs[1] else None
    return ga, gb


def _split_ties_arrays(g, a_loses, b_loses, tie, needs):
    xp, half = _xp(g), g * 0.5
    ga = xp.where(a_loses, 0.0, xp.where(tie, half, g)).astype(g.dtype, copy=False) if needs[0] else None
    gb = xp.where(b_loses, 0.0, xp.where(tie, half, g)).astype(g.dtype, copy=False) if needs[1] else None
    return ga, gb


def maximum(a, b):
    a, b = binary_operands(a, b, "maximum")
    return Maximum.apply(a, b)


def minimum(a, b):
    a, b = binary_operands(a, b, "minimum")
    return Minimum.apply(a, b)


class ClampScalar(Function):
    name = "clamp"
    jvp = staticmethod(elementwise_jvp)

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

    @staticmethod
    def backward_arrays(ctx, g):
        x = ctx.saved_array(0)
        lo, hi = ctx.attrs["min"], ctx.attrs["max"]
        keep = True
        if lo is not None:
            keep = x >= lo
        if hi is not None:
            keep = keep & (x <= hi)
        return g * keep


def cast_to(t, dt):
    return t if t.dtype is dt else cast(t, dt)


class ClampTensor(Function):
    """clamp with one tensor bound: NumPy's maximum/minimum propagate a NaN bound as torch's
    clamp does; the gradients are torch's masks (x's where x >= min, the bound's where x <
    min), written in ops so that they differentiate again."""
    name = "clamp"
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x, bound, has_min):
        ctx.save_for_backward(x, bound)
        xp = _xp(x)
        return (xp.maximum if has_min else xp.minimum)(x, bound).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, bound = ctx.saved_tensors
        inside = ge(x, bound) if ctx.attrs["has_min"] else le(x, bound)
        beyond = lt(x, bound) if ctx.attrs["has_min"] else gt(x, bound)
        nx, nb = ctx.needs_input_grad
        return (where(inside, g, 0.0) if nx else None), (where(beyond, g, 0.0) if nb else None)


class ClampTensor2(Function):
    """clamp with both bounds tensors: min(max(x, lo), hi) (so lo > hi gives hi, and a NaN
    bound gives NaN), and torch's gradient masks: x where lo <= x <= hi, lo where x < lo <
    hi, hi where x > hi or hi < lo."""
    name = "clamp"
    jvp = staticmethod(elementwise_jvp)

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x, lo, hi)
        xp = _xp(x)
        return xp.minimum(xp.maximum(x, lo), hi).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        nx, nlo, nhi = ctx.needs_input_grad
        gx = where(logical_and(ge(x, lo), le(x, hi)), g, 0.0) if nx else None
        glo = where(logical_and(lt(x, lo), lt(lo, hi)), g, 0.0) if nlo else None
        ghi = where(logical_or(gt(x, hi), lt(hi, lo)), g, 0.0) if nhi else None
        return gx, glo, ghi


def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    dt = result_type(x, *(v for v in (min, max) if v is not None))
    if dt is not x.dtype:  # clamp(int_tensor, 0.5) is a float tensor, as in torch
        x = cast(x, dt)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        lo = None if min is None else cast_to(as_tensor_like(min, x, dt), dt)
        hi = None if max is None else cast_to(as_tensor_like(max, x, dt), dt)
        if lo is None:
            return ClampTensor.apply(x, hi, has_min=False)
        if hi is None:
            return ClampTensor.apply(x, lo, has_min=True)
        return ClampTensor2.apply(x, lo, hi)
    return ClampScalar.apply(x, min=min, max=max)


class Where(Function):
    compile_rule = Rule(fuses=ANY, cheap=True, c="({0} ? {1} : {2})")
    jvp = staticmethod(elementwise_jvp)

    # In C where the kernels run (a same-shape contiguous bool cond, float operands of its
    # shape or a 0-d one, as masked_fill's value), bit for bit NumPy's select: NumPy's where
    # branches per element and mispredicts half of a random mask (2M floats, Zen 5: 8.6 ms,
    # 1.2 ms on a sorted mask)
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        got = None
        if type(a) is np.ndarray and type(b) is np.ndarray and type(cond) is np.ndarray:
            if a.shape != b.shape and (a.shape == () or b.shape == ()) and cond.shape == (b if a.shape == () else a).shape:
                # a 0-d operand (masked_fill's value) laid out at the other's shape (its bytes,
                # a nan's payload too): one kernel for every value, where a constant of the
                # kernel would build one per value (a value computed each step: one per step)
                if a.shape == ():
                    a = np.full(b.shape, a, a.dtype) if b.size >= _c.MIN_ELEMENTS else a
                else:
                    b = np.full(a.shape, b, b.dtype) if a.size >= _c.MIN_ELEMENTS else b
            if a.shape == b.shape:
                got = _c.elementwise("where", where, [a, b], cond=cond)
        return got[0] if got else _xp(a).where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        zero = as_tensor_like(0, g)
        return (None,
                Where.apply(cond, g, zero) if na else None,
                Where.apply(cond, zero, g) if nb else None)

    @staticmethod
    def backward_arrays(ctx, g):
        cond = ctx.saved_array(0)
        _, na, nb = ctx.needs_input_grad
        if na or nb:   # in C as the forward (one pass for both gradients)
            got = _c.elementwise("where_backward" + "_a" * na + "_b" * nb,
                                 lambda c, g: tuple(t for t in Where._grads(where, c, g, 0.0, na, nb) if t is not None),
                                 [g], cond=cond)
            if got:
                return None, got[0] if na else None, got[-1] if nb else None
        xp, zero = _xp(g), g.dtype.type(0)
        return None, *Where._grads(xp.where, cond, g, zero, na, nb)

    @staticmethod
    def _grads(where, cond, g, zero, na, nb):
        return where(cond, g, zero) if na else None, where(cond, zero, g) if nb else None


def where(cond, a, b):
    if not isinstance(cond, Tensor):
        raise TypeError("where: condition must be a bool Tensor")
    if cond.data.dtype != np.bool_:
        cond = cast(cond, bool_)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        dt = result_type(a, b)
        a = as_tensor_like(a, cond, dt)
    a, b = binary_operands(a, b, "where")
    return Where.apply(cond, a, b)


# ---------------------------------------------------------------- comparisons and logic
class _Predicate(Function):
    """A bool-valued op: no gradient flows through it."""
    jvp = staticmethod(zero_jvp)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) * len(ctx.edges)


class _NumpyPredicate(_Predicate):
    """NumPy's (or CuPy's) function `np_name` of the input arrays."""
    np_name = None

    @classmethod
    def forward(cls, ctx, *arrays):
        return getattr(_xp(arrays[0]), cls.np_name)(*arrays)


def _predicates(base, *rows):
    """One class of `base` per row: (class name, NumPy function, the dtypes a kernel computes
    it for, its C expression in a kernel or None). They have no gradient and no arithmetic."""
    return [type(name, (base,), {"__module__": __name__, "np_name": np_name,
                                 "compile_rule": Rule(fuses=fuses, c=c, flops=0)})
            for name, np_name, fuses, c in rows]


def _named(fn, op):
    """`fn` under the public name `op`, as a def would have it (help(), tracebacks)."""
    fn.__name__ = fn.__qualname__ = op
    return fn


def _unary(call, op):
    return _named(lambda x: call(x), op)


def _binary(call, op):
    return _named(lambda a, b: call(a, b), op)


def _on_operands(c):
    """The public function of class c: c on its operands brought to one dtype and device."""
    return _named(lambda a, b: c.apply(*binary_operands(a, b, c.name)), c.name)


Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, LogicalNot = _predicates(
    _NumpyPredicate,
    ("Eq", "equal", ANY, "({0} == {1})"),
    ("Ne", "not_equal", ANY, "({0} != {1})"),
    ("Lt", "less", ANY, "({0} < {1})"),
    ("Le", "less_equal", ANY, "({0} <= {1})"),
    ("Gt", "greater", ANY, "({0} > {1})"),
    ("Ge", "greater_equal", ANY, "({0} >= {1})"),
    ("LogicalAnd", "logical_and", FLOAT_OR_BOOL, "(({0} != 0) & ({1} != 0))"),
    ("LogicalOr", "logical_or", FLOAT_OR_BOOL, "(({0} != 0) | ({1} != 0))"),
    ("LogicalXor", "logical_xor", FLOAT_OR_BOOL, "(({0} != 0) ^ ({1} != 0))"),
    ("LogicalNot", "logical_not", FLOAT_OR_BOOL, "({0} == 0)"))
Isfinite, Isnan, Isinf = _predicates(_NumpyPredicate, ("Isfinite", "isfinite", (), None),
                                     ("Isnan", "isnan", (), None), ("Isinf", "isinf", (), None))

eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor = map(
    _on_operands, (Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor))
logical_not, isfinite, isnan, isinf = (_unary(c.apply, c.name)
                                       for c in (LogicalNot, Isfinite, Isnan, Isinf))


class _Bitwise(_NumpyPredicate):
    """Bitwise ops on integer and bool tensors (logical on bool), as torch's &, |, ^, ~."""

    @classmethod
    def call(cls, *args):
        for t in args:
            if isinstance(t, Tensor) and t.data.dtype.kind not in "biu":
                raise TypeError(f"{cls.name}: only integer and bool tensors are supported, got "
                                f"{t.dtype.name}")
        if len(args) == 1:
            return cls.apply(*args)
        return cls.apply(*cls._integer_operands(*args))

    @classmethod
    def _integer_operands(cls, *args):
        a, b = binary_operands(*args, cls.name)
        if a.data.dtype.kind not in "biu":   # a float Python number beside an integer tensor
            names = (v.dtype.name if isinstance(v, Tensor) else type(v).__name__ for v in args)
            raise TypeError(f"{cls.name}: only integer and bool operands are supported, got "
                            f"{' and '.join(names)}")
        return a, b


BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot = _predicates(
    _Bitwise, ("BitwiseAnd", "bitwise_and", BOOL, "({0} & {1})"),
    ("BitwiseOr", "bitwise_or", BOOL, "({0} | {1})"),
    ("BitwiseXor", "bitwise_xor", BOOL, "({0} ^ {1})"), ("BitwiseNot", "invert", BOOL, "({0} ^ 1)"))
bitwise_and, bitwise_or, bitwise_xor = (_binary(c.call, c.name)
                                        for c in (BitwiseAnd, BitwiseOr, BitwiseXor))
bitwise_not = _unary(BitwiseNot.call, "bitwise_not")


class _Shift(_Bitwise):
    """`<<` and `>>` with torch's answer where C leaves it undefined: a shift by a negative
    amount or by the bit width or more gives 0 (left) or the sign fill (right), on CPU and
    GPU alike rather than whatever the hardware's shift instruction does."""

    @classmethod
    def call(cls, a, b):
        for t in (a, b):
            if isinstance(t, Tensor) and t.data.dtype.kind not in "biu":
                raise TypeError(f"{cls.name}: only integer tensors are supported, got {t.dtype.name}")
        a, b = cls._integer_operands(a, b)
        if a.data.dtype.kind == "b":
            raise TypeError(f"{cls.name}: bool operands are not supported (as in torch); "
                            "cast them to an integer dtype first")
        return cls.apply(a, b)

    @staticmethod
    def _out_of_range(a, b):
        bits = 8 * a.dtype.itemsize
        return (b >= bits) | (b < 0) if a.dtype.kind == "i" else b >= bits


class BitwiseLeftShift(_Shift):
    @staticmethod
    def forward(ctx, a, b):
        xp = _xp(a)
        over = _Shift._out_of_range(a, b)
        return xp.where(over, a.dtype.type(0), xp.left_shift(a, xp.where(over, 0, b).astype(a.dtype)))


class BitwiseRightShift(_Shift):
    @staticmethod
    def forward(ctx, a, b):
        xp = _xp(a)
        over = _Shift._out_of_range(a, b)
        if a.dtype.kind == "i":  # shifting by bits - 1 is the sign fill
            return xp.right_shift(a, xp.where(over, 8 * a.dtype.itemsize - 1, b).astype(a.dtype))
        return xp.where(over, a.dtype.type(0), xp.right_shift(a, xp.where(over, 0, b).astype(a.dtype)))


def bitwise_left_shift(a, b):
    return BitwiseLeftShift.call(a, b)


def bitwise_right_shift(a, b):
    return BitwiseRightShift.call(a, b)


class ViewDtype(_Predicate):
    """`Tensor.view(dtype)`: the same bytes read as another dtype. Bits carry no gradient,
    so, as in torch, the result does not require grad."""
    is_view = True

    @staticmethod
    def forward(ctx, x, dtype):
        if dtype.itemsize != x.dtype.itemsize:  # NumPy splits or joins along a contiguous last axis
            x = _xp(x).ascontiguousarray(x)
        return x.view(dtype.np)


def view_dtype(x, dtype):
    dtype = from_any(dtype)
    if dtype is x.dtype:
        return x.reshape(x.shape)  # an alias, as torch's; it keeps the gradient
    old, new = x.dtype.itemsize, dtype.itemsize
    if old != new:
        what = (f"view: cannot view a {x.dtype.name} tensor of shape {tuple(x.shape)} as "
                f"{dtype.name} ({old} vs {new} bytes per element)")
        if x.ndim == 0:
            raise RuntimeError(f"{what}: a 0-d tensor cannot change its element size")
        if new > old and x.shape[-1] % (new // old):
            raise RuntimeError(f"{what}: the last dimension ({x.shape[-1]}) must be divisible "
                               f"by {new // old}")
    return ViewDtype.apply(x.detach() if x.requires_grad else x, dtype=dtype)


# ---------------------------------------------------------------- remainder
class Remainder(_SavedOperands, Function):
    """a - floor(a / b) * b, with the sign of b (Python's and torch's `%`)."""
    np_name = "remainder"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        # the quotient is piecewise constant, so it enters the gradient as a constant (a
        # recorded op, which a compiled backward recomputes). It is torch's floor division
        # (from fmod, as Python's //), not floor(a / b): a / b can round up onto an integer
        quotient = RoundedDiv.apply(a, b, mode="floor") if nb else None
        return (g if na else None), (-(g * quotient) if nb else None)

    @staticmethod
    def backward_arrays(ctx, g):
        a, b = ctx.saved_arrays
        na, nb = ctx.needs_input_grad
        return (g if na else None), (-(g * _xp(a).floor_divide(a, b)) if nb else None)


def remainder(a, b):
    a, b = binary_operands(a, b, "remainder")
    return Remainder.apply(a, b)


# ---------------------------------------------------------------- rounding
class _Rounding(Function):
    """A piecewise-constant op: its gradient is zero almost everywhere (as in torch)."""
    jvp = staticmethod(zero_jvp)

    @classmethod
    def call(cls, x):
        if x.data.dtype.kind in "biu":
            return x  # integers are already whole (complex goes on, to be refused by name)
        return cls.apply(x)

    @staticmethod
    def backward(ctx, g):
        return mul(g, 0.0)

    @staticmethod
    def backward_arrays(ctx, g):
        return g * 0.0


class _NumpyRounding:
    """forward: NumPy's (CuPy's) rounding function `np_name` of x; a mixin before _Rounding."""
    @classmethod
    def forward(cls, ctx, x):
        return getattr(_xp(x), cls.np_name)(x)


class Floor(_NumpyRounding, _Rounding):
    np_name = "floor"


class Ceil(_NumpyRounding, _Rounding):
    np_name = "ceil"


class Trunc(_NumpyRounding, _Rounding):
    np_name = "trunc"


class Round(_NumpyRounding, _Rounding):
    np_name = "round"   # half to even, like torch.round


floor, ceil, trunc = (_unary(c.call, c.name) for c in (Floor, Ceil, Trunc))


class RoundDecimals(_Rounding):
    """round(x, decimals=d) as torch computes it: rint(x * 10**d) / 10**d, or for d < 0
    rint(x / 10**-d) * 10**-d, with the power in x's dtype (so 0.125 -> 0.12, half to even)."""
    name = "round"

    @staticmethod
    def forward(ctx, x, decimals):
        xp, ten_pow = _xp(x), x.dtype.type(10.0 ** abs(decimals))
        if decimals < 0:
            return xp.rint(x / ten_pow) * ten_pow
        return xp.rint(x * ten_pow) / ten_pow


def round_half_even(x, *, decimals=0):
    if decimals == 0:
        return Round.call(x)
    if not is_floating_np(x.data.dtype):
        raise TypeError(f"round: decimals={plain(decimals)} is supported for floating-point "
                        f"tensors only (as in torch), got {x.dtype.name}")
    return RoundDecimals.apply(x, decimals=int(decimals))

