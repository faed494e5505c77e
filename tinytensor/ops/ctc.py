"""ctc_loss: the connectionist temporal classification loss (Graves et al. 2006).

The forward (alpha) recursion runs over time in Python (T steps) and is vectorised over
the batch and the extended label sequence (blank, l1, blank, l2, ..., blank): each step is
a three-way log-sum-exp of the previous alphas (stay, advance one, skip a blank between two
different labels) plus the log-probability of each extended label. The extended labels,
the skip mask, the per-sample freezing past input_lengths and the final pick at
2 * target_length are all recorded ops of the targets and lengths, so tt.compile replays
follow each call's alignments.

Gradient: torch's ctc backward returns exp(log_probs) - posterior (for t < input_length),
the gradient with respect to the logits of a log_softmax, not the derivative with respect to
log_probs themselves (which is -posterior). tinytensor matches torch: a term whose value is
exactly 0 (log_probs - log_probs.detach()) carries exp(log_probs) into the gradient.
"""
from ..core.tensor import Tensor
from ..messages import plain
from .elementwise import cast, eq, exp, isinf, log, logical_and, lt, maximum, ne, where
from .losses import _check_reduction
from .movement import _where

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")


def _lse(*xs):
    """log(sum(exp(x))) of same-shaped tensors that may be -inf, without nan gradients."""
    m = xs[0]
    for x in xs[1:]:
        m = maximum(m, x)
    shift = where(eq(m, _NEG_INF), 0.0, m).detach()
    s = None
    for x in xs:
        e = exp(x - shift)
        s = e if s is None else s + e
    empty = eq(s, 0)
    return where(empty, _NEG_INF, log(where(empty, 1.0, s)) + shift)


def _lengths(v, n, device, op, what):
    from ..creation import tensor
    from ..dtypes import int64
    if isinstance(v, Tensor):
        t = cast(v, int64).reshape(-1)
    else:
        t = tensor([int(x) for x in (v if isinstance(v, (list, tuple)) else [v])], dtype=int64,
                   device=device)
    if t.shape[0] != n:
        raise ValueError(f"{op}: {what} has {t.shape[0]} entries for a batch of {n}{_where()}")
    return t


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """-log p(target | log_probs) summed over all CTC alignments; log_probs (T, N, C) (or
    (T, C)), targets (N, S) padded or 1-d concatenated, lengths per sample."""
    from ..creation import arange, full
    from .stacking import cat, stack
    op = "ctc_loss"
    _check_reduction(reduction, op)
    if not isinstance(log_probs, Tensor) or log_probs.ndim not in (2, 3):
        raise ValueError(f"{op}: log_probs must be (T, N, C) or (T, C), got "
                         f"{tuple(getattr(log_probs, 'shape', ()))}{_where()}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs           # (T, N, C)
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise ValueError(f"{op}: blank {plain(blank)} must be a class index below {c}{_where()}")
    if unbatched and targets.ndim == 1:
        targets = targets.unsqueeze(0)
    il = _lengths(input_lengths, n, lp.device, op, "input_lengths")
    tl = _lengths(target_lengths, n, lp.device, op, "target_lengths")
    if targets.ndim == 2:
        padded = targets                                              # (N, S)
    elif targets.ndim == 1:   # concatenated: row n starts at the sum of earlier lengths
        total = targets.shape[0]
        starts = tl.cumsum(0) - tl
        pos = (starts.unsqueeze(1) + arange(max(total, 1), device=lp.device)).clamp(
            max=max(total - 1, 0))
        padded = targets[pos] if total else full((n, 1), blank, dtype=targets.dtype,
                                                 device=lp.device)
    else:
        raise ValueError(f"{op}: targets must be (N, S) or 1-d, got {tuple(targets.shape)}")
    s = padded.shape[1]
    padded = padded.clamp(0, c - 1)
    blanks = full((n, s), blank, dtype=padded.dtype, device=lp.device)
    ext = stack([blanks, padded], -1).reshape(n, 2 * s)
    ext = cat([ext, blanks[:, :1]], 1)                                # (N, L) L = 2S + 1
    width = 2 * s + 1
    # skipping from l'_{s-2} to l'_s is allowed between two different labels
    prev2 = cat([full((n, 2), blank, dtype=ext.dtype, device=lp.device), ext[:, :-2]], 1)
    skip = logical_and(ne(ext, blank), ne(ext, prev2))                # (N, L)
    lp_ext = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, width))   # (T, N, L)
    neg1 = full((n, 1), _NEG_INF, dtype=lp.dtype, device=lp.device)
    neg2 = full((n, 2), _NEG_INF, dtype=lp.dtype, device=lp.device)
    first = lt(arange(width, device=lp.device), 2).unsqueeze(0)      # positions 0 and 1
    alpha = where(first, lp_ext[0], _NEG_INF)
    for t in range(1, t_max):
        stay = alpha
        step = cat([neg1, alpha[:, :-1]], 1)
        jump = where(skip, cat([neg2, alpha[:, :-2]], 1), _NEG_INF)
        new = _lse(stay, step, jump) + lp_ext[t]
        alpha = where(lt(t, il).unsqueeze(1), new, alpha)             # frozen past the input
    end = (2 * tl).unsqueeze(1)                                       # (N, 1)
    last = alpha.gather(1, end).squeeze(1)
    before = where(eq(tl, 0), _NEG_INF, alpha.gather(1, (end - 1).clamp(min=0)).squeeze(1))
    nll = -_lse(last, before)                                         # (N,)
    # torch's gradient convention (module docstring): exp(lp) for t < input_length
    live = cast(lt(arange(t_max, device=lp.device).unsqueeze(1), il), lp.dtype)   # (T, N)
    term = (exp(lp).detach() * (lp - lp.detach()) * live.unsqueeze(2)).sum((0, 2))
    loss = nll + term
    if zero_infinity:
        loss = where(isinf(nll), 0.0, loss)
    if reduction == "mean":
        return (loss / tl.clamp(min=1)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss
