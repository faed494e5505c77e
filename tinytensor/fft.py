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


# ---------------------------------------------------------------- the three recorded ops
class C2C(Function):
    name = "fft_c2c"
    complex_rule = "own"

    @staticmethod
    def forward(ctx, x, axes, inverse, scale):
        xp = _xp(x)
        out = (xp.fft.ifftn(x, axes=axes, norm="forward") if inverse
               else xp.fft.fftn(x, axes=axes, norm="backward"))
        out = _cast_result(out, x.dtype)
        if scale != 1:
            out *= out.real.dtype.type(scale)
        return out

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        return C2C.apply(g, axes=a["axes"], inverse=not a["inverse"], scale=a["scale"])

    @staticmethod
    def jvp(ctx, t):   # (real-)linear: the transform of the tangent
        return C2C.apply(t, **ctx.attrs)


class R2C(Function):
    name = "fft_r2c"
    complex_rule = "own"

    @staticmethod
    def forward(ctx, x, axis, scale):
        xp = _xp(x)
        out = _cast_result(xp.fft.rfft(x, axis=axis, norm="backward"), x.dtype)
        if scale != 1:
            out *= out.real.dtype.type(scale)
        return out

    @staticmethod
    def backward(ctx, g):
        axis, n = ctx.attrs["axis"], ctx.in_meta[0][0][ctx.attrs["axis"]]
        full = _resize(g, axis, n)   # the half spectrum, zero-padded to n
        return _real(C2C.apply(full, axes=(axis,), inverse=True, scale=ctx.attrs["scale"]))

    @staticmethod
    def jvp(ctx, t):   # (real-)linear: the transform of the tangent
        return R2C.apply(t, **ctx.attrs)


class C2R(Function):
    name = "fft_c2r"
    complex_rule = "own"

    @staticmethod
    def forward(ctx, x, axis, n, scale):
        xp = _xp(x)
        out = xp.fft.irfft(x, n=n, axis=axis, norm="forward")
        want = np.float32 if x.dtype == np.complex64 else np.float64
        out = out if out.dtype == want else out.astype(want)
        if scale != 1:
            out *= out.dtype.type(scale)
        return out

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

    @staticmethod
    def jvp(ctx, t):   # (real-)linear: the transform of the tangent
        return C2R.apply(t, **ctx.attrs)


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
def _c2c(x, s, dims, norm, inverse, op):
    _check(x, op)
    x = _as_complex(x)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expects a tensor with at least one dimension, got a 0-d tensor")
    s = tuple(x.shape[d] for d in dims) if s is None else s
    for d, n in zip(dims, s):
        x = _resize(x, d, _positive(n, op))
    scale = _norm_scale(norm, _numel(s), not inverse, op)
    return C2C.apply(x, axes=dims, inverse=inverse, scale=scale)


def _r2c(x, s, dims, norm, forward, op):
    """rfftn (forward) or ihfftn (the conjugate of the inverse): real in, half spectrum out."""
    _check(x, op)
    x = _as_real(x, op)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expects a tensor with at least one dimension, got a 0-d tensor")
    s = tuple(x.shape[d] for d in dims) if s is None else s
    for d, n in zip(dims, s):
        x = _resize(x, d, _positive(n, op))
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
    _check(x, op)
    x = _as_complex(x)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expects a tensor with at least one dimension, got a 0-d tensor")
    if s is None:
        s = tuple(x.shape[d] for d in dims[:-1]) + (2 * (x.shape[dims[-1]] - 1),)
    last = _positive(s[-1], op)
    for d, n in zip(dims[:-1], s[:-1]):
        x = _resize(x, d, _positive(n, op))
    x = _resize(x, dims[-1], last // 2 + 1)
    if forward:
        from .ops.complex import conj
        x = conj(x)
    scale = _norm_scale(norm, _numel(s), forward, op)
    if len(dims) > 1:
        x = C2C.apply(x, axes=dims[:-1], inverse=True, scale=1.0)
    return C2R.apply(x, axis=dims[-1], n=last, scale=scale)


def _one(dim):
    return (dim,)


def fft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "fft")
    return _c2c(input, s, dims, norm, False, "fft")


def ifft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "ifft")
    return _c2c(input, s, dims, norm, True, "ifft")


def rfft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "rfft")
    return _r2c(input, s, dims, norm, True, "rfft")


def ihfft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "ihfft")
    return _r2c(input, s, dims, norm, False, "ihfft")


def irfft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "irfft")
    return _c2r(input, s, dims, norm, False, "irfft")


def hfft(input, n=None, dim=-1, norm=None):
    s, dims = _dims(input, None if n is None else (n,), _one(dim), "hfft")
    return _c2r(input, s, dims, norm, True, "hfft")


def fftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "fftn")
    return _c2c(input, s, dims, norm, False, "fftn")


def ifftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "ifftn")
    return _c2c(input, s, dims, norm, True, "ifftn")


def rfftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "rfftn")
    return _r2c(input, s, dims, norm, True, "rfftn")


def ihfftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "ihfftn")
    return _r2c(input, s, dims, norm, False, "ihfftn")


def irfftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "irfftn")
    return _c2r(input, s, dims, norm, False, "irfftn")


def hfftn(input, s=None, dim=None, norm=None):
    s, dims = _dims(input, s, dim, "hfftn")
    return _c2r(input, s, dims, norm, True, "hfftn")


def fft2(input, s=None, dim=(-2, -1), norm=None):
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    return irfftn(input, s, dim, norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    return ihfftn(input, s, dim, norm)


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
