"""`tt.fft`: discrete Fourier transforms with torch.fft's names, arguments and gradients
(issue 23).

Three recorded ops do all the work, each the adjoint of another, so every gradient (and a
gradient of a gradient) is one of them again:

    C2C(x, axes, inverse, scale)  complex -> complex   scale * sum x e^(-+2 pi i k n / N)
    R2C(x, axis, scale)           real -> complex      the first n//2 + 1 entries of C2C
    C2R(x, axis, n, scale)        complex -> real      the inverse C2C of the Hermitian
                                                       signal whose first half x is

With torch's convention (x.grad = dL/dRe + i dL/dIm) the gradient of C2C is C2C in the
other direction with the same scale (the DFT matrix's conjugate transpose), that of R2C
the real part of C2C^-1 of the zero-padded half spectrum, and that of C2R (torch's
`fft_c2r_backward`) R2C of the gradient with the entries that stand for two conjugate
frequencies doubled. The n=/s= arguments resize the input by zero padding or trimming
(recorded cat and slicing); norm= sets `scale` ("backward": none on the forward
transform and 1/N on the inverse, "forward" the other way round, "ortho" 1/sqrt(N) both).
Computed by NumPy's (or CuPy's) pocketfft in the input's precision; complex64 results
come from complex64 inputs as in torch.
"""
import math

import numpy as np

from .core.function import Function
from .core.forward_ad import linear_jvp
from .core.primitives import cast
from .core.tensor import Tensor
from .dtypes import float32, float64, get_default_dtype
from .messages import plain
from .device import xp_of as _xp

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
           "fftshift", "ifftshift", "fftfreq", "rfftfreq"]


def _cast_result(out, like):
    """pocketfft computes float32 in float32 but NumPy < 2 widened; keep the input's precision."""
    want = np.complex64 if like in (np.float32, np.complex64) else np.complex128
    return out if out.dtype == want else out.astype(want)


def _scaled(out, scale):
    if scale != 1:
        out *= out.real.dtype.type(scale)
    return out


# ---------------------------------------------------------------- the three recorded ops
class _Transform(Function):
    complex_rule = "own"
    jvp = staticmethod(linear_jvp)   # (real-)linear: the transform of the tangent


class C2C(_Transform):
    name = "fft_c2c"

    @staticmethod
    def forward(ctx, x, axes, inverse, scale):
        xp = _xp(x)
        out = (xp.fft.ifftn(x, axes=axes, norm="forward") if inverse
               else xp.fft.fftn(x, axes=axes, norm="backward"))
        return _scaled(_cast_result(out, x.dtype), scale)

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        return C2C.apply(g, axes=a["axes"], inverse=not a["inverse"], scale=a["scale"])


class R2C(_Transform):
    name = "fft_r2c"

    @staticmethod
    def forward(ctx, x, axis, scale):
        return _scaled(_cast_result(_xp(x).fft.rfft(x, axis=axis, norm="backward"), x.dtype), scale)

    @staticmethod
    def backward(ctx, g):
        axis, n = ctx.attrs["axis"], ctx.in_meta[0][0][ctx.attrs["axis"]]
        full = _resize(g, axis, n)   # the half spectrum, zero-padded to n
        return _real(C2C.apply(full, axes=(axis,), inverse=True, scale=ctx.attrs["scale"]))


class C2R(_Transform):
    name = "fft_c2r"

    @staticmethod
    def forward(ctx, x, axis, n, scale):
        xp = _xp(x)
        out = xp.fft.irfft(x, n=n, axis=axis, norm="forward")
        want = np.float32 if x.dtype == np.complex64 else np.float64
        return _scaled(out if out.dtype == want else out.astype(want), scale)

    @staticmethod
    def backward(ctx, g):
        axis, n = ctx.attrs["axis"], ctx.attrs["n"]
        gi = R2C.apply(g, axis=axis, scale=ctx.attrs["scale"])
        m = gi.shape[axis]
        doubled = n - m   # entries 1 .. n - m stand for two conjugate frequencies each
        if doubled <= 0:
            return gi
        w = np.ones(m)
        w[1:1 + doubled] = 2.0
        shape = [1] * gi.ndim
        shape[axis] = m
        from .creation import tensor
        return gi * tensor(w.reshape(shape), dtype=g.dtype, device=g.device)   # a constant of sizes


def _real(z):
    from .ops.complex import real
    return real(z)


# ---------------------------------------------------------------- argument handling
def _norm_scale(norm, n, forward, op):
    if norm is None or norm == "backward":
        return 1.0 if forward else 1.0 / n
    if norm == "forward":
        return 1.0 / n if forward else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    raise ValueError(f"{op}: invalid normalization mode {plain(norm)!r}; expected \"backward\", "
                     "\"forward\" or \"ortho\"")


def _check(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def _as_complex(x):
    if x.dtype.is_complex:
        return x
    if x.dtype.category < 2:
        x = cast(x, get_default_dtype())
    return cast(x, x.dtype.to_complex())


def _as_real(x, op):
    if x.dtype.is_complex:
        raise RuntimeError(f"{op}: expects a real input tensor, but got {x.dtype.name} "
                           f"{tuple(x.shape)}")
    if x.dtype not in (float32, float64):
        x = cast(x, float32 if x.dtype.category < 2 or x.dtype.itemsize < 4 else float64)
    return x


def _resize(x, axis, n):
    """x along `axis` trimmed or zero-padded to n entries (torch's n=/s=)."""
    size = x.shape[axis]
    if size == n:
        return x
    if size > n:
        key = [slice(None)] * x.ndim
        key[axis] = slice(0, n)
        return x[tuple(key)]
    from .creation import zeros
    from .ops.movement import cat
    shape = list(x.shape)
    shape[axis] = n - size
    return cat([x, zeros(*shape, dtype=x.dtype, device=x.device)], axis)


def _dims(x, s, dim, op, default_all=True):
    """torch's (s, dim) pair for the n-dimensional transforms: both normalised, same length."""
    if dim is None:
        if s is not None:
            dim = tuple(range(x.ndim - len(s), x.ndim))
        else:
            dim = tuple(range(x.ndim)) if default_all else (-2, -1)
    elif isinstance(dim, int):
        dim = (dim,)
    dims = []
    for d in dim:
        if not -x.ndim <= d < max(x.ndim, 1):
            raise IndexError(f"{op}: dimension {d} is out of range for a tensor of shape "
                             f"{tuple(x.shape)}")
        dims.append(d % x.ndim)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: dims must be unique, got {tuple(dim)}")
    if s is not None:
        s = (s,) if isinstance(s, int) else tuple(s)
        if len(s) != len(dims):
            raise RuntimeError(f"{op}: s {s} and dim {tuple(dim)} have different lengths")
        s = tuple(x.shape[d] if n == -1 else n for d, n in zip(dims, s))
    if not dims:
        raise RuntimeError(f"{op}: needs at least one dimension to transform")
    return s, tuple(dims)


def _positive(n, op):
    if n < 1:
        raise RuntimeError(f"{op}: invalid number of data points ({n}) specified")
    return n


def _numel(sizes):
    out = 1
    for n in sizes:
        out *= n
    return out


# ---------------------------------------------------------------- the transforms
def _operand(x, op, real):
    """x checked, as a real (real=True) or complex tensor of at least one dimension."""
    _check(x, op)
    x = _as_real(x, op) if real else _as_complex(x)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expects a tensor with at least one dimension, got a 0-d tensor")
    return x


def _resized(x, dims, s, op):
    for d, n in zip(dims, s):
        x = _resize(x, d, _positive(n, op))
    return x


def _c2c(x, s, dims, norm, inverse, op):
    x = _operand(x, op, real=False)
    s = tuple(x.shape[d] for d in dims) if s is None else s
    x = _resized(x, dims, s, op)
    scale = _norm_scale(norm, _numel(s), not inverse, op)
    return C2C.apply(x, axes=dims, inverse=inverse, scale=scale)


def _r2c(x, s, dims, norm, forward, op):
    """rfftn (forward) or ihfftn (the conjugate of the inverse): real in, half spectrum out."""
    x = _operand(x, op, real=True)
    s = tuple(x.shape[d] for d in dims) if s is None else s
    x = _resized(x, dims, s, op)
    scale = _norm_scale(norm, _numel(s), forward, op)
    out = R2C.apply(x, axis=dims[-1], scale=1.0 if len(dims) > 1 else scale)
    if len(dims) > 1:
        out = C2C.apply(out, axes=dims[:-1], inverse=False, scale=scale)
    if not forward:
        from .ops.complex import conj
        out = conj(out)
    return out


def _c2r(x, s, dims, norm, forward, op):
    """irfftn (inverse) or hfftn (forward, of the conjugate): half spectrum in, real out."""
    x = _operand(x, op, real=False)
    if s is None:
        s = tuple(x.shape[d] for d in dims[:-1]) + (2 * (x.shape[dims[-1]] - 1),)
    last = _positive(s[-1], op)
    x = _resize(_resized(x, dims[:-1], s[:-1], op), dims[-1], last // 2 + 1)
    if forward:
        from .ops.complex import conj
        x = conj(x)
    scale = _norm_scale(norm, _numel(s), forward, op)
    if len(dims) > 1:
        x = C2C.apply(x, axes=dims[:-1], inverse=True, scale=1.0)
    return C2R.apply(x, axis=dims[-1], n=last, scale=scale)


# The public transforms, made from one table: each is `kind` (_c2c, _r2c or _c2r) with its
# flag (inverse, or forward for the real ones) over one dim, n dims, or the last two.
def _named(fn, op):
    fn.__name__ = fn.__qualname__ = op
    return fn


def _over_one(op, kind, flag):
    def transform(input, n=None, dim=-1, norm=None):
        s, dims = _dims(input, None if n is None else (n,), (dim,), op)
        return kind(input, s, dims, norm, flag, op)
    return _named(transform, op)


def _over_n(op, kind, flag):
    def transform(input, s=None, dim=None, norm=None):
        s, dims = _dims(input, s, dim, op)
        return kind(input, s, dims, norm, flag, op)
    return _named(transform, op)


def _over_two(op, transform_n):
    def transform(input, s=None, dim=(-2, -1), norm=None):
        return transform_n(input, s, dim, norm)
    return _named(transform, op)


_KINDS = {"fft": (_c2c, False), "ifft": (_c2c, True), "rfft": (_r2c, True),
          "ihfft": (_r2c, False), "irfft": (_c2r, False), "hfft": (_c2r, True)}
fft, ifft, rfft, ihfft, irfft, hfft = (_over_one(op, *_KINDS[op]) for op in _KINDS)
fftn, ifftn, rfftn, ihfftn, irfftn, hfftn = (_over_n(op + "n", *_KINDS[op]) for op in _KINDS)
fft2, ifft2, rfft2, ihfft2, irfft2, hfft2 = (
    _over_two(op + "2", n) for op, n in zip(_KINDS, (fftn, ifftn, rfftn, ihfftn, irfftn, hfftn)))


# ---------------------------------------------------------------- helpers
def fftshift(input, dim=None):
    """The zero frequency moved to the middle: a roll by n // 2 along each of `dim` (all)."""
    from .ops.movement import roll
    dims = tuple(range(input.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return roll(input, tuple(input.shape[d] // 2 for d in dims), dims)


def ifftshift(input, dim=None):
    """fftshift undone: a roll by -(n // 2)."""
    from .ops.movement import roll
    dims = tuple(range(input.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return roll(input, tuple(-(input.shape[d] // 2) for d in dims), dims)


def _freq_tensor(values, dtype, device, requires_grad, op):
    from .creation import tensor
    from .dtypes import from_any
    dt = get_default_dtype() if dtype is None else from_any(dtype)
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{op}: dtype must be floating or complex, got {dt.name}")
    return tensor(values, dtype=dt, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The sample frequencies of an n-point fft: [0, 1, ..., n//2 - 1 or so, -n//2, ..., -1] / (d n)."""
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)]) if n > 0 else np.zeros(0)
    return _freq_tensor(k / (d * n) if n else k, dtype, device, requires_grad, "fftfreq")


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The sample frequencies of an n-point rfft: [0, 1, ..., n // 2] / (d n)."""
    k = np.arange(0, n // 2 + 1)
    return _freq_tensor(k / (d * n) if n else k.astype(np.float64), dtype, device, requires_grad,
                        "rfftfreq")
