"""The rest of torch.nn's losses as Modules: NLLLoss, CTCLoss, MarginRankingLoss,
HingeEmbeddingLoss, CosineEmbeddingLoss, SoftMarginLoss, MultiLabelSoftMarginLoss,
MultiMarginLoss, MultiLabelMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
PoissonNLLLoss, GaussianNLLLoss, and AdaptiveLogSoftmaxWithLoss.

Each holds torch.nn's options around its tinytensor.functional function; class weights are
buffers, as in torch.nn (state-dict keys and `.to()` follow).
"""
from collections import namedtuple

import tinytensor as tt
import tinytensor.functional as F

from .layers import Linear
from .losses import _Loss, _as_buffer
from .module import Module, ModuleList, Sequential


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", _as_buffer(weight, "weight", type(self).__name__))


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CTCLoss(_Loss):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class _MarginLoss(_Loss):
    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    def __init__(self, margin=1.0, reduction="mean"):
        super().__init__(margin, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return F.soft_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, reduction="mean"):
        super().__init__(weight, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(reduction)
        if size_average is not None or reduce is not None:
            raise ValueError("PoissonNLLLoss: size_average and reduce are deprecated; give "
                             "reduction= instead")
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


# ---------------------------------------------------------------- adaptive softmax
_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax over a large vocabulary (Grave et al. 2016), torch's layout: a head
    Linear over the shortlist plus one logit per tail cluster, and per cluster a
    Sequential(Linear(in, in // div_value ** (i + 1), bias=False), Linear(.., osz, bias=False)).

    forward(input, target) returns (output, loss): output[n] is the log-probability of
    target[n]. torch routes rows to clusters by their targets (a host-side nonzero); here
    every row's log-probability of every class is built (head plus each cluster's
    log-softmax) and the target's picked by a gather, so no row routing leaves the tape and
    the value and gradients are torch's."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        tail = []
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                   Linear(hsz, osz, bias=False, device=device, dtype=dtype)))
        self.tail = ModuleList(tail)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)              # (N, shortlist + clusters)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            idx = self.shortlist_size + i
            parts.append(cluster_logprob + head_logprob[:, idx:idx + 1])
        return tt.cat(parts, 1)                                       # (N, n_classes)

    def log_prob(self, input):
        """Log-probabilities of every class, (N, n_classes) (or (n_classes,))."""
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        out = self._get_full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row (argmax of log_prob)."""
        return self.log_prob(input).argmax(-1)

    def forward(self, input, target):
        batched = input.ndim == 2
        if input.ndim not in (1, 2) or target.ndim != input.ndim - 1:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input {tuple(input.shape)} and "
                               f"target {tuple(target.shape)} should be (N, in) and (N,), or "
                               f"(in,) and ()")
        if batched and input.shape[0] != target.shape[0]:
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        if input.shape[-1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input has {input.shape[-1]} features, "
                               f"expected in_features={self.in_features}")
        x = input if batched else input.unsqueeze(0)
        t = target if batched else target.unsqueeze(0)
        logprob = self._get_full_log_prob(x, self.head(x))            # (N, n_classes)
        output = logprob.gather(1, t.unsqueeze(1)).squeeze(1)         # (N,)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def extra_repr(self):
        return ""


class LinearCrossEntropyLoss(_WeightedLoss):
    """cross_entropy(linear(input), target) with the linear layer inside, as torch 2.13's:
    `self.linear` holds the (num_classes * prod(out_features), in_features) weight flat and
    forward reshapes it to (num_classes, *out_features, in_features), so state dicts match."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None,
                 dtype=None, reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0,
                 options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"LinearCrossEntropyLoss: expected weight shape to be {(num_classes,)}, "
                               f"got {tuple(weight.shape)}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise RuntimeError(f"LinearCrossEntropyLoss: expected label_smoothing to be in range "
                               f"[0, 1], got {label_smoothing}")
        super().__init__(weight, reduction)
        self.num_classes, self.out_features = num_classes, tuple(out_features)
        self.ignore_index, self.label_smoothing, self.options = ignore_index, label_smoothing, options
        flat = num_classes
        for d in self.out_features:
            flat *= d
        self.linear = Linear(in_features, flat, bias=bias, device=device, dtype=dtype)

    def forward(self, input, target):
        lin = self.linear
        w = lin.weight.reshape((self.num_classes, *self.out_features, lin.in_features))
        b = lin.bias.reshape((self.num_classes, *self.out_features)) if lin.bias is not None else None
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
