"""layer_norm and rms_norm: the reference ops, the fused ops and the rule that picks one.

`layer_norm(x, shape, weight, bias)` runs `FusedNorm` (normalization and affine part in one
op: rows in cache-sized chunks on the CPU, `kernels/cuda_norm.py` on the GPU) when fusion
is on and `_why_not_fused` finds nothing against it, else the reference `LayerNormCore`
followed by `* weight + bias` (rms_norm alike). Each op has `backward` in tinytensor ops
(differentiable again) and `backward_arrays` on raw arrays (first order).
"""
import math
import numbers

import numpy as np

from ..amp import cast_inputs
from ..core.function import Function
from ..core.primitives import summand
from ..core.rules import Rule
from ..dtypes import finfo, float32, promote
from ..kernels import c_eager as _c_eager, c_norm as _c_norm, cuda_norm, fusion as _fusion
from ..kernels._common import acc_dtype, cuda_ok, is_cpu, row_chunks
from ..messages import plain
from .elementwise import float_operand, rsqrt
from .movement import _where
from .reduce import mean, sum as sum_
from ..device import xp_of as _xp

__all__ = ["LayerNormCore", "RMSNormCore", "FusedNorm", "FusedRMSNorm", "layer_norm", "rms_norm"]  # what `from .norms import *` gives the ops namespace


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


def _normalized(x, dims, eps, rms):
    """(xhat, 1/std) in tinytensor ops: the normalized x and its per-row scale."""
    if rms:
        rs = rsqrt(mean(x * x, dim=dims, keepdim=True) + eps)
        return x * rs, rs
    xc = x - mean(x, dim=dims, keepdim=True)
    rs = rsqrt(mean(xc * xc, dim=dims, keepdim=True) + eps)
    return xc * rs, rs


def _rstd(x, dims, eps, rms):
    """1/std (rms: 1/rms) of x over `dims`, in ops."""
    if rms:
        return rsqrt(mean(x * x, dim=dims, keepdim=True) + eps)
    xc = x - mean(x, dim=dims, keepdim=True)
    return rsqrt(mean(xc * xc, dim=dims, keepdim=True) + eps)


def _dx(gy, xh, rs, dims, rms):
    """rstd * (gy - mean(gy) - xh * mean(gy * xh)) (rms: no mean(gy) term), in ops."""
    inner = gy - xh * mean(gy * xh, dim=dims, keepdim=True)
    if not rms:
        inner = inner - mean(gy, dim=dims, keepdim=True)
    return rs * inner


def _norm_flops(base):
    """FLOPs of a norm: `base` per element (layer norm 5: mean, subtract, square, mean, scale;
    RMS norm 3), plus one each for a weight and a bias (the fused ops' attributes)."""
    return lambda attrs, i, o: (base + bool(attrs.get("has_weight")) + bool(attrs.get("has_bias"))) \
        * math.prod(o[0][0])


def _steps(x, dims, eps, rms):
    """(xhat, mean or None, 1/std) as the reference forward's NumPy ops, in its order, np.mean
    as a sum divided by the count: the one spelling of what tt.compile computes for the
    reference ops (`decompose`) and the eager C kernels for the fused ones."""
    n = math.prod(x.shape[d] for d in dims)
    if rms:   # square, sum, divide, add eps, rsqrt, multiply
        rs = rsqrt(sum_(x * x, dim=dims, keepdim=True) / n + eps)
        return x * rs, None, rs
    # sum, divide, subtract, square, sum, divide, add eps, rsqrt, multiply
    mu = sum_(x, dim=dims, keepdim=True) / n
    xc = x - mu
    rs = rsqrt(sum_(xc * xc, dim=dims, keepdim=True) / n + eps)
    return xc * rs, mu, rs


# ---------------------------------------------------------------- the reference ops
class LayerNormCore(Function):
    """(x - mean) / sqrt(var + eps) over `dims`; the affine part is separate ops. RMSNormCore
    is this op with `rms` set (no mean subtracted), as FusedRMSNorm is FusedNorm's.
    forward saves (x, xhat) and sets ctx.rstd (1/std, or 1/rms) and ctx.rms."""
    compile_rule = Rule(lower=True, flops=_norm_flops(5))
    name = "layer_norm"
    rms = False

    @classmethod
    def decompose(cls, x, dims, eps):
        """What tt.compile computes for this op (`_steps`), bit for bit the forward's."""
        return _steps(x, dims, eps, cls.rms)[0]

    @classmethod
    def forward(cls, ctx, x, dims, eps):
        """xc = x - mean (layer norm) or x (rms norm), scaled by 1 / sqrt(mean(xc^2) + eps)
        over `dims`. Sums read C-contiguous arrays (summand): the order tt.compile's kernels
        add in. Saves x and the output itself (backward differentiates through it)."""
        rms, xp = cls.rms, _xp(x)
        xc = x if rms else x - summand(x).mean(axis=dims, keepdims=True)
        rstd = 1.0 / xp.sqrt(summand(xc * xc).mean(axis=dims, keepdims=True) + eps)
        out = (xc * rstd).astype(x.dtype, copy=False)
        ctx.rstd, ctx.rms = rstd.astype(x.dtype, copy=False), rms
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        # xhat is the forward's own output, as in backward_arrays and the fused ops: one
        # rebuilt from x would round the mean apart from the forward's, and on a nearly
        # constant row (a tiny variance beside eps) that shift is all of xhat's small part
        # (7x eager's error, fuzz seed 100074). 1/std is rebuilt in ops (a scale: an ulp
        # apart at most); both are functions of x on the tape, so differentiable again
        dims, rms = ctx.attrs["dims"], ctx.rms
        rs = _rstd(ctx.saved_tensor(0), dims, ctx.attrs["eps"], rms)
        return _dx(g, ctx.saved_tensor(1), rs, dims, rms)

    # forward mode: the normalization's Jacobian rstd * (I - 1 1^T / n - xh xh^T / n) (rms: no
    # 1 1^T term) is symmetric, so the tangent is backward's formula applied to it
    jvp = backward

    @staticmethod
    def backward_arrays(ctx, g):
        xh, dims = ctx.saved_array(1), ctx.attrs["dims"]
        gx = g if ctx.rms else g - g.mean(axis=dims, keepdims=True)
        return (gx - xh * (g * xh).mean(axis=dims, keepdims=True)) * ctx.rstd


class RMSNormCore(LayerNormCore):
    """x / sqrt(mean(x^2) + eps) over `dims`."""
    compile_rule = Rule(lower=True, flops=_norm_flops(3))
    name = "rms_norm"
    rms = True


# ---------------------------------------------------------------- the fused ops
# The eager forward's C kernel (kernels/c_eager.py) is generated from this decomposition,
# what tt.compile computes for the op (the reference op lowered by the compiler: its
# `decompose`, `_steps`: np.mean's sum / n, then * w + b), so an eager call and a compiled
# one give the same bits. The eager backward is kernels/c_norm.py's hand-written row pass
# (the NumPy path's arithmetic from the saved stats, within a few ulp of it).
def _forward_decomposition(rms, has_w, has_b, eps):
    def fn(x, *params):   # x: (rows, n)
        y, mu, rs = _steps(x, (1,), eps, rms)
        if rms:
            mu = rs * 0.0
        if has_w:
            y = y * params[0]
        if has_b:
            y = y + params[-1]
        return y, mu, rs
    return fn


def _c_forward(x2, w, b, eps, rms):
    """(y, mean, rstd) from the C kernel, or None (module docstring of kernels/c_eager.py)."""
    params = [p for p in (w, b) if p is not None]
    if not _c_eager.takes(x2, *params):
        return None
    fn = _forward_decomposition(rms, w is not None, b is not None, eps)
    got = _c_eager.run("rms_norm" if rms else "layer_norm", fn, [x2, *params],
                       ("rn",) + ("n",) * len(params), (eps, w is not None, b is not None))
    if got is None:
        return None
    y, mu, rs = got
    return y, mu.reshape(-1), rs.reshape(-1)


def _cpu_forward(x2, w, b, eps, rms):
    """Rows in cache-sized chunks, written straight into the output; (y, mean, rstd)."""
    got = _c_forward(x2, w, b, eps, rms)
    if got is not None:
        return got
    rows, n = x2.shape
    acc = acc_dtype(x2.dtype)
    out = np.empty(x2.shape, x2.dtype)
    mu = np.zeros(rows, acc)
    rstd = np.empty(rows, acc)
    for r0, r1 in row_chunks(rows, n):
        xc = x2[r0:r1]
        same = acc == x2.dtype
        if not same:
            xc = xc.astype(acc)
        dst = out[r0:r1] if same else None
        if rms:
            rs = 1.0 / np.sqrt(np.einsum("ij,ij->i", xc, xc) / n + eps)
            oc = np.multiply(xc, rs[:, None], out=dst)
        else:
            m = xc.mean(axis=1)
            oc = np.subtract(xc, m[:, None], out=dst)
            rs = 1.0 / np.sqrt(np.einsum("ij,ij->i", oc, oc) / n + eps)
            oc *= rs[:, None]
            mu[r0:r1] = m
        rstd[r0:r1] = rs
        if w is not None:
            oc *= w
        if b is not None:
            oc += b
        if not same:
            out[r0:r1] = oc
    return out, mu, rstd


def _cpu_backward(g2, x2, w, mu, rstd, rms, need_x, need_w, need_b):
    """xhat is recomputed a chunk at a time from x and the saved mean and 1/std."""
    rows, n = x2.shape
    acc = acc_dtype(x2.dtype)
    gx = np.empty(x2.shape, x2.dtype) if need_x else None
    gw = np.zeros(n, acc) if need_w else None
    gb = np.zeros(n, acc) if need_b else None
    for r0, r1 in row_chunks(rows, n):
        gc, xc = g2[r0:r1], x2[r0:r1]
        if acc != x2.dtype:
            gc, xc = gc.astype(acc), xc.astype(acc)
        rs = rstd[r0:r1, None]
        xh = xc * rs if rms else np.subtract(xc, mu[r0:r1, None]) * rs  # (rows, n)
        if need_w:
            gw += np.einsum("ij,ij->j", gc, xh)
        if need_b:
            gb += gc.sum(axis=0)
        if not need_x:
            continue
        gy = gc * w if w is not None else gc
        # rstd * (gy - mean(gy) - xh * mean(gy * xh)), in xh's buffer
        xh *= (np.einsum("ij,ij->i", gy, xh) / n)[:, None]
        if not rms:
            xh += gy.mean(axis=1, keepdims=True)
        np.subtract(gy, xh, out=xh)
        xh *= rs
        gx[r0:r1] = xh
    return gx, gw, gb


class FusedNorm(Function):
    """layer_norm or rms_norm over the last `nd` dims with optional weight and bias, one op.
    Saves x, the weight and per row the mean and 1/std (xhat is recomputed in backward)."""
    compile_rule = Rule(flops=_norm_flops(5))
    name = "layer_norm"
    fusion = "fused"

    @staticmethod
    def forward(ctx, x, *params, nd, eps, rms, has_weight, has_bias):
        n = math.prod(x.shape[x.ndim - nd:])
        w = params[0].reshape(n) if has_weight else None
        b = params[-1].reshape(n) if has_bias else None
        if is_cpu(x):
            y, mu, rstd = _cpu_forward(x.reshape(-1, n), w, b, eps, rms)
        else:
            y, mu, rstd = cuda_norm.forward(x.reshape(-1, n), w, b, eps, rms)
        ctx.save_for_backward(x, *params[:1 if has_weight else 0], mu, rstd)
        return y.reshape(x.shape)

    @staticmethod
    def _needs(ctx):
        a, needs = ctx.attrs, ctx.needs_input_grad
        return needs[0], a["has_weight"] and needs[1], a["has_bias"] and needs[-1]

    @staticmethod
    def backward(ctx, g):  # the reference decomposition in ops, differentiable again
        a = ctx.attrs
        need_w, need_b = FusedNorm._needs(ctx)[1:]
        x = ctx.saved_tensor(0)
        w = ctx.saved_tensor(1) if a["has_weight"] else None
        dims = tuple(range(x.ndim - a["nd"], x.ndim))
        xh, rs = _normalized(x, dims, a["eps"], a["rms"])
        out = [_dx(g * w if w is not None else g, xh, rs, dims, a["rms"])]
        if a["has_weight"]:
            out.append(g * xh if need_w else None)  # summed to the weight's shape by the engine
        if a["has_bias"]:
            out.append(g if need_b else None)
        return tuple(out)

    @staticmethod
    def jvp(ctx, tx, *tp):
        """d(xh * w + b) = (rstd * (I - ...) tx) * w + xh * tw + tb, xh rebuilt in ops as in
        backward (the normalization's Jacobian is symmetric: backward's _dx serves)."""
        a = ctx.attrs
        x = ctx.saved_tensor(0)
        w = ctx.saved_tensor(1) if a["has_weight"] else None
        tw = tp[0] if a["has_weight"] else None
        tb = tp[-1] if a["has_bias"] else None
        dims = tuple(range(x.ndim - a["nd"], x.ndim))
        xh, rs = _normalized(x, dims, a["eps"], a["rms"])
        out = None
        if tx is not None:
            out = _dx(tx, xh, rs, dims, a["rms"])
            if w is not None:
                out = out * w
        if tw is not None:
            out = xh * tw if out is None else out + xh * tw
        if tb is not None:
            out = tb if out is None else out + tb
        return out

    @staticmethod
    def backward_arrays(ctx, g):
        a = ctx.attrs
        need_x, need_w, need_b = FusedNorm._needs(ctx)
        saved = ctx.saved_arrays
        x, mu, rstd = saved[0], saved[-2], saved[-1]
        pshape = x.shape[x.ndim - a["nd"]:]
        n = math.prod(pshape)
        w = saved[1].reshape(n) if a["has_weight"] else None
        got = _c_norm.backward(g.reshape(-1, n), x.reshape(-1, n), w, mu, rstd, a["rms"]) if is_cpu(x) else None
        if got is not None:
            gx, gw, gb = got
        else:
            bwd = _cpu_backward if is_cpu(x) else cuda_norm.backward  # (the latter makes them contiguous)
            gx, gw, gb = bwd(g.reshape(-1, n), x.reshape(-1, n), w, mu, rstd, a["rms"], need_x, need_w, need_b)
        out = [None if gx is None else gx.reshape(x.shape)]
        for has, p in ((a["has_weight"], gw), (a["has_bias"], gb)):
            if has:
                out.append(None if p is None else p.astype(x.dtype).reshape(pshape))
        return tuple(out)


class FusedRMSNorm(FusedNorm):
    compile_rule = Rule(flops=_norm_flops(3))
    name = "rms_norm"


# ---------------------------------------------------------------- the rule and the functions
def _why_not_fused(x, weight, bias):
    """None when the fused op takes x (non-empty, a float dtype its kernels have) and
    weight and bias (x's dtype), else why not."""
    a = x.data
    if a.size == 0:
        return "empty input"
    if not (is_cpu(a) or cuda_ok(a)):
        return f"no CUDA kernel for {a.dtype}"
    for what, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.data.dtype != a.dtype:
            return f"{what} dtype {p.dtype.name} differs from the input's {x.dtype.name}"
    return None


def _low_precision_with_float32_params(x, weight, bias):
    params = [p for p in (weight, bias) if p is not None]
    return x.dtype.itemsize == 2 and bool(params) and all(p.dtype is float32 for p in params)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    x, weight, bias = cast_inputs("layer_norm", x, weight, bias)
    x = float_operand(x, "layer_norm")
    dims = _norm_dims(x, normalized_shape, "layer_norm")
    _check_affine(weight, x.shape[dims[0]:], "weight", "layer_norm")
    _check_affine(bias, x.shape[dims[0]:], "bias", "layer_norm")
    if _low_precision_with_float32_params(x, weight, bias):
        # torch's mixed-dtype layer_norm: computed in float32, rounded once to the input's dtype
        return layer_norm(x.to(float32), normalized_shape, weight, bias, eps).to(x.dtype)
    why = _fusion.choose("layer_norm", _why_not_fused, x, weight, bias)
    if why is None:
        params = [p for p in (weight, bias) if p is not None]
        return FusedNorm.apply(x, *params, nd=len(dims), eps=float(eps), rms=False,
                               has_weight=weight is not None, has_bias=bias is not None)
    out = LayerNormCore.apply(x, dims=dims, eps=float(eps))
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return _fusion.mark(out, "layer_norm", why, x, weight, bias)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    x, weight = cast_inputs("rms_norm", x, weight)
    x = float_operand(x, "rms_norm")
    dims = _norm_dims(x, normalized_shape, "rms_norm")
    _check_affine(weight, x.shape[dims[0]:], "weight", "rms_norm")
    if eps is None:
        eps = float(finfo(x.dtype.np).eps)  # torch's default for F.rms_norm
    if weight is not None and weight.dtype is not x.dtype and weight.dtype.is_floating_point:
        # as torch's composite rms_norm: computed in the wider of (x's compute dtype, weight's),
        # the result in the input's dtype
        compute = promote(float32 if x.dtype.itemsize < 4 else x.dtype, weight.dtype)
        return rms_norm(x.to(compute), normalized_shape, weight.to(compute), eps).to(x.dtype)
    why = _fusion.choose("layer_norm", _why_not_fused, x, weight, None)
    if why is None:
        return FusedRMSNorm.apply(x, *([weight] if weight is not None else []), nd=len(dims),
                                  eps=float(eps), rms=True, has_weight=weight is not None,
                                  has_bias=False)
    out = RMSNormCore.apply(x, dims=dims, eps=float(eps))
    if weight is not None:
        out = out * weight
    return _fusion.mark(out, "rms_norm", why, x, weight)
