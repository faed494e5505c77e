"""The rest of torch.nn.functional's losses: margin_ranking, hinge_embedding,
cosine_embedding, soft_margin, multilabel_soft_margin, multi_margin, multilabel_margin,
triplet_margin (with and without a distance function), poisson_nll, gaussian_nll and
linear_cross_entropy.

Each is written as torch's ATen/Python reference computes it (the same masks at the
hinge's corner, the same epsilons), in recorded ops, so every order of gradient comes from
the composition. Targets that select classes (multi_margin, multilabel_margin) are read by
gathers and comparisons on the tape, never on the host.
"""
import math

from ..core.tensor import Tensor
from .distances import pairwise_distance
from .elementwise import (cast, eq, exp, float_operand, ge, gt, log, log1p, logical_and, ne,
                          where)
from .losses import _check_reduction, _reduce
from .movement import _where

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "linear_cross_entropy"]


def _floats(op, *xs):
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(x).__name__}")
    return [float_operand(x, op) for x in xs]


def _same_shape(a, b, op, what=("input", "target")):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: {what[0]} shape {tuple(a.shape)} and {what[1]} shape "
                         f"{tuple(b.shape)} differ{_where()}")


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    _check_reduction(reduction, "margin_ranking_loss")
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss: all inputs should have the same number of "
                           f"dimensions, got input1 {tuple(input1.shape)}, input2 "
                           f"{tuple(input2.shape)}, target {tuple(target.shape)}{_where()}")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    """x where target is 1, max(0, margin - x) where target is -1 (both where neither)."""
    _check_reduction(reduction, "hinge_embedding_loss")
    margin_clamp = (margin - input).clamp(min=0)
    loss = where(ne(target, 1), margin_clamp, 0.0) + where(ne(target, -1), input, 0.0)
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""
    _check_reduction(reduction, "cosine_embedding_loss")
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected 1-d or 2-d inputs of equal shape, "
                           f"got {tuple(input1.shape)} and {tuple(input2.shape)}{_where()}")
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(f"cosine_embedding_loss: target shape {tuple(target.shape)} must "
                           f"have one dimension fewer than the inputs "
                           f"{tuple(input1.shape)}{_where()}")
    d = input1.ndim - 1
    eps = 1e-12   # torch's EPSILON
    prod = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod / (mag1 * mag2).sqrt()
    loss = where(eq(target, 1), 1 - cos, 0.0) + where(eq(target, -1), (cos - margin).clamp(min=0),
                                                      0.0)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, reduction="mean"):
    """log(1 + exp(-target * input)), computed as torch does (log1p of exp)."""
    _check_reduction(reduction, "soft_margin_loss")
    _same_shape(input, target, "soft_margin_loss")
    return _reduce(log1p(exp(-input * target)), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    """Mean over classes of the binary logistic loss of each class."""
    from .activations import logsigmoid
    _check_reduction(reduction, "multilabel_soft_margin_loss")
    _same_shape(input, target, "multilabel_soft_margin_loss")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    c = input.ndim - 1
    loss = loss.sum(c) / input.shape[c]
    return _reduce(loss, reduction)


def _class_targets(input, target, op):
    if input.ndim > 2 or input.numel() == 0 and input.ndim == 1:
        raise ValueError(f"{op}: expected a non-empty 0-d, 1-d or 2-d input, got shape "
                         f"{tuple(input.shape)}{_where()}")
    if target.data.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold class indices (integer), got {target.dtype.name}")
    return input.reshape(1, -1) if input.ndim < 2 else input         # (N, C)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):
    """sum over i != y of max(0, margin - x[y] + x[i]) ** p (times weight[y]), over C."""
    _check_reduction(reduction, "multi_margin_loss")
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}")
    x = _class_targets(input, target, "multi_margin_loss")
    n, c = x.shape
    t = target.reshape(-1)
    if t.shape[0] != n:
        raise ValueError(f"multi_margin_loss: target shape {tuple(target.shape)} does not fit "
                         f"input shape {tuple(input.shape)}{_where()}")
    t = t.unsqueeze(1)                                                 # (N, 1)
    xy = x.gather(1, t)                                                # (N, 1)
    z = margin - xy + x                                                # (N, C)
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * weight[t]
    from ..creation import arange
    not_target = ne(arange(c, device=x.device).unsqueeze(0), t)
    h = where(logical_and(gt(z, 0), not_target), h, 0.0)
    loss = h.sum(1) / c
    if input.ndim < 2:
        loss = loss.reshape(tuple(target.shape))                     # torch: the target's shape
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, reduction="mean"):
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])), over
    C; the targets of a row are its entries up to the first -1."""
    from ..creation import arange
    _check_reduction(reduction, "multilabel_margin_loss")
    x = _class_targets(input, target, "multilabel_margin_loss")
    _same_shape(input, target, "multilabel_margin_loss")
    n, c = x.shape
    y = target.reshape(n, c)
    # valid[j]: before the row's first -1 (a running product of "is a target")
    valid = cast(ge(y, 0), x.dtype).cumprod(1) > 0                     # (N, C_j)
    safe = where(valid, y, 0)
    classes = arange(c, device=x.device)
    hit = logical_and(eq(safe.unsqueeze(2), classes), valid.unsqueeze(2))   # (N, C_j, C_i)
    is_target = hit.any(1)                                             # (N, C_i)
    xj = x.gather(1, safe)                                             # (N, C_j)
    z = 1 - (xj.unsqueeze(2) - x.unsqueeze(1))                         # (N, C_j, C_i)
    keep = logical_and(valid.unsqueeze(2), ~is_target.unsqueeze(1))
    loss = where(logical_and(keep, gt(z, 0)), z, 0.0).sum((1, 2)) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d the p-norm pairwise distance."""
    _check_reduction(reduction, "triplet_margin_loss")
    _triplet_dims(anchor, positive, negative, "triplet_margin_loss")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        from .elementwise import minimum
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def _triplet_dims(a, p, n, op):
    if not (a.ndim == p.ndim == n.ndim):
        raise RuntimeError(f"{op}: anchor {tuple(a.shape)}, positive {tuple(p.shape)} and "
                           f"negative {tuple(n.shape)} must have the same number of "
                           f"dimensions{_where()}")


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance function (pairwise_distance by default)."""
    from .elementwise import minimum
    _check_reduction(reduction, "triplet_margin_with_distance_loss")
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, "
                         f"got {margin}")
    _triplet_dims(anchor, positive, negative, "triplet_margin_with_distance_loss")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input), or input - target * log(input + eps); with
    full, Stirling's approximation of log(target!) for targets above 1."""
    if size_average is not None or reduce is not None:
        raise ValueError("poisson_nll_loss: size_average and reduce are deprecated; give "
                         "reduction= instead")
    _check_reduction(reduction, "poisson_nll_loss")
    if log_input:
        loss = exp(input) - target * input
    else:
        loss = input - target * log(input + eps)
    if full:
        safe = where(gt(target, 1), target, 1.0)
        stirling = safe * log(safe) - safe + 0.5 * log(2 * math.pi * safe)
        loss = loss + where(gt(target, 1), stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi))."""
    _check_reduction(reduction, "gaussian_nll_loss")
    if not isinstance(var, Tensor):
        from ..creation import full_like
        var = full_like(input, float(var))
    if bool((var.data < 0).any()):   # a check, as nll_loss's range check: no value enters the tape
        raise ValueError(f"gaussian_nll_loss: var has negative entry/entries{_where()}")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)                                    # homoscedastic per row
        elif input.ndim == var.ndim and sum(
                v for i, v in zip(input.shape, var.shape) if i != v) == 1:
            pass                                                       # one size-1 dimension
        else:
            raise ValueError(f"gaussian_nll_loss: var shape {tuple(var.shape)} does not fit "
                             f"input shape {tuple(input.shape)}{_where()}")
    # torch clamps var in place under no_grad: the value is clamped, the gradient flows as
    # if it were not (the clamp's offset enters as a constant)
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target): torch's reference
    (its chunked `options` path computes the same value)."""
    from .cross_entropy import cross_entropy
    from .nn import linear
    k = linear_weight.shape[-1]
    out_features = tuple(linear_weight.shape[:-1])
    logits = linear(input, linear_weight.reshape(-1, k))
    logits = logits.reshape(*input.shape[:-1], *out_features)
    if linear_bias is not None:
        logits = logits + linear_bias
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         label_smoothing=label_smoothing)
