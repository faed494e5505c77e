"""cross_entropy: the reference decomposition, the fused op and the rule that picks one.

The reference is log_softmax, gather and where (class-index or probability targets, every
option), so every order of gradient comes for free. `FusedCrossEntropy` takes class-index
targets with ignore_index, label smoothing, class weights and every reduction in one op,
never materialising the softmax. Per row (w the class weights, 1 without; t the target;
eps the label smoothing), with d = x - max(x) and ls = log(sum(exp(d))), so that
logsumexp(x) = max(x) + ls:
    loss = (1 - eps) * w[t] * (ls - d[t]) + eps / C * (sum(w) * ls - sum(w * d))
    dx   = coef * ((1 - eps) * w[t] * (p - onehot(t)) + eps / C * (sum(w) * p - w))
with p = exp(d - ls) and coef the upstream gradient of the row (divided by sum(w[t]) over
the kept rows for reduction="mean"). Everything is computed from d, never from the
absolute logsumexp: at |x| ~ 1e8 a float32 holds only multiples of 8, so max(x) + ls
rounds back to max(x) and (max(x) + ls) - x[t] loses ls altogether (the same terms as
log_softmax, which computes d - ls). The forward keeps max(x) and ls per row (`stats`);
the backward recomputes p from them a chunk of rows at a time (CPU here; CUDA in
`kernels/cuda_cross_entropy.py`).
"""
import math

import numpy as np

from ..amp import cast_inputs
from ..core.function import Function
from ..core.rules import Rule
from ..kernels import c_cross_entropy, cuda_cross_entropy, fusion as _fusion
from ..kernels._common import acc_dtype, const, cuda_ok, is_cpu, row_chunks, xp_of
from .elementwise import ne, where
from .forward_mode import carries_tangent
from .losses import _check_class_weight, _check_reduction, _check_targets, _class_last, _picked
from .losses import _reduce, _weighted_mean
from .movement import unsqueeze, _where
from .reduce import sum as sum_
from .softmax import log_softmax, softmax

__all__ = ["FusedCrossEntropy", "cross_entropy"]  # what `from .cross_entropy import *` gives the ops namespace


# ---------------------------------------------------------------- the reference
def _reference(input, target, weight, ignore_index, reduction, label_smoothing):
    cdim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, dim=cdim)
    n_classes = input.shape[cdim]
    if target.data.dtype.kind == "f":  # class probabilities
        if target.shape != input.shape:
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}{_where()}")
        _check_class_weight(weight, n_classes, "cross_entropy")
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target
        if weight is not None:
            terms = _class_last(terms) * weight
            loss = -sum_(terms, dim=-1)
        else:
            loss = -sum_(terms, dim=cdim)
        if reduction == "mean":
            return sum_(loss) / (input.numel() / n_classes) if input.numel() else sum_(loss) * float("nan")
        return _reduce(loss, reduction)
    if target.data.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: target must be class indices (integer) or probabilities "
                        f"(float), got {target.dtype.name}")
    nll, w = _picked(logp, target, weight, ignore_index, "cross_entropy")
    if reduction == "mean":
        loss = _weighted_mean(sum_(nll), sum_(w))
    else:
        loss = _reduce(nll, reduction)
    if label_smoothing <= 0:
        return loss
    lp = _class_last(logp)
    smooth = where(ne(target, ignore_index),
                   -sum_(lp * weight if weight is not None else lp, dim=-1), 0.0)
    if reduction == "mean":
        smooth = _weighted_mean(sum_(smooth), sum_(w))
    else:
        smooth = _reduce(smooth, reduction)
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


# ---------------------------------------------------------------- the fused op
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


def _cpu_forward(x2, t, w, ignore_index, eps):
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    got = c_cross_entropy.forward(x2, safe, valid, eps) if w is None else None
    if got is not None:   # one threaded C pass per row (kernels/c_cross_entropy.py)
        return got
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
    got = c_cross_entropy.backward(x2, safe, valid, stats, k, hard, eps) if w is None else None
    if got is not None:
        return got
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


def _layout(x, target, weight):
    """(class-last rows, int64 targets, class weights in the accumulator type or None)."""
    xp = xp_of(x)
    t = xp.ascontiguousarray(target.reshape(-1), dtype=np.int64)
    w = None if weight is None else xp.ascontiguousarray(weight.astype(acc_dtype(x.dtype)).reshape(-1))
    return _rows(x), t, w


class FusedCrossEntropy(Function):
    compile_rule = Rule(flops=lambda attrs, i, o: 5 * math.prod(i[0][0]) + 4 * math.prod(i[1][0]))   # per logit, per target
    name = "cross_entropy"
    fusion = "fused"

    @staticmethod
    def forward(ctx, x, target, *weight, ignore_index, reduction, label_smoothing):
        xp = xp_of(x)
        x2, t, w = _layout(x, target, weight[0] if weight else None)
        fwd = _cpu_forward if is_cpu(x) else cuda_cross_entropy.forward
        loss, stats = fwd(x2, t, w, ignore_index, label_smoothing)
        denom = None
        if reduction == "none":
            out = loss.reshape(target.shape)
        elif reduction == "sum":
            out = loss.sum()
        else:  # weighted mean over kept rows; nan when every row is ignored, as torch
            valid = t != ignore_index
            wt = w[xp.where(valid, t, 0)] * valid if w is not None else valid.astype(acc_dtype(x.dtype))
            denom = wt.sum()
            out = loss.sum() / denom
        ctx.denom = denom
        ctx.save_for_backward(x, target, *weight, stats)
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        """dx in tinytensor ops (softmax of the saved logits), differentiable again in x and g."""
        return (FusedCrossEntropy._dx(ctx, g), None) + ((None,) if len(ctx.saved) == 4 else ())

    @staticmethod
    def jvp(ctx, tx, *rest):
        """The loss is a sum over rows (and classes) of row losses, so its tangent is
        sum(dx * tx) with dx its gradient for an upstream gradient of 1 (per row for
        reduction="none"): one softmax, as backward. The targets carry no tangent and a
        class weight with one takes the reference path (_why_not_fused)."""
        if tx is None:
            return None
        x = ctx.saved_tensor(0)
        cdim = 1 if x.ndim > 1 else 0
        shape = tuple(ctx.in_meta[1][0]) if ctx.attrs["reduction"] == "none" else ()
        one = const(x.device.xp.ones(shape, dtype=x.data.dtype), tx)
        terms = FusedCrossEntropy._dx(ctx, one) * tx
        return sum_(terms, dim=cdim) if ctx.attrs["reduction"] == "none" else sum_(terms)

    @staticmethod
    def _dx(ctx, g):
        a = ctx.attrs
        ignore_index, eps = a["ignore_index"], a["label_smoothing"]
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
        k = g
        if a["reduction"] == "mean":
            k = g / const(xp.asarray(xp.where(ctx.denom == 0, 1.0, ctx.denom), dtype=acc), g)
        k = where(const(valid, g), k, 0.0)  # (target shape), or a broadcast scalar
        p = softmax(x, dim=cdim)
        onehot = (safe[..., None] == xp.arange(C)).astype(acc)
        if x.ndim > 1:
            onehot = xp.moveaxis(onehot, -1, 1)
        hard = const(((1.0 - eps) * wt).astype(acc), g)
        dx = unsqueeze(k * hard, cdim) * (p - const(onehot, g))
        if eps > 0:
            wb = None
            if wv is not None:
                wb = const(wv if x.ndim <= 2 else xp.reshape(wv, (C,) + (1,) * (x.ndim - 2)), g)
            soft = p * wsum - (wb if wb is not None else 1.0)
            dx = dx + unsqueeze(k * (eps / C), cdim) * soft
        return dx

    @staticmethod
    def backward_arrays(ctx, g):
        a = ctx.attrs
        saved = ctx.saved_arrays
        x, stats = saved[0], saved[-1]
        xp = xp_of(x)
        x2, t, w = _layout(x, saved[1], saved[2] if len(saved) == 4 else None)
        coef = g.astype(acc_dtype(x.dtype)).reshape(-1)
        if a["reduction"] == "mean":  # every row ignored: the loss is nan, the gradient zero
            coef = coef / xp.where(ctx.denom == 0, 1.0, ctx.denom)
        bwd = _cpu_backward if is_cpu(x) else cuda_cross_entropy.backward
        dx = bwd(x2, t, w, stats, coef, a["ignore_index"], a["label_smoothing"])
        return (_unrows(dx, x.shape), None) + ((None,) if len(saved) == 4 else ())


# ---------------------------------------------------------------- the rule and the function
def _why_not_fused(input, target, weight):
    """None when the fused op takes these (class-index targets, a non-empty float input in
    a dtype its kernels have, class weights that need no gradient), else why not."""
    a = input.data
    if target.data.dtype.kind not in "iu":
        return "probability targets (the fused op takes class indices)"
    if a.size == 0:
        return "empty input"
    if not (is_cpu(a) or cuda_ok(a)):
        return f"no CUDA kernel for {a.dtype}"
    if weight is not None and (weight.requires_grad or carries_tangent(weight)):
        return "weight requires grad (the fused op gives none for it)"
    return None


def _fused(input, target, weight, ignore_index, reduction, label_smoothing):
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


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy from logits (N, C[, d...]) with class-index or probability targets."""
    input, target, weight = cast_inputs("cross_entropy", input, target, weight)
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if input.ndim == 0:
        raise ValueError(f"cross_entropy: input must have a class dimension, got a 0-d tensor{_where()}")
    why = _fusion.choose("cross_entropy", _why_not_fused, input, target, weight)
    if why is None:
        return _fused(input, target, weight, ignore_index, reduction, label_smoothing)
    out = _reference(input, target, weight, ignore_index, reduction, label_smoothing)
    return _fusion.mark(out, "cross_entropy", why, input, target, weight)
