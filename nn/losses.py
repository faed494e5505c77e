"""Losses as Modules: CrossEntropyLoss, MSELoss, BCEWithLogitsLoss, BCELoss, KLDivLoss, L1Loss,
SmoothL1Loss, HuberLoss, CosineSimilarity.

Each is a thin holder of its options around the function in tinytensor.functional, so a
loss computed inside a model records its ops under the loss module's path. Class and
positive-example weights are registered as buffers (as in torch.nn), so `.to()` moves
them together with the model.
"""
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.autograd import plain

from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, name):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {plain(reduction)!r}")


def _as_buffer(value, name, owner):
    if value is None or isinstance(value, tt.Tensor):
        return value
    try:
        return tt.tensor(value, dtype=tt.get_default_dtype())
    except (TypeError, ValueError) as e:
        raise TypeError(f"{owner}: {name} must be a Tensor or a sequence of numbers, "
                        f"got {type(value).__name__}") from e


class CrossEntropyLoss(Module):
    """Cross-entropy of logits (N, C[, d...]) against class indices or class probabilities."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        _check_reduction(reduction, "CrossEntropyLoss")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.register_buffer("weight", _as_buffer(weight, "weight", "CrossEntropyLoss"))
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self):
        parts = [f"reduction='{self.reduction}'"]
        if self.ignore_index != -100:
            parts.append(f"ignore_index={self.ignore_index}")
        if self.label_smoothing:
            parts.append(f"label_smoothing={self.label_smoothing}")
        if self.weight is not None:
            parts.append("weight=...")
        return ", ".join(parts)


class _Loss(Module):
    """A loss whose options are `reduction` and a few named numbers (torch's _Loss: no
    extra_repr, so repr shows the class name alone)."""

    def __init__(self, reduction="mean"):
        super().__init__()
        _check_reduction(reduction, type(self).__name__)
        self.reduction = reduction


class _ReductionLoss(_Loss):
    """The same, its reduction shown in repr."""

    def extra_repr(self):
        return f"reduction='{self.reduction}'"


class MSELoss(_ReductionLoss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_ReductionLoss):
    """Binary cross-entropy on logits; `weight` scales each element, `pos_weight` (one per
    class, broadcast over the last dimension) the positive term."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", _as_buffer(weight, "weight", "BCEWithLogitsLoss"))
        self.register_buffer("pos_weight", _as_buffer(pos_weight, "pos_weight", "BCEWithLogitsLoss"))

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class L1Loss(_ReductionLoss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_ReductionLoss):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_ReductionLoss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_ReductionLoss):
    """Binary cross-entropy on probabilities; `weight` (a buffer) scales each element."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", _as_buffer(weight, "weight", "BCELoss"))

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class KLDivLoss(Module):
    """KL divergence of log-probabilities `input` from `target`; use reduction='batchmean'
    for the divergence itself ('mean' also divides by the number of classes)."""

    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        if reduction not in _REDUCTIONS + ("batchmean",):
            raise ValueError(f"KLDivLoss: reduction must be one of {_REDUCTIONS + ('batchmean',)}, "
                             f"got {plain(reduction)!r}")
        self.reduction = reduction
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self):
        return f"reduction='{self.reduction}', log_target={self.log_target}"


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, dim=self.dim, eps=self.eps)

    def extra_repr(self):
        return f"dim={self.dim}, eps={self.eps}"
