"""Losses: nll_loss, mse_loss, binary_cross_entropy(_with_logits), kl_div, l1_loss,
smooth_l1_loss, huber_loss, cosine_similarity, normalize, one_hot, and the target checks
cross_entropy (ops/cross_entropy.py, beside its fused form) shares with nll_loss.

Written as compositions of primitive ops, so every order of gradient comes for free."""
import numpy as np

from ..messages import plain
from ..amp import cast_inputs
from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from .elementwise import (absolute, cast, clamp, eq, exp, float_operand, log, log1p, lt, ne, softplus,
                          where)
from .indexing import gather, getitem
from .forward_mode import no_tangent
from .movement import broadcast_tensors, movedim, norm_dim, squeeze, unsqueeze, _where
from .reduce import mean, norm, sum as sum_

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {plain(reduction)!r}")


def _reduce(loss, reduction):
    if reduction == "sum":
        return sum_(loss)
    if reduction == "mean":
        return mean(loss)
    return loss


def _class_last(x):
    """(N, C, d1, ...) -> (N, d1, ..., C); (C,) stays."""
    return movedim(x, 1, -1) if x.ndim > 1 else x


def _weighted_mean(total, weight_sum):
    """total / weight_sum, as torch: nan when every target is ignored (weight_sum == 0), yet
    the gradients stay zero rather than 0 * inf = nan; no host sync."""
    empty = eq(weight_sum, 0)
    return where(empty, float("nan"), total / where(empty, 1.0, weight_sum))


def _check_class_weight(weight, c, op):
    if weight is not None and tuple(weight.shape) != (c,):
        raise ValueError(f"{op}: weight must have shape ({c},), one entry per class, got "
                         f"{tuple(weight.shape)}{_where()}")


def _check_targets(logits, target, op):
    if logits.ndim == 0:
        raise ValueError(f"{op}: input must have a class dimension, got a 0-d tensor{_where()}")
    c = logits.shape[1] if logits.ndim > 1 else logits.shape[0]
    expected = (logits.shape[0],) + tuple(logits.shape[2:]) if logits.ndim > 1 else ()
    if tuple(target.shape) != expected:
        raise ValueError(f"{op}: target shape {tuple(target.shape)} does not match input shape "
                         f"{tuple(logits.shape)} (expected {expected}){_where()}")
    return c


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log likelihood of class indices `target` under log-probabilities `logp`."""
    logp, target, weight = cast_inputs("nll_loss", logp, target, weight)
    _check_reduction(reduction, "nll_loss")
    if target.data.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold class indices (integer), got {target.dtype.name}")
    nll, w = _picked(logp, target, weight, ignore_index, "nll_loss")
    if reduction == "mean":
        return _weighted_mean(sum_(nll), sum_(w))
    return _reduce(nll, reduction)


def _picked(logp, target, weight, ignore_index, op):
    c = _check_targets(logp, target, op)
    _check_class_weight(weight, c, op)
    valid = ne(target, ignore_index)
    tdata = target.data
    bad = (tdata != ignore_index) & ((tdata < 0) | (tdata >= c))
    if bool(bad.any()):
        raise IndexError(f"{op}: target {int(tdata[bad].reshape(-1)[0])} is out of range for "
                         f"{c} classes{_where()}")
    safe = where(valid, target, 0)
    lp = _class_last(logp)
    picked = squeeze(gather(lp, -1, unsqueeze(safe, -1)), -1)
    w = cast(valid, logp.dtype)
    if weight is not None:
        w = w * getitem(weight, safe)
    # drop ignored entries by where, not by * 0: their picked log-probability may be -inf
    return -(where(valid, picked, 0.0) * w), w


def mse_loss(input, target, reduction="mean"):
    input, target = cast_inputs("mse_loss", input, target)
    _check_reduction(reduction, "mse_loss")
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {tuple(input.shape)} and target shape "
                         f"{tuple(target.shape)} differ{_where()}")
    d = input - target
    return _reduce(d * d, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """Numerically stable BCE on logits: never computes log(sigmoid(x)) directly.

    -log(sigmoid(x)) is softplus(-x), whose derivative -sigmoid(-x) is smooth at 0 (a
    relu/abs split has a kink there that breaks the gradient at x == 0)."""
    input, target, weight, pos_weight = cast_inputs("binary_cross_entropy_with_logits", input,
                                                    target, weight, pos_weight)
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    if input.shape != target.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: input shape {tuple(input.shape)} and "
                         f"target shape {tuple(target.shape)} differ{_where()}")
    softplus_neg = softplus(-input, threshold=float("inf"))  # log(1 + exp(-x)), stable
    if pos_weight is not None:
        log_weight = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * input + log_weight * softplus_neg
    else:
        loss = (1.0 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


class OneHot(Function):
    """(..., num_classes) int64 rows with a 1 at each class index. The range is checked
    here, in the op, so a compiled program checks each call's indices."""

    @staticmethod
    def forward(ctx, t, num_classes):
        if t.size and (int(t.min()) < 0 or int(t.max()) >= num_classes):
            raise IndexError(f"one_hot: class values must be in [0, {num_classes}), got range "
                             f"[{int(t.min())}, {int(t.max())}]")
        xp = np if isinstance(t, np.ndarray) else __import__("cupy").get_array_module(t)
        return (t[..., None] == xp.arange(num_classes)).astype(np.int64)

    jvp = staticmethod(no_tangent)


def one_hot(t, num_classes=-1):
    if not isinstance(t, Tensor) or t.data.dtype.kind not in "iu":
        raise TypeError("one_hot: expected an integer Tensor of class indices")
    if num_classes < 0:
        # the result's size is read off the values: a compiled program cannot follow it
        STATE.hooks.read_value(t, "one_hot without num_classes")
        num_classes = int(t.data.max()) + 1 if t.numel() else 0
    return OneHot.apply(t, num_classes=int(num_classes))


# ---------------------------------------------------------------- regression and divergence losses
def _check_same_shape(input, target, op):
    if input.shape != target.shape:
        raise ValueError(f"{op}: input shape {tuple(input.shape)} and target shape "
                         f"{tuple(target.shape)} differ{_where()}")


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """BCE on probabilities. Each log is clamped at -100, as torch does, so a probability of
    exactly 0 or 1 gives a finite loss (100 per element) rather than inf."""
    input, target, weight = cast_inputs("binary_cross_entropy", input, target, weight)
    op = "binary_cross_entropy"
    _check_reduction(reduction, op)
    _check_same_shape(input, target, op)
    x = input.data
    if x.size and bool(((x < 0) | (x > 1) | (x != x)).any()):
        bad = x[(x < 0) | (x > 1) | (x != x)].reshape(-1)[0].item()
        raise ValueError(f"{op}: all elements of input should be between 0 and 1, got {bad}{_where()}")
    loss = -(target * clamp(log(input), min=-100.0) + (1.0 - target) * clamp(log1p(-input), min=-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _xlogx(t):
    """t * log(t), 0 at t == 0 (torch's xlogy(t, t))."""
    zero = eq(t, 0)
    return where(zero, 0.0, t * log(where(zero, 1.0, t)))


def kl_div(input, target, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise, with `input` log-probabilities; 'batchmean'
    divides the sum by the batch size (the first dimension), the true KL divergence."""
    input, target = cast_inputs("kl_div", input, target)
    op = "kl_div"
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS + ('batchmean',)}, "
                         f"got {plain(reduction)!r}")
    if log_target:
        loss = exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction == "batchmean":
        total = sum_(loss)
        return total / loss.shape[0] if loss.ndim else total
    return _reduce(loss, reduction)


def l1_loss(input, target, reduction="mean"):
    input, target = cast_inputs("l1_loss", input, target)
    _check_reduction(reduction, "l1_loss")
    _check_same_shape(input, target, "l1_loss")
    return _reduce(absolute(input - target), reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta == 0 is the L1 loss."""
    input, target = cast_inputs("smooth_l1_loss", input, target)
    op = "smooth_l1_loss"
    _check_reduction(reduction, op)
    _check_same_shape(input, target, op)
    if beta < 0:
        raise ValueError(f"{op}: beta must be >= 0, got {plain(beta)}")
    d = input - target
    a = absolute(d)
    if beta == 0:
        return _reduce(a, reduction)
    # d * d, not a * a: the square stays smooth at d == 0 for the second derivative
    return _reduce(where(lt(a, beta), (0.5 / beta) * (d * d), a - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss times delta."""
    input, target = cast_inputs("huber_loss", input, target)
    op = "huber_loss"
    _check_reduction(reduction, op)
    _check_same_shape(input, target, op)
    if delta <= 0:
        raise ValueError(f"{op}: delta must be > 0, got {plain(delta)}")
    d = input - target
    a = absolute(d)
    return _reduce(where(lt(a, delta), 0.5 * (d * d), delta * (a - 0.5 * delta)), reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / |x1| * x2 / |x2|, dim), each norm clamped below at eps, as torch computes it:
    dividing first keeps the result in [-1, 1]. torch clamps the norms in place without
    recording the clamp, so the gradient flows through each norm as if unclamped; adding
    the clamp's offset as a constant does the same."""
    x1, x2 = cast_inputs("cosine_similarity", x1, x2)
    x1, x2 = broadcast_tensors(float_operand(x1, "cosine_similarity"),
                               float_operand(x2, "cosine_similarity"))
    dim = norm_dim(dim, x1.ndim, "cosine_similarity")
    out = None
    for x in (x1, x2):
        n = norm(x, 2, dim=dim, keepdim=True)
        n = n + (clamp(n, min=eps) - n).detach()
        out = x / n if out is None else out * (x / n)
    return sum_(out, dim=dim)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p over dim, eps)."""
    input = float_operand(input, "normalize")
    return input / clamp(norm(input, p, dim=dim, keepdim=True), min=eps)
