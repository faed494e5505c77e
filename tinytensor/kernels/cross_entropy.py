"""Fused cross-entropy from logits with class-index targets, ignore_index, label
smoothing, class weights and every reduction, never materialising the softmax.

Per row (w the class weights, 1 without; t the target; eps the label smoothing), with
d = x - max(x) and ls = log(sum(exp(d))), so that logsumexp(x) = max(x) + ls:
    loss = (1 - eps) * w[t] * (ls - d[t]) + eps / C * (sum(w) * ls - sum(w * d))
    dx   = coef * ((1 - eps) * w[t] * (p - onehot(t)) + eps / C * (sum(w) * p - w))
with p = exp(d - ls) and coef the upstream gradient of the row (divided by sum(w[t]) over
the kept rows for reduction="mean"). Everything is computed from d, never from the
absolute logsumexp: at |x| ~ 1e8 a float32 holds only multiples of 8, so max(x) + ls
rounds back to max(x) and (max(x) + ls) - x[t] loses ls altogether (the same terms as
log_softmax, which computes d - ls). The forward keeps max(x) and ls per row (`stats`);
the backward recomputes p from them a chunk of rows at a time.

CPU: chunks of rows in NumPy. CUDA: `cuda/cross_entropy.cu`. The reference decomposition
is `tinytensor.ops.losses.cross_entropy` with fusion off (log_softmax, gather, where, ...).
"""
import numpy as np

from ..autograd import STATE
from ..core.function import Function
from ..ops.elementwise import where
from ..ops.movement import unsqueeze
from . import _cuda
from ._common import acc_dtype, acc_scalar, const, cuda_ok, i32, i64, is_cpu, row_chunks, xp_of

CUDA_SOURCE = "cross_entropy"


def _rows(x):
    """(N, C, d1, ...) -> (N * d1 * ..., C) class-last rows; (C,) -> (1, C); (N, C) as is.
    Always contiguous: the kernels read row r at x + r * C (a strided (C,) view, `x[::2]`,
    reshaped to (1, C) would stay strided)."""
    xp = xp_of(x)
    if x.ndim > 2:
        x = xp.moveaxis(x, 1, -1)
    return xp.ascontiguousarray(x).reshape(-1, x.shape[-1])


def _unrows(d, shape):
    xp = xp_of(d)
    if len(shape) == 1:
        return d.reshape(shape)
    if len(shape) > 2:
        lead = (shape[0],) + tuple(shape[2:]) + (shape[1],)
        return xp.ascontiguousarray(xp.moveaxis(d.reshape(lead), -1, 1))
    return d


# ---------------------------------------------------------------- CPU
def _cpu_forward(x2, t, w, ignore_index, eps):
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    loss = np.empty(rows, acc)
    stats = np.empty((2, rows), acc)  # per row: the max m and log(sum(exp(x - m)))
    wsum = float(w.sum()) if w is not None else float(C)
    for r0, r1 in row_chunks(rows, C):
        xc = x2[r0:r1].astype(acc, copy=False)
        m = xc.max(axis=1)
        d = np.subtract(xc, m[:, None])
        dt = d[np.arange(r1 - r0), safe[r0:r1]]
        sd = (d @ w if w is not None else d.sum(axis=1)) if eps > 0 else None
        np.exp(d, out=d)
        ls = np.log(d.sum(axis=1))
        del d
        wt = w[safe[r0:r1]] if w is not None else 1.0
        l = (1.0 - eps) * wt * (ls - dt)
        if eps > 0:
            l += eps / C * (wsum * ls - sd)
        loss[r0:r1] = l
        stats[:, r0:r1] = m, ls
    loss[~valid] = 0.0
    stats[:, ~valid] = 0.0  # as the CUDA kernel writes them
    return loss, stats


def _cpu_backward(x2, t, w, stats, coef, ignore_index, eps):
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = (w[safe] if w is not None else np.ones(rows, acc)) * valid
    k = np.where(valid, np.broadcast_to(coef, (rows,)), 0.0)  # ignored rows: zero gradient
    hard = (1.0 - eps) * wt
    soft = eps / C
    wsum = float(w.sum()) if w is not None else float(C)
    dx = np.empty(x2.shape, x2.dtype)
    for r0, r1 in row_chunks(rows, C):
        xc = x2[r0:r1].astype(acc, copy=False)
        kc = k[r0:r1]
        p = np.subtract(xc, stats[0, r0:r1, None])
        p -= stats[1, r0:r1, None]
        # ignored rows: exp(-inf) = 0, where exp(x) of their unshifted logits could overflow
        # (x > 88 in float32) and then give nan against their zero coefficient
        p[~valid[r0:r1]] = -np.inf
        np.exp(p, out=p)
        p *= (kc * (hard[r0:r1] + soft * wsum))[:, None]
        p[np.arange(r1 - r0), safe[r0:r1]] -= kc * hard[r0:r1]
        if eps > 0:
            p -= (kc * soft)[:, None] * (w if w is not None else 1.0)
        dx[r0:r1] = p
    return dx


# ---------------------------------------------------------------- CUDA
def _vec(x2):
    v = 16 // x2.dtype.itemsize
    return v if x2.shape[1] % v == 0 and x2.data.ptr % 16 == 0 else 1


def _threads(n, vec, dtype):
    t, top = 64, 512 if dtype == np.float64 else 1024  # the kernels' launch bounds
    while t < top and t * vec * 4 < n:
        t *= 2
    return t


def _cuda_forward(x2, t, w, ignore_index, eps):
    import cupy
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    loss = cupy.empty(rows, acc)
    stats = cupy.empty((2, rows), acc)
    wsum = float(w.sum()) if w is not None else float(C)
    vec = _vec(x2)
    _cuda.launch(CUDA_SOURCE, f"ce_fwd<{_cuda.ctype(x2.dtype)}, {vec}>", _cuda.grid(rows),
                 (_threads(C, vec, x2.dtype),),
                 (x2, t, w if w is not None else loss, loss, stats[0], stats[1], i64(rows), i32(C),
                  i64(ignore_index), acc_scalar(eps, acc), i32(w is not None), acc_scalar(wsum, acc)))
    return loss, stats


def _cuda_backward(x2, t, w, stats, coef, ignore_index, eps):
    import cupy
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    coef = cupy.ascontiguousarray(coef, dtype=acc).reshape(-1)
    stride = 0 if coef.size == 1 else 1
    wsum = float(w.sum()) if w is not None else float(C)
    dx = cupy.empty_like(x2)
    vec = _vec(x2)
    _cuda.launch(CUDA_SOURCE, f"ce_bwd<{_cuda.ctype(x2.dtype)}, {vec}>", _cuda.grid(rows),
                 (_threads(C, vec, x2.dtype),),
                 (x2, t, w if w is not None else coef, stats[0], stats[1], coef, i32(stride), dx, i64(rows),
                  i32(C), i64(ignore_index), acc_scalar(eps, acc), i32(w is not None), acc_scalar(wsum, acc)))
    return dx


def cuda_instantiations(full=False, arch=90):
    """Every kernel the dispatcher can pick, on every compute capability (`arch`)."""
    return [f"ce_{k}<{t}, {v}>" for t, size in (("float", 4), ("half16", 2), ("double", 8))
            for v in (1, 16 // size) for k in ("fwd", "bwd")]


_cuda.register(CUDA_SOURCE, cuda_instantiations)


# ---------------------------------------------------------------- the op
class FusedCrossEntropy(Function):
    name = "cross_entropy"

    @staticmethod
    def forward(ctx, x, target, *weight, ignore_index, reduction, label_smoothing):
        xp = xp_of(x)
        acc = acc_dtype(x.dtype)
        x2 = _rows(x)
        t = xp.ascontiguousarray(target.reshape(-1), dtype=np.int64)
        w = weight[0].astype(acc).reshape(-1) if weight else None
        if w is not None and not is_cpu(x):
            w = xp.ascontiguousarray(w)
        fwd = _cpu_forward if is_cpu(x) else _cuda_forward
        loss, stats = fwd(x2, t, w, ignore_index, label_smoothing)
        denom = None
        if reduction == "none":
            out = loss.reshape(target.shape)
        elif reduction == "sum":
            out = loss.sum()
        else:  # weighted mean over kept rows; nan when every row is ignored, as torch
            valid = t != ignore_index
            wt = w[xp.where(valid, t, 0)] * valid if w is not None else valid.astype(acc)
            denom = wt.sum()
            out = loss.sum() / denom
        ctx.denom = denom
        ctx.save_for_backward(x, target, *weight, stats)
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        ii, red, eps = a["ignore_index"], a["reduction"], a["label_smoothing"]
        if STATE.grad_enabled:
            return _differentiable_backward(ctx, g, ii, red, eps)
        saved = ctx.saved_arrays
        x, target, stats = saved[0], saved[1], saved[-1]
        xp = xp_of(x)
        acc = acc_dtype(x.dtype)
        w = saved[2].astype(acc).reshape(-1) if len(saved) == 4 else None
        coef = g.data.astype(acc).reshape(-1)
        if red == "mean":  # every row ignored: the loss is nan, the gradient zero
            coef = coef / xp.where(ctx.denom == 0, 1.0, ctx.denom)
        x2 = _rows(x)
        t = xp.ascontiguousarray(target.reshape(-1), dtype=np.int64)
        if is_cpu(x):
            dx = _cpu_backward(x2, t, w, stats, coef, ii, eps)
        else:
            dx = _cuda_backward(x2, t, None if w is None else xp.ascontiguousarray(w), stats, coef, ii, eps)
        out = (const(_unrows(dx, x.shape), g), None)
        return out + ((None,) if len(saved) == 4 else ())


def _differentiable_backward(ctx, g, ignore_index, reduction, eps):
    """dx in tinytensor ops (softmax of the saved logits), differentiable again in x and g."""
    from ..ops.nn import softmax
    saved = ctx.saved_tensors
    x, target = saved[0], saved[1]
    weight = saved[2] if len(saved) == 4 else None
    cdim = 1 if x.ndim > 1 else 0
    C = x.shape[cdim]
    xp = x.device.xp
    t = target.data
    valid = t != ignore_index
    safe = xp.where(valid, t, 0)
    acc = x.data.dtype
    wv = weight.data.astype(acc) if weight is not None else None
    wt = (wv[safe] if wv is not None else xp.ones(t.shape, acc)) * valid
    wsum = float(wv.sum()) if wv is not None else float(C)
    if reduction == "mean":
        k = g / const(xp.asarray(xp.where(ctx.denom == 0, 1.0, ctx.denom), dtype=acc), g)
    else:
        k = g
    k = where(const(valid, g), k, 0.0)  # (target shape), or a broadcast scalar
    p = softmax(x, dim=cdim)
    onehot = (safe[..., None] == xp.arange(C)).astype(acc)
    if x.ndim > 1:
        onehot = xp.moveaxis(onehot, -1, 1)
    hard = const(((1.0 - eps) * wt).astype(acc), g)
    dx = unsqueeze(k * hard, cdim) * (p - const(onehot, g))
    if eps > 0:
        wb = const(wv, g) if wv is not None else None
        if wb is not None and x.ndim > 2:
            wb = const(xp.reshape(wv, (C,) + (1,) * (x.ndim - 2)), g)
        soft = p * wsum - (wb if wb is not None else 1.0)
        dx = dx + unsqueeze(k * (eps / C), cdim) * soft
    out = (dx, None)
    return out + ((None,) if weight is not None else ())


def applies(input, target, weight):
    """Class-index targets on a non-empty float input; weights that need no gradient."""
    a = input.data
    if a.size == 0 or target.data.dtype.kind not in "iu" or not (is_cpu(a) or cuda_ok(a)):
        return False
    return weight is None or not weight.requires_grad


def cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    from ..ops.losses import _check_class_weight, _check_targets, _where
    c = _check_targets(input, target, "cross_entropy")
    _check_class_weight(weight, c, "cross_entropy")
    t = target.data
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    if bool(bad.any()):
        raise IndexError(f"cross_entropy: target {int(t[bad].reshape(-1)[0])} is out of range for "
                         f"{c} classes{_where()}")
    extra = (weight,) if weight is not None else ()
    return FusedCrossEntropy.apply(input, target, *extra, ignore_index=int(ignore_index),
                                   reduction=reduction, label_smoothing=float(label_smoothing))
