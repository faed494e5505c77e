"""Fused layer_norm and rms_norm (normalization and affine part in one op).

CPU: rows in cache-sized chunks, written straight into the output; only x and the
per-row mean and 1/std are kept for backward (xhat is recomputed there, a chunk at a
time). CUDA: `cuda/layer_norm.cu`, every array contiguous (a weight or bias may come
as a strided view, `W[:, 0]`, which the kernels would read as `w + c`), row counts 64-bit,
eps in the accumulator type. The reference decomposition is
`tinytensor.ops.nn.LayerNormCore` / `RMSNormCore` followed by `* weight + bias`; with
`create_graph=True` the backward below is written in tinytensor ops.
"""
import math

import numpy as np

from ..autograd import STATE
from ..core.function import Function
from ..ops.elementwise import rsqrt
from ..ops.reduce import mean
from . import _cuda
from ._common import acc_dtype, acc_scalar, const, cuda_ok, i32, i64, is_cpu, row_chunks

CUDA_SOURCE = "layer_norm"


# ---------------------------------------------------------------- CPU
def _cpu_forward(x2, w, b, eps, rms):
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


# ---------------------------------------------------------------- CUDA
def _vec(n, *arrays):
    v = 16 // arrays[0].dtype.itemsize
    ok = n % v == 0 and all(a is None or a.data.ptr % 16 == 0 for a in arrays)
    return v if ok else 1


def _threads(n, vec):
    t = 32
    while t < 1024 and t * vec * 4 < n:
        t *= 2
    return t


def _flat(cupy, a, n):
    """`a` as n contiguous elements (None stays None)."""
    return None if a is None else cupy.ascontiguousarray(a).reshape(n)


def _cuda_forward(x2, w, b, eps, rms):
    import cupy
    x2 = cupy.ascontiguousarray(x2)
    rows, n = x2.shape
    w, b = _flat(cupy, w, n), _flat(cupy, b, n)
    acc = acc_dtype(x2.dtype)
    y = cupy.empty_like(x2)
    mu = cupy.zeros(rows, acc)
    rstd = cupy.empty(rows, acc)
    t = _cuda.ctype(x2.dtype)
    vec = _vec(n, x2, w, b)
    dummy = x2
    _cuda.launch(CUDA_SOURCE, f"norm_fwd<{t}, {vec}, {'true' if rms else 'false'}>", _cuda.grid(rows),
                 (_threads(n, vec),),
                 (x2, dummy if w is None else w, dummy if b is None else b, y, mu, rstd,
                  i64(rows), i32(n), acc_scalar(eps, x2.dtype), i32(w is not None), i32(b is not None)))
    return y, mu, rstd


def _cuda_backward(g2, x2, w, mu, rstd, rms, need_x, need_w, need_b):
    import cupy
    g2, x2 = cupy.ascontiguousarray(g2), cupy.ascontiguousarray(x2)
    rows, n = x2.shape
    w = _flat(cupy, w, n)
    t = _cuda.ctype(x2.dtype)
    r = "true" if rms else "false"
    gx = gw = gb = None
    if need_x:
        gx = cupy.empty_like(x2)
        vec = _vec(n, x2, g2, w)
        _cuda.launch(CUDA_SOURCE, f"norm_bwd_dx<{t}, {vec}, {r}>", _cuda.grid(rows), (_threads(n, vec),),
                     (g2, x2, x2 if w is None else w, mu, rstd, gx, i64(rows), i32(n),
                      i32(w is not None)))
    if need_w or need_b:
        chunk = max(32, -(-rows // 256))
        chunks = -(-rows // chunk)
        acc = acc_dtype(x2.dtype)
        dw = cupy.empty((chunks, n), acc)
        db = cupy.empty((chunks, n), acc)
        _cuda.launch(CUDA_SOURCE, f"norm_bwd_wb<{t}, {r}>", (-(-n // 256), chunks), (256,),
                     (g2, x2, mu, rstd, dw, db, i64(rows), i32(n), i64(chunk)))
        gw = dw.sum(axis=0) if need_w else None
        gb = db.sum(axis=0) if need_b else None
    return gx, gw, gb


def cuda_instantiations(full=False, arch=90):
    """Every kernel the dispatcher can pick, on every compute capability (`arch`)."""
    out = []
    for t, size in (("float", 4), ("half16", 2), ("double", 8)):
        for r in ("false", "true"):
            for vec in (1, 16 // size):
                out += [f"norm_fwd<{t}, {vec}, {r}>", f"norm_bwd_dx<{t}, {vec}, {r}>"]
            out.append(f"norm_bwd_wb<{t}, {r}>")
    return out


_cuda.register(CUDA_SOURCE, cuda_instantiations)


# ---------------------------------------------------------------- the op
class FusedNorm(Function):
    """layer_norm or rms_norm over the last `nd` dims with optional weight and bias."""
    name = "layer_norm"

    @staticmethod
    def forward(ctx, x, *params, nd, eps, rms, has_weight, has_bias):
        n = math.prod(x.shape[x.ndim - nd:])
        w = params[0].reshape(n) if has_weight else None
        b = params[-1].reshape(n) if has_bias else None
        if is_cpu(x):
            y, mu, rstd = _cpu_forward(x.reshape(-1, n), w, b, eps, rms)
        else:
            import cupy
            y, mu, rstd = _cuda_forward(cupy.ascontiguousarray(x).reshape(-1, n), w, b, eps, rms)
        ctx.save_for_backward(x, *params[:1 if has_weight else 0], mu, rstd)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        nd, rms, has_w, has_b = a["nd"], a["rms"], a["has_weight"], a["has_bias"]
        needs = ctx.needs_input_grad
        need_x = needs[0]
        need_w = has_w and needs[1]
        need_b = has_b and needs[-1]
        if STATE.grad_enabled:
            return _differentiable_backward(ctx, g, nd, a["eps"], rms, has_w, has_b, need_w, need_b)
        saved = ctx.saved_arrays
        x, mu, rstd = saved[0], saved[-2], saved[-1]
        w = saved[1] if has_w else None
        n = math.prod(x.shape[x.ndim - nd:])
        gd = g.data
        if is_cpu(x):
            gx, gw, gb = _cpu_backward(gd.reshape(-1, n), x.reshape(-1, n),
                                       None if w is None else w.reshape(n), mu, rstd, rms,
                                       need_x, need_w, need_b)
        else:
            import cupy
            gx, gw, gb = _cuda_backward(cupy.ascontiguousarray(gd).reshape(-1, n),
                                        cupy.ascontiguousarray(x).reshape(-1, n),
                                        None if w is None else w.reshape(n), mu, rstd, rms,
                                        need_x, need_w, need_b)
        pshape = x.shape[x.ndim - nd:]
        out = [const(gx.reshape(x.shape), g) if gx is not None else None]
        if has_w:
            out.append(const(gw.astype(x.dtype).reshape(pshape), g) if gw is not None else None)
        if has_b:
            out.append(const(gb.astype(x.dtype).reshape(pshape), g) if gb is not None else None)
        return tuple(out)


def _differentiable_backward(ctx, g, nd, eps, rms, has_w, has_b, need_w, need_b):
    """The decomposition in tinytensor ops, so the gradient is differentiable again."""
    saved = ctx.saved_tensors
    x = saved[0]
    w = saved[1] if has_w else None
    dims = tuple(range(x.ndim - nd, x.ndim))
    if rms:
        rs = rsqrt(mean(x * x, dim=dims, keepdim=True) + eps)
        xh = x * rs
    else:
        xc = x - mean(x, dim=dims, keepdim=True)
        rs = rsqrt(mean(xc * xc, dim=dims, keepdim=True) + eps)
        xh = xc * rs
    gy = g * w if w is not None else g
    inner = gy - xh * mean(gy * xh, dim=dims, keepdim=True)
    if not rms:
        inner = inner - mean(gy, dim=dims, keepdim=True)
    out = [rs * inner]
    if has_w:
        out.append(g * xh if need_w else None)  # summed to the weight's shape by the engine
    if has_b:
        out.append(g if need_b else None)
    return tuple(out)


class FusedRMSNorm(FusedNorm):
    name = "rms_norm"


def applies(x, weight, bias):
    a = x.data
    if a.size == 0 or not (is_cpu(a) or cuda_ok(a)):
        return False
    return all(p is None or p.data.dtype == a.dtype for p in (weight, bias))


def layer_norm(x, nd, weight, bias, eps):
    params = [p for p in (weight, bias) if p is not None]
    return FusedNorm.apply(x, *params, nd=nd, eps=eps, rms=False, has_weight=weight is not None,
                           has_bias=bias is not None)


def rms_norm(x, nd, weight, eps):
    params = [weight] if weight is not None else []
    return FusedRMSNorm.apply(x, *params, nd=nd, eps=eps, rms=True, has_weight=weight is not None,
                              has_bias=False)
