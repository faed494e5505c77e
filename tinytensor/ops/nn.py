"""Neural-network ops: softmax, log_softmax, layer_norm, rms_norm, dropout, linear.

softmax, log_softmax and the normalizations are single ops, each one Function with its
backward in tinytensor ops (differentiable again, for create_graph) and backward_arrays,
the same first-order formula on raw arrays. The public functions take the fused kernel
(tinytensor.kernels) when it applies and fusion is on.
"""
import numbers

import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from ..kernels import fusion as _fusion, layer_norm as _k_norm, softmax as _k_softmax
from ..messages import plain
from ..random import uniform
from .elementwise import exp, float_operand, mul, rsqrt
from .linalg import matmul
from .movement import norm_dim, _where
from .reduce import mean, sum as sum_


def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy").get_array_module(a)


def _const(arr, like):
    return Tensor._make(arr, like.device, False)


def _rowdot(a, b, dim):
    """sum(a * b, dim, keepdims=True) without materialising a * b when dim is the last."""
    if dim == a.ndim - 1 and a.dtype == b.dtype:
        return _xp(a).einsum("...i,...i->...", a, b)[..., None]
    return (a * b).sum(axis=dim, keepdims=True)


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        xp = _xp(x)
        if x.size == 0:  # max over an empty dim has no identity
            e = x.copy()
            ctx.save_for_backward(e)
            return e
        # one temporary: shift, exponentiate and normalise in place
        e = xp.subtract(x, x.max(axis=dim, keepdims=True))
        xp.exp(e, out=e)
        e /= e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(e)
        return e

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_tensor(0)
        gy = g * y
        return gy - y * sum_(gy, dim=ctx.attrs["dim"], keepdim=True)

    @staticmethod
    def backward_arrays(ctx, g):  # y * (g - sum(g * y)), with one temporary
        y = ctx.saved_array(0)
        gx = _xp(g).subtract(g, _rowdot(g, y, ctx.attrs["dim"]))
        gx *= y
        return gx


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        xp = _xp(x)
        if x.size == 0:
            out = x.copy()
            ctx.save_for_backward(out)
            return out
        out = xp.subtract(x, x.max(axis=dim, keepdims=True))
        out -= xp.log(xp.exp(out).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g - exp(ctx.saved_tensor(0)) * sum_(g, dim=ctx.attrs["dim"], keepdim=True)

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        xp = _xp(y)
        gx = xp.exp(y)
        gx *= g.sum(axis=ctx.attrs["dim"], keepdims=True)
        xp.subtract(g, gx, out=gx)
        return gx


def softmax(x, dim=-1, dtype=None):
    x = float_operand(x, "softmax") if dtype is None else x.to(dtype)
    dim = norm_dim(dim, x.ndim, "softmax")
    if _fusion.enabled("softmax") and _k_softmax.applies(x, dim):  # fused kernel (tinytensor.kernels)
        return _k_softmax.softmax(x)
    return Softmax.apply(x, dim=dim)


def log_softmax(x, dim=-1, dtype=None):
    x = float_operand(x, "log_softmax") if dtype is None else x.to(dtype)
    dim = norm_dim(dim, x.ndim, "log_softmax")
    if _fusion.enabled("softmax") and _k_softmax.applies(x, dim):
        return _k_softmax.softmax(x, log=True)
    return LogSoftmax.apply(x, dim=dim)


# ---------------------------------------------------------------- normalization
def _norm_dims(x, normalized_shape, op):
    if isinstance(normalized_shape, numbers.Integral):  # also np.int64(4), as torch takes
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(x.shape[-k:]) != normalized_shape:
        raise ValueError(f"{op}: normalized_shape {plain(normalized_shape)} does not match the last "
                         f"dimensions of the input shape {tuple(x.shape)}{_where()}")
    return tuple(range(x.ndim - k, x.ndim))


def _check_affine(t, normalized_shape, what, op):
    if t is not None and tuple(t.shape) != tuple(normalized_shape):
        raise ValueError(f"{op}: {what} shape {tuple(t.shape)} must equal normalized_shape "
                         f"{plain(tuple(normalized_shape))}{_where()}")


class LayerNormCore(Function):
    """(x - mean) / sqrt(var + eps) over `dims`; the affine part is separate ops."""
    name = "layer_norm"

    @staticmethod
    def forward(ctx, x, dims, eps):
        xp = _xp(x)
        mu = x.mean(axis=dims, keepdims=True)
        xc = x - mu
        rstd = 1.0 / xp.sqrt((xc * xc).mean(axis=dims, keepdims=True) + eps)
        xhat = xc * rstd
        ctx.rstd = rstd.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, xhat)
        return xhat.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, xhat = ctx.saved_tensors
        dims, eps = ctx.attrs["dims"], ctx.attrs["eps"]
        # differentiable form: rebuild rstd and xhat from x in ops
        xc = x - mean(x, dim=dims, keepdim=True)
        rstd = rsqrt(mean(xc * xc, dim=dims, keepdim=True) + eps)
        xh = xc * rstd
        return rstd * (g - mean(g, dim=dims, keepdim=True) - xh * mean(g * xh, dim=dims, keepdim=True))

    @staticmethod
    def backward_arrays(ctx, g):
        xh, dims = ctx.saved_array(1), ctx.attrs["dims"]
        gx = g - g.mean(axis=dims, keepdims=True) - xh * (g * xh).mean(axis=dims, keepdims=True)
        return gx * ctx.rstd


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = float_operand(x, "layer_norm")
    dims = _norm_dims(x, normalized_shape, "layer_norm")
    _check_affine(weight, x.shape[dims[0]:], "weight", "layer_norm")
    _check_affine(bias, x.shape[dims[0]:], "bias", "layer_norm")
    if _fusion.enabled("layer_norm") and _k_norm.applies(x, weight, bias):
        return _k_norm.layer_norm(x, len(dims), weight, bias, float(eps))
    out = LayerNormCore.apply(x, dims=dims, eps=float(eps))
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


class RMSNormCore(Function):
    """x / sqrt(mean(x^2) + eps) over `dims`."""
    name = "rms_norm"

    @staticmethod
    def forward(ctx, x, dims, eps):
        xp = _xp(x)
        rrms = 1.0 / xp.sqrt((x * x).mean(axis=dims, keepdims=True) + eps)
        out = (x * rrms).astype(x.dtype, copy=False)
        ctx.rrms = rrms.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        dims, eps = ctx.attrs["dims"], ctx.attrs["eps"]
        rrms = rsqrt(mean(x * x, dim=dims, keepdim=True) + eps)
        yh = x * rrms
        return rrms * (g - yh * mean(g * yh, dim=dims, keepdim=True))

    @staticmethod
    def backward_arrays(ctx, g):
        y, dims = ctx.saved_array(1), ctx.attrs["dims"]
        return (g - y * (g * y).mean(axis=dims, keepdims=True)) * ctx.rrms


def rms_norm(x, normalized_shape, weight=None, eps=None):
    x = float_operand(x, "rms_norm")
    dims = _norm_dims(x, normalized_shape, "rms_norm")
    _check_affine(weight, x.shape[dims[0]:], "weight", "rms_norm")
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)  # torch's default for F.rms_norm
    if _fusion.enabled("layer_norm") and _k_norm.applies(x, weight, None):
        return _k_norm.rms_norm(x, len(dims), weight, float(eps))
    out = RMSNormCore.apply(x, dims=dims, eps=float(eps))
    if weight is not None:
        out = out * weight
    return out


# ---------------------------------------------------------------- dropout and linear
def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = uniform(x.device, x.shape, x.dtype) >= p
    scale = (keep * (1.0 / (1.0 - p))).astype(x.data.dtype)
    return mul(x, _const(scale, x))


def linear(x, weight, bias=None):
    """x @ weight.T + bias, with weight of shape (out_features, in_features)."""
    if weight.ndim not in (1, 2) or x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input shape {tuple(x.shape)} does not match weight shape "
                         f"{tuple(weight.shape)} (need a 1-d or 2-d weight whose last dimension, "
                         f"in_features, equals the input's last){_where()}")
    out_shape = tuple(weight.shape[:-1])  # (out_features,), or () for a 1-d weight
    if x.ndim > 2 and weight.ndim == 2:
        # (B, T, C) -> (B*T, C): one GEMM forward and one for the weight gradient,
        # instead of a batched product whose weight gradient is then summed over B
        lead = x.shape[:-1]
        out = matmul(x.reshape(-1, x.shape[-1]), weight.mT).reshape(*lead, weight.shape[0])
    else:
        out = matmul(x, weight.mT if weight.ndim == 2 else weight)
    if bias is not None:
        if bias.ndim > len(out_shape) or any(b not in (1, o) for b, o in
                                             zip(bias.shape[::-1], out_shape[::-1])):
            raise ValueError(f"linear: bias shape {tuple(bias.shape)} does not fit the "
                             f"{out_shape[0] if out_shape else 1} output features of weight "
                             f"{tuple(weight.shape)}{_where()}")
        out = out + bias
    return out
