"""Convolutions, N-d once: conv1d/2d/3d and conv_transpose1d/2d/3d are thin wrappers.

A convolution is im2col + matmul: a strided view of the padded input lists every window
without copying (`as_strided`, the same call in NumPy and CuPy), one copy lays the
windows out as columns, and one batched matmul with the weight does the rest (at stride 1,
2-d float32/float64 arrays run kernels/c_conv_shift.py's shifted GEMMs instead where it
takes them: one GEMM per kernel tap on the padded input, no columns). Three
Functions close under differentiation, which is what makes any order of backward work:

    Conv(x, w)            the convolution y
    ConvTranspose(g, w)   dL/dx given g = dL/dy: the adjoint of Conv in x (col2im); it is
                          also conv_transpose, whose weight layout is exactly Conv's
    ConvWeight(x, g)      dL/dw given g = dL/dy

and each one's gradient is one of the others with the roles swapped. All three carry the
same geometry: stride, dilation, groups and `pads`, a (low, high) pair per spatial dim
whose high side is trimmed (or extended) so that the padded extent is exactly what the
windows cover; a negative high pad drops trailing input rows that no window reaches.
"""
import itertools
import math
import numbers
from types import SimpleNamespace

import numpy as np

from ..core.function import Function
from ..amp import cast_inputs
from ..core.tensor import Tensor
from ..dtypes import BF16_NP
from ..kernels import c_conv as _c_conv, c_conv_shift as _shift, c_eager as _c_eager
from ..messages import OpError, plain
from .elementwise import float_operand
from .movement import _where, reshape
from ..device import xp_of as _xp

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


def _error(msg):
    return OpError(msg + _where())  # a ValueError and a RuntimeError, as torch raises


# ---------------------------------------------------------------- array kernels
def _pad(x, pads, value=0.0):
    """x with its last len(pads) dims padded by (low, high); a negative high crops."""
    if all(lo == 0 and hi == 0 for lo, hi in pads):
        return x
    xp = _xp(x)
    n = len(pads)
    spatial = x.shape[-n:]
    out = xp.full(x.shape[:-n] + tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads)),
                  value, dtype=x.dtype)
    dst = tuple(slice(lo, lo + s + min(hi, 0)) for s, (lo, hi) in zip(spatial, pads))
    src = tuple(slice(0, s + min(hi, 0)) for s, (_, hi) in zip(spatial, pads))
    out[(Ellipsis,) + dst] = x[(Ellipsis,) + src]
    return out


def _unpad(xpad, pads, spatial):
    """The inverse crop of _pad: rows that _pad dropped come back as zeros."""
    n = len(pads)
    keep = tuple(slice(lo, lo + s + min(hi, 0)) for s, (lo, hi) in zip(spatial, pads))
    if all(hi >= 0 for _, hi in pads):
        return xpad[(Ellipsis,) + keep]
    out = _xp(xpad).zeros(xpad.shape[:-n] + tuple(spatial), dtype=xpad.dtype)
    out[(Ellipsis,) + tuple(slice(0, s + min(hi, 0)) for s, (_, hi) in zip(spatial, pads))] = \
        xpad[(Ellipsis,) + keep]
    return out


def out_size(spatial, kernel, stride, pads, dilation):
    return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1
                 for s, k, st, (lo, hi), d in zip(spatial, kernel, stride, pads, dilation))


def windows(xpad, kernel, stride, dilation, out):
    """A view (*lead, *out, *kernel) of every window of xpad (*lead, *padded): no copy."""
    n = len(kernel)
    lead, st = xpad.shape[:-n], xpad.strides
    sp = st[-n:]
    return _xp(xpad).lib.stride_tricks.as_strided(
        xpad, lead + tuple(out) + tuple(kernel),
        st[:-n] + tuple(s * k for s, k in zip(sp, stride)) + tuple(s * d for s, d in zip(sp, dilation)))


def _im2col(x, kernel, stride, pads, dilation):
    """(N, C, *kernel, *out) columns, contiguous, and out. 2-d float32/float64 inputs run
    kernels/c_conv.py's threaded C copy, the same bytes."""
    n = len(kernel)
    out = out_size(x.shape[2:], kernel, stride, pads, dilation)
    col = _c_conv.im2col(x, kernel, stride, pads, dilation, out) if isinstance(x, np.ndarray) else None
    if col is not None:
        return col, out
    xpad = _pad(x, pads)
    win = windows(xpad, kernel, stride, dilation, out)
    perm = (0, 1) + tuple(range(2 + n, 2 + 2 * n)) + tuple(range(2, 2 + n))
    return _xp(x).ascontiguousarray(win.transpose(perm)), out


def _col2im(col, spatial, kernel, stride, pads, dilation):
    """The adjoint of _im2col: add each column entry back where it was read from (2-d
    float32/float64: kernels/c_conv.py, the same additions in the same order)."""
    n = len(kernel)
    x = _c_conv.col2im(col, spatial, kernel, stride, pads, dilation) if isinstance(col, np.ndarray) else None
    if x is not None:
        return x
    N, C, out = col.shape[0], col.shape[1], col.shape[2 + n:]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
    xpad = _xp(col).zeros((N, C) + padded, dtype=col.dtype)
    for k in itertools.product(*(range(kk) for kk in kernel)):
        dst = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + stride[i] * (out[i] - 1) + 1, stride[i])
                    for i in range(n))
        xpad[(slice(None), slice(None)) + dst] += col[(slice(None), slice(None)) + k]
    return _unpad(xpad, pads, spatial)


def _matmul(a, b):
    """a @ b, in float32 for bfloat16 (NumPy would widen ml_dtypes values anyway) and NumPy
    float16 (no BLAS: a scalar loop); torch accumulates in float32 too. The callers round the
    result back to the input dtype. At 2+ threads a big one runs as the C pool's gemm job
    (compiler/eager_gemm.py): OpenBLAS's own worker would spin on into the im2col/col2im
    kernels that share its core (a 3x3 conv's step, (8,64,32,32) f32, 2 threads, Zen 5:
    median 18.4 -> 15.4 ms)."""
    if a.dtype == BF16_NP or (a.dtype == np.float16 and isinstance(a, np.ndarray)):
        a, b = a.astype(np.float32), b.astype(np.float32)
    if isinstance(a, np.ndarray):
        got = _c_eager.matmul(a, b)
        if got is not None:
            return got
    return _xp(a).matmul(a, b)


def _one_gemm(N, O, CK, L, groups):
    """Whether the images go through one GEMM, their columns side by side (CK, N*L), rather
    than one GEMM each. One each reads the weight (O, CK) N times and, for the weight's
    gradient, writes N partial (O, CK) products and sums them; one for all costs a copy of
    the columns and of the output or gradient (N*L*(CK + O)). At a deep layer's small
    images the first is far the dearer: ResNet-18's 512->512 3x3 convs on 2x2 images, N=8,
    took 24 ms each in backward (2 threads, Zen 5), the GEMMs' work being 0.3 GFLOP."""
    return groups == 1 and N > 1 and L * (CK + O) < O * CK


def _side_by_side(a, N, rows, L):
    """(N, rows, L) -> (rows, N*L): the images' columns side by side (a copy)."""
    return a.reshape(N, rows, L).transpose(1, 0, 2).reshape(rows, N * L)


def _by_image(a, N, rows, L):
    """The inverse of _side_by_side: (rows, N*L) -> (N, rows, L), contiguous."""
    return _xp(a).ascontiguousarray(a.reshape(rows, N, L).transpose(1, 0, 2))


def _shifted(stride, a):
    """Whether the stride-1 2-d shifted-GEMM kernels may take these (kernels/c_conv_shift.py)."""
    return tuple(stride) == (1, 1) and isinstance(a, np.ndarray)


def conv_arrays(x, w, stride, pads, dilation, groups):
    y = _shift.forward(x, w, pads, dilation, groups) if _shifted(stride, x) else None
    if y is not None:
        return y
    N, C, O, kernel = x.shape[0], x.shape[1], w.shape[0], w.shape[2:]
    col, out = _im2col(x, kernel, stride, pads, dilation)
    # sizes spelled out, not -1: an empty batch (N == 0) cannot infer them
    CK, L = C // groups * math.prod(kernel), math.prod(out)
    if _one_gemm(N, O, CK, L, groups):
        y = _by_image(_matmul(w.reshape(O, CK), _side_by_side(col, N, CK, L)), N, O, L)
    else:
        y = _matmul(w.reshape(groups, O // groups, CK), col.reshape(N, groups, CK, L))
    return y.reshape((N, O) + out).astype(x.dtype, copy=False)


def conv_input_grad_arrays(g, w, input_size, stride, pads, dilation, groups):
    dx = _shift.input_grad(g, w, input_size, pads, dilation, groups) if _shifted(stride, g) else None
    if dx is not None:
        return dx
    N, O, out, kernel = g.shape[0], g.shape[1], g.shape[2:], w.shape[2:]
    CK, L = w.shape[1] * math.prod(kernel), math.prod(out)
    if _one_gemm(N, O, CK, L, groups):
        gcol = _by_image(_matmul(w.reshape(O, CK).T, _side_by_side(g, N, O, L)), N, CK, L)
    else:
        wm = w.reshape(groups, O // groups, CK)
        gcol = _matmul(wm.swapaxes(-1, -2), g.reshape(N, groups, O // groups, L))
    gcol = gcol.astype(g.dtype, copy=False).reshape((N, w.shape[1] * groups) + tuple(kernel) + tuple(out))
    return _col2im(gcol, input_size, kernel, stride, pads, dilation)


def conv_weight_grad_arrays(x, g, kernel_size, stride, pads, dilation, groups):
    gw = _shift.weight_grad(x, g, kernel_size, pads, dilation, groups) if _shifted(stride, x) else None
    if gw is not None:
        return gw
    N, C, O = x.shape[0], x.shape[1], g.shape[1]
    col, out = _im2col(x, kernel_size, stride, pads, dilation)
    CK, L = C // groups * math.prod(kernel_size), math.prod(out)
    if _one_gemm(N, O, CK, L, groups):
        gw = _matmul(_side_by_side(g, N, O, L), _side_by_side(col, N, CK, L).T)
    else:
        gw = _matmul(g.reshape(N, groups, O // groups, L), col.reshape(N, groups, CK, L).swapaxes(-1, -2)).sum(axis=0)
    return gw.reshape((O, C // groups) + tuple(kernel_size)).astype(x.dtype, copy=False)


# ---------------------------------------------------------------- the three Functions
# y = conv(x, w) is bilinear, and each of its adjoints is one of its three faces: Conv
# (x, w -> y), ConvTranspose (g, w -> x-shaped, the input gradient) and ConvWeight (x, g ->
# w-shaped, the weight gradient). Each face's gradients are two other faces, written once
# (`grads`) for Tensors (backward, differentiable again) and arrays (backward_arrays).
_TENSOR_FACES = SimpleNamespace(
    conv=lambda x, w, **a: Conv.apply(x, w, **a),
    input_grad=lambda g, w, size, **a: ConvTranspose.apply(g, w, input_size=tuple(size), **a),
    weight_grad=lambda x, g, size, **a: ConvWeight.apply(x, g, kernel_size=tuple(size), **a))
_ARRAY_FACES = SimpleNamespace(conv=conv_arrays, input_grad=conv_input_grad_arrays,
                               weight_grad=conv_weight_grad_arrays)


class _Face:
    """forward: `arrays(a, b, **attrs)`, a and b saved; backward and backward_arrays: `grads(g,
    a, b, geometry, needs, m)` with m the faces as Tensor ops or as array functions. A mixin
    before Function."""

    @classmethod
    def forward(cls, ctx, a, b, **attrs):
        ctx.save_for_backward(a, b)
        return cls.arrays(a, b, **attrs)

    @classmethod
    def backward(cls, ctx, g):
        return cls.grads(g, *ctx.saved_tensors, _geometry(ctx.attrs), ctx.needs_input_grad,
                         _TENSOR_FACES)

    @classmethod
    def backward_arrays(cls, ctx, g):
        return cls.grads(g, *ctx.saved_arrays, _geometry(ctx.attrs), ctx.needs_input_grad,
                         _ARRAY_FACES)

    @classmethod
    def jvp(cls, ctx, ta, tb):   # bilinear in its two inputs
        a, b = ctx.saved_tensors
        return _bilinear(cls, ctx.attrs, a, b, ta, tb)


class Conv(_Face, Function):
    arrays = staticmethod(conv_arrays)

    @staticmethod
    def grads(g, x, w, a, need, m):
        return (m.input_grad(g, w, x.shape[2:], **a) if need[0] else None,
                m.weight_grad(x, g, w.shape[2:], **a) if need[1] else None)


class ConvTranspose(_Face, Function):
    arrays = staticmethod(conv_input_grad_arrays)

    @staticmethod
    def grads(u, g, w, a, need, m):
        return (m.conv(u, w, **a) if need[0] else None,
                m.weight_grad(u, g, w.shape[2:], **a) if need[1] else None)


class ConvWeight(_Face, Function):
    arrays = staticmethod(conv_weight_grad_arrays)

    @staticmethod
    def grads(v, x, g, a, need, m):
        return (m.input_grad(g, v, x.shape[2:], **a) if need[0] else None,
                m.conv(x, v, **a) if need[1] else None)


def _bilinear(fn, attrs, a, b, ta, tb):
    """Forward mode of a bilinear op f(a, b): f(ta, b) + f(a, tb)."""
    out = fn.apply(ta, b, **attrs) if ta is not None else None
    if tb is not None:
        other = fn.apply(a, tb, **attrs)
        out = other if out is None else out + other
    return out


def _geometry(attrs):
    return {k: attrs[k] for k in ("stride", "pads", "dilation", "groups")}


# ---------------------------------------------------------------- argument checks
def ntuple(v, n, name, op):
    """An int or a sequence of n (or 1) ints as an n-tuple, as torch accepts them."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * n
    try:
        t = tuple(int(e) for e in v if isinstance(e, numbers.Integral) and not isinstance(e, bool))
        ok = len(t) == len(v) and len(t) in (1, n)
    except TypeError:
        ok = False
    if not ok:
        raise _error(f"{op}: expected {name} to be a single integer value or a list of {n} values "
                     f"to match the convolution dimensions, but got {name}={plain(v)!r}")
    return t * n if len(t) == 1 else t


def batched(x, n, op):
    """x with a batch dim (torch takes unbatched (C, *spatial) too) and whether one was added."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")
    if x.ndim == n + 1:
        return reshape(x, (1,) + tuple(x.shape)), True
    if x.ndim != n + 2:
        raise _error(f"{op}: expected {n + 1}D (unbatched) or {n + 2}D (batched) input, but got "
                     f"input of size {tuple(x.shape)}")
    return x, False


def _same_dtype(x, w, op, what="weight"):
    if w.dtype is not x.dtype:
        raise TypeError(f"{op}: input dtype {x.dtype.name} and {what} dtype {w.dtype.name} should be "
                        f"the same{_where()}")


def _positive(vals, name, op):
    if any(v <= 0 for v in vals):
        raise _error(f"{op}: non-positive {name} {plain(vals)} is not supported")


def _check_weight(x, w, groups, op, transposed):
    n = x.ndim - 2
    if not isinstance(w, Tensor):
        raise TypeError(f"{op}: expected a Tensor weight, got {type(w).__name__}")
    if w.ndim != n + 2:
        raise _error(f"{op}: expected a {n + 2}-d weight (out_channels, in_channels/groups, *kernel) "
                     f"for a {n + 2}-d input, got weight of size {tuple(w.shape)}")
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups <= 0:
        raise _error(f"{op}: non-positive groups {plain(groups)!r} is not supported")
    if w.shape[0] % groups:
        raise _error(f"{op}: given groups={groups}, expected weight to be divisible by {groups} at "
                     f"dimension 0, but got weight of size {tuple(w.shape)}")
    expected = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != expected:
        raise _error(f"{op}: given groups={groups}, weight of size {tuple(w.shape)}, expected "
                     f"input{tuple(x.shape)} to have {expected} channels, but got {x.shape[1]} "
                     f"channels instead")
    _same_dtype(x, w, op)


def _add_bias(y, bias, out_channels, w, op):
    if bias is None:
        return y
    if not isinstance(bias, Tensor) or bias.ndim != 1 or bias.shape[0] != out_channels:
        shape = tuple(bias.shape) if isinstance(bias, Tensor) else type(bias).__name__
        raise _error(f"{op}: given weight of size {tuple(w.shape)}, expected bias to be 1-dimensional "
                     f"with {out_channels} elements, but got bias of size {shape}")
    _same_dtype(y, bias, op, "bias")
    return y + reshape(bias, (out_channels,) + (1,) * (y.ndim - 2))


def _unbatch(y, added):
    return reshape(y, tuple(y.shape[1:])) if added else y


# ---------------------------------------------------------------- conv
def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, op="conv"):
    """N-d convolution (cross-correlation, as torch); n = weight.ndim - 2 spatial dims."""
    input, weight, bias = cast_inputs("conv", input, weight, bias)
    n = (weight.ndim - 2) if isinstance(weight, Tensor) else 0
    x, added = batched(float_operand(input, op) if isinstance(input, Tensor) else input, n, op)
    _check_weight(x, weight, groups, op, transposed=False)
    stride = ntuple(stride, n, "stride", op)
    dilation = ntuple(dilation, n, "dilation", op)
    _positive(stride, "stride", op)
    _positive(dilation, "dilation", op)
    kernel, spatial = tuple(weight.shape[2:]), tuple(x.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise _error(f"{op}: padding='same' is not supported for strided convolutions "
                             f"(stride={stride})")
            # the odd one out of an even total goes after, as in torch
            pairs = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
        else:
            raise _error(f"{op}: invalid padding string {padding!r}; expected 'same' or 'valid'")
    if not isinstance(padding, str):
        padding = ntuple(padding, n, "padding", op)
        if any(p < 0 for p in padding):
            raise _error(f"{op}: negative padding {padding} is not supported")
        pairs = [(p, p) for p in padding]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pairs))
    if any(d * (k - 1) + 1 > p for k, d, p in zip(kernel, dilation, padded)):
        raise _error(f"{op}: calculated padded input size per channel: {_x(padded)}. Kernel size: "
                     f"{_x(tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation)))}. Kernel size "
                     f"can't be greater than actual input size (input {tuple(x.shape)}, weight "
                     f"{tuple(weight.shape)})")
    pads = fit_pads(spatial, kernel, stride, pairs, dilation)
    y = Conv.apply(x, weight, stride=stride, pads=pads, dilation=dilation, groups=int(groups))
    return _unbatch(_add_bias(y, bias, weight.shape[0], weight, op), added)


def fit_pads(spatial, kernel, stride, pairs, dilation, out=None):
    """pairs with each high pad set so the padded extent is exactly what `out` windows cover
    (default: as many windows as fit)."""
    if out is None:
        out = out_size(spatial, kernel, stride, pairs, dilation)
    return tuple((lo, (o - 1) * st + d * (k - 1) + 1 - s - lo)
                 for s, k, st, (lo, _), d, o in zip(spatial, kernel, stride, pairs, dilation, out))


def _x(shape):
    return "(" + " x ".join(str(s) for s in shape) + ")"


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d: input (N, C, L) or (C, L), weight (O, C/groups, k)."""
    _want(weight, 1, "conv1d")
    return conv(input, weight, bias, stride, padding, dilation, groups, op="conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d: input (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw)."""
    _want(weight, 2, "conv2d")
    return conv(input, weight, bias, stride, padding, dilation, groups, op="conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d: input (N, C, D, H, W) or unbatched, weight (O, C/groups, kd, kh, kw)."""
    _want(weight, 3, "conv3d")
    return conv(input, weight, bias, stride, padding, dilation, groups, op="conv3d")


def _want(weight, n, op):
    if not isinstance(weight, Tensor):
        raise TypeError(f"{op}: expected a Tensor weight, got {type(weight).__name__}")
    if weight.ndim != n + 2:
        raise _error(f"{op}: expected a {n + 2}-d weight (out_channels, in_channels/groups, "
                     f"{', '.join('k' + 'dhw'[3 - n + i] for i in range(n))}), got weight of size "
                     f"{tuple(weight.shape)}")


# ---------------------------------------------------------------- conv_transpose
def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                   dilation=1, op="conv_transpose"):
    """N-d transposed convolution: the gradient of conv with respect to its input."""
    input, weight, bias = cast_inputs("conv_transpose", input, weight, bias)
    n = (weight.ndim - 2) if isinstance(weight, Tensor) else 0
    x, added = batched(float_operand(input, op) if isinstance(input, Tensor) else input, n, op)
    _check_weight(x, weight, groups, op, transposed=True)
    if isinstance(padding, str):
        raise TypeError(f"{op}: padding must be an int or a tuple of ints, not str ({padding!r})")
    stride = ntuple(stride, n, "stride", op)
    dilation = ntuple(dilation, n, "dilation", op)
    padding = ntuple(padding, n, "padding", op)
    output_padding = ntuple(output_padding, n, "output_padding", op)
    _positive(stride, "stride", op)
    _positive(dilation, "dilation", op)
    if any(p < 0 for p in padding + output_padding):
        raise _error(f"{op}: negative padding {padding} or output_padding {output_padding} is not "
                     f"supported")
    if any(op_ >= s and op_ >= d for op_, s, d in zip(output_padding, stride, dilation)):
        raise _error(f"{op}: output padding must be smaller than either stride or dilation, but got "
                     f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    kernel, spatial = tuple(weight.shape[2:]), tuple(x.shape[2:])
    size = tuple((s - 1) * st - 2 * p + d * (k - 1) + o + 1
                 for s, st, p, d, k, o in zip(spatial, stride, padding, dilation, kernel, output_padding))
    if any(s <= 0 for s in size):
        raise _error(f"{op}: given input of size {tuple(x.shape)}, weight {tuple(weight.shape)}, "
                     f"stride {stride}, padding {padding}: the calculated output size {size} is too "
                     f"small")
    # the conv whose input gradient this is: input `size`, windows exactly `spatial`
    pads = fit_pads(size, kernel, stride, tuple((p, p) for p in padding), dilation, out=spatial)
    y = ConvTranspose.apply(x, weight, input_size=size, stride=stride, pads=pads, dilation=dilation,
                            groups=int(groups))
    return _unbatch(_add_bias(y, bias, weight.shape[1] * groups, weight, op), added)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose1d: weight (C_in, C_out/groups, k)."""
    _want(weight, 1, "conv_transpose1d")
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          op="conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose2d: weight (C_in, C_out/groups, kh, kw)."""
    _want(weight, 2, "conv_transpose2d")
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          op="conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose3d: weight (C_in, C_out/groups, kd, kh, kw)."""
    _want(weight, 3, "conv_transpose3d")
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          op="conv_transpose3d")
