"""Training-mode batch norm as one op (`BatchNormTrain`): the batch statistics, the
normalization and the affine part in one pass of C kernels forward and one backward
(kernels/c_batch_norm.py), where the reference (ops/normalization.py `batch_norm`) records
some seven primitive ops forward and more backward, each a single-threaded NumPy sweep.

`why_not_fused` picks: the op runs only where its C kernels take the call (a CPU float32
or float64 C-contiguous input of at least c_eager.MIN_ELEMENTS, spatial runs of at least
c_batch_norm.MIN_S, weight and bias of its dtype, the eager kernels on, outside
tt.func.vmap); anything else runs the reference decomposition as before. Its outputs are y
and the batch mean, biased var and 1/std (non-differentiable: the running statistics are
updated from the mean and var, in ops, as the reference updates them). `backward` is the
reference's formula in ops (differentiable again: double backward), `jvp` its forward-mode
twin; `backward_arrays` the C kernel (NumPy's arithmetic where it refuses).

Under tt.compile the op is recorded as itself (kernels/fusion.py CAPTURED; no `decompose`:
its four outputs are not a lowering's one) and so is its first-order backward
(`BatchNormBackward`, the same kernel as backward_arrays), so a replay gives eager's bits;
a backward the step differentiates again is recorded as the formula in ops.
"""
import numpy as np

from ..core.engine import grad
from ..core.function import Function
from ..core.grad_mode import STATE, enable_grad, no_grad
from ..core.tensor import Tensor
from ..device import device_of_array
from ..core.rules import Rule
from ..kernels import c_batch_norm
from ..kernels._common import is_cpu
from .norms import _dx, _norm_flops, _normalized
from .elementwise import rsqrt
from .reduce import mean, sum as sum_


def _dims(ndim):
    return (0,) + tuple(range(2, ndim))


def _per_channel(v, ndim):
    """A (C,) array or tensor shaped to broadcast against (N, C, *spatial)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def reference(x, w, dims, eps):
    """Training batch norm in ops, the reference: (y before the bias, the batch mean, the
    biased var), w shaped per channel or None. ops/normalization.py runs it where the fused
    op does not; the kernels' fallbacks below run it too."""
    mu = mean(x, dim=dims, keepdim=True)
    xc = x - mu
    var = mean(xc * xc, dim=dims, keepdim=True)
    scale = rsqrt(var + eps)
    return xc * (scale if w is None else scale * w), mu, var


def _tensors(*arrays, grad=False):
    return [None if a is None else Tensor._make(a, device_of_array(a), grad) for a in arrays]


def _reference_forward(x, w, b, eps):
    """The kernels' fallback forward: the reference's own ops on these arrays (no graph).
    A replay of the recorded op at a size the kernels refuse (tt.compile dynamic=True) so
    gives what eager gives at that size, where eager runs the reference itself."""
    with no_grad():
        X, W, B = _tensors(x, w, b)
        y, mu, var = reference(X, None if W is None else _per_channel(W, x.ndim), _dims(x.ndim), eps)
        if B is not None:
            y = y + _per_channel(B, x.ndim)
        rstd = rsqrt(var + eps)
    return y.data, mu.data.reshape(-1), var.data.reshape(-1), rstd.data.reshape(-1)


def _reference_backward(g, x, w, eps):
    """The kernels' fallback backward: the reference's graph rebuilt and differentiated (its
    ops' first-order backwards, as eager's backward runs them where it ran the reference),
    so a replay at a size the kernels refuse gives eager's gradients bit for bit."""
    with enable_grad():
        X, W, B = _tensors(x, w, np.zeros(x.shape[1], x.dtype), grad=True)
        y, _, _ = reference(X, None if W is None else _per_channel(W, x.ndim), _dims(x.ndim), eps)
        y = y + _per_channel(B, x.ndim)
        leaves = [X, B] if W is None else [X, W, B]
        got = grad([y], leaves, [_tensors(g)[0]])
    dx, db = got[0].data, got[-1].data
    return dx, (np.zeros_like(db) if W is None else got[1].data), db   # no weight: unread


class BatchNormTrain(Function):
    """batch_norm with batch statistics over (N, C, *spatial): y, and the mean, var (biased)
    and 1/std of each channel. Saves x, the weight, the mean and 1/std (outputs: a compiled
    program reads them from this op at every replay, never as constants)."""
    compile_rule = Rule(flops=_norm_flops(5))
    name = "batch_norm"
    fusion = "fused"

    @staticmethod
    def forward(ctx, x, *params, eps, has_weight, has_bias):
        w = params[0] if has_weight else None
        b = params[-1] if has_bias else None
        got = c_batch_norm.forward(x, w, b, eps) if is_cpu(x) else None
        y, mean, var, rstd = got if got is not None else _reference_forward(x, w, b, eps)
        ctx.save_for_backward(x, *([w] if has_weight else []), mean, rstd)
        ctx.mark_non_differentiable(mean, var, rstd)
        return y, mean, var, rstd

    @staticmethod
    def _needs(ctx):
        a, needs = ctx.attrs, ctx.needs_input_grad
        return needs[0], a["has_weight"] and needs[1], a["has_bias"] and needs[-1]

    @staticmethod
    def _reference(ctx):
        """(x, weight or None, xhat, 1/std, dims) rebuilt in ops from the saved x."""
        a = ctx.attrs
        x = ctx.saved_tensor(0)
        w = ctx.saved_tensor(1) if a["has_weight"] else None
        dims = _dims(x.ndim)
        xh, rs = _normalized(x, dims, a["eps"], False)
        return x, w, xh, rs, dims

    @staticmethod
    def backward(ctx, g, *_stats):
        a = ctx.attrs
        need_x, need_w, need_b = BatchNormTrain._needs(ctx)
        if STATE.hooks.capturing and not STATE.grad_enabled and not STATE.fw_levels:
            # tt.compile records a first-order backward: the kernel as an op (its replay gives
            # eager's backward_arrays bits); no graph of it is asked for, so none is needed
            saved = [ctx.saved_tensor(k) for k in range(3 + a["has_weight"])]   # x, [w], mean, rstd
            dx, dw, db = BatchNormBackward.apply(g, *saved, has_weight=a["has_weight"], eps=a["eps"])
            out = [dx if need_x else None]
        else:   # the reference's formula in ops, differentiable again
            x, w, xh, rs, dims = BatchNormTrain._reference(ctx)
            out = [_dx(g * _per_channel(w, x.ndim) if w is not None else g, xh, rs, dims, False)
                   if need_x else None]
            dw = sum_(g * xh, dim=dims) if need_w else None
            db = sum_(g, dim=dims) if need_b else None
        if a["has_weight"]:
            out.append(dw if need_w else None)
        if a["has_bias"]:
            out.append(db if need_b else None)
        return tuple(out)

    @staticmethod
    def jvp(ctx, tx, *tp):
        """d(xh * w + b) = (rstd * (I - ...) tx) * w + xh * tw + tb (the normalization's
        Jacobian is symmetric: backward's _dx serves); the statistics get no tangent."""
        a = ctx.attrs
        x, w, xh, rs, dims = BatchNormTrain._reference(ctx)
        tw = tp[0] if a["has_weight"] else None
        tb = tp[-1] if a["has_bias"] else None
        out = None
        if tx is not None:
            out = _dx(tx, xh, rs, dims, False)
            if w is not None:
                out = out * _per_channel(w, x.ndim)
        if tw is not None:
            t = xh * _per_channel(tw, x.ndim)
            out = t if out is None else out + t
        if tb is not None:
            t = _per_channel(tb, x.ndim)
            out = t if out is None else out + t
        return out, None, None, None

    @staticmethod
    def backward_arrays(ctx, g, *_stats):
        a = ctx.attrs
        need_x, need_w, need_b = BatchNormTrain._needs(ctx)
        saved = ctx.saved_arrays
        w = saved[1] if a["has_weight"] else None
        dx, dw, db = _backward(g, saved[0], w, saved[-2], saved[-1], a["eps"])
        out = [dx if need_x else None]
        if a["has_weight"]:
            out.append(dw if need_w else None)
        if a["has_bias"]:
            out.append(db if need_b else None)
        return tuple(out)


def _backward(g, x, w, mean, rstd, eps):
    """(dx, sum of g * xhat, sum of g) on arrays: the C kernel, NumPy's arithmetic where it
    refuses. The one computation behind eager's backward_arrays and a compiled replay's
    BatchNormBackward, so the two give the same bits."""
    got = c_batch_norm.backward(g, x, w, mean, rstd) if is_cpu(x) else None
    dx, dw, db = got if got is not None else _reference_backward(g, x, w, eps)
    return tuple(v.astype(x.dtype, copy=False) for v in (dx, dw, db))


class BatchNormBackward(Function):
    """BatchNormTrain's first-order backward as an op: (g, x, [weight], mean, 1/std) ->
    (dx, weight gradient, bias gradient). Recorded only by tt.compile's capture of a
    backward that builds no graph of its own (BatchNormTrain.backward), so it is never
    differentiated: a gradient of a gradient takes the ops formula instead."""
    name = "batch_norm_backward"

    @staticmethod
    def forward(ctx, g, x, *rest, has_weight, eps):
        return _backward(g, x, rest[0] if has_weight else None, rest[-2], rest[-1], eps)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("batch_norm_backward: recorded without a graph (tt.compile's first-order "
                           "backward); differentiating it again is a bug in BatchNormTrain.backward")


def why_not_fused(x, weight, bias):
    """None when BatchNormTrain takes the call (module docstring), else why not."""
    a = x.data
    if type(a) is not np.ndarray:
        return "not a NumPy array (the fused op has CPU kernels only)"
    if STATE.vmap:
        return "inside tt.func.vmap (the reference's ops have batching rules)"
    params = [p.data for p in (weight, bias) if p is not None]
    if STATE.hooks.capturing:
        # tt.compile records the op at any size and layout: a replay runs the kernels where
        # they take the call's arrays, as eager then does, and elsewhere the fallbacks, which
        # give the reference's bits, as eager's reference does (a step traced at a small size
        # and replayed at a big one would otherwise replay the reference where eager fuses)
        if not c_batch_norm.usable(a, *params, any_size=True):
            return "the C kernels do not take its dtype or rank (or are off, or no compiler)"
    elif not c_batch_norm.usable(a, *params):
        return ("the C kernels do not take it (off, no compiler, dtype, layout, fewer than "
                "MIN_ELEMENTS elements or spatial runs shorter than MIN_S)")
    return None


__all__ = ["BatchNormTrain", "BatchNormBackward", "why_not_fused"]
