"""embedding_bag, and embedding's max_norm and scale_grad_by_freq.

A bag's rows are looked up with embedding and reduced into their bag by index_add (sum,
mean) or scatter_reduce(amax) (max). Which bag each position belongs to comes from the
offsets by searchsorted, and a bag's count from index_add of ones: all recorded ops, so
the bags, the max's winners and the counts follow each call's ids under tt.compile.
Positions equal to padding_idx are sent to a spare bag that is cut off at the end.

max_norm renormalises the looked-up rows of weight in place, as torch's
embedding_renorm_ (under no_grad: the lookup then reads the renormalised rows).
scale_grad_by_freq divides each looked-up row's gradient by how often its id occurs in the
batch (index_add of ones, a recorded op), through ScaleGrad, an identity whose gradient is scaled.
"""
from ..core.function import Function
from ..core.grad_mode import no_grad
from ..core.tensor import Tensor
from ..messages import plain
from .elementwise import cast, gt, ne, where
from .indexing import embedding as _embedding
from .movement import _where

__all__ = ["embedding", "embedding_bag"]

_MODES = ("sum", "mean", "max")


class ScaleGrad(Function):
    """x forward; the gradient times `scale` (a tensor of x's shape, no gradient)."""
    name = "scale_grad"

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(scale)
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensor(0), None

    @staticmethod
    def jvp(ctx, tx, tscale):   # the identity forward; the scale acts on gradients only
        return tx


def _scale_grad(rows, ids, n):
    """Each row's gradient divided by the number of times its id occurs in ids."""
    from ..creation import ones, zeros
    flat = ids.reshape(-1)
    # occurrences of each id by index_add into a table of num_embeddings (bincount's size
    # would depend on the ids' values, which a compiled replay cannot follow)
    table = zeros(n, dtype=rows.dtype, device=rows.device).index_add(
        0, flat, ones(flat.shape[0], dtype=rows.dtype, device=rows.device))
    scale = (1.0 / table[flat]).reshape(*ids.shape, 1)
    return ScaleGrad.apply(rows, scale.expand(*rows.shape))


def _renorm_rows(weight, ids, max_norm, norm_type):
    """torch.embedding_renorm_: rows of weight looked up by ids whose norm exceeds max_norm
    are scaled to max_norm / (norm + 1e-7), in place and outside autograd."""
    with no_grad():
        flat = ids.reshape(-1)
        rows = weight[flat]                                           # (P, D)
        norms = rows.norm(norm_type, dim=1, keepdim=True)
        scale = where(gt(norms, max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.index_copy_(0, flat, rows * scale)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """torch.nn.functional.embedding: rows of weight for integer ids."""
    if sparse:
        raise NotImplementedError("embedding: sparse=True is not supported; tinytensor's "
                                  "gradients are dense (give sparse=False)")
    if max_norm is not None:
        _renorm_rows(weight, input, float(max_norm), float(norm_type))
    out = _embedding(input, weight, padding_idx)
    if scale_grad_by_freq and weight.requires_grad:
        out = _scale_grad(out, input, weight.shape[0])
    return out


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: input (B, L) is B bags of L ids;
    input (P,) with offsets (B,) (or (B + 1,) with include_last_offset) gives bag b the
    ids from offsets[b] to the next offset."""
    from ..creation import arange, zeros
    from .search_ops import searchsorted
    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode must be one of {_MODES}, got {plain(mode)!r}")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True is not supported; tinytensor's "
                                  "gradients are dense (give sparse=False)")
    if not isinstance(input, Tensor) or input.data.dtype.kind not in "iu":
        raise TypeError("embedding_bag: input must be an integer Tensor of ids")
    if weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight must be 2-d, got shape {tuple(weight.shape)}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights is only supported for "
                                      f"mode='sum', got mode={mode!r}{_where()}")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: per_sample_weights shape "
                             f"{tuple(per_sample_weights.shape)} must match input shape "
                             f"{tuple(input.shape)}{_where()}")
    n_emb, dim = weight.shape
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2-d, offsets must be None")
        b, length = input.shape
        ids = input.reshape(-1)
        bag = arange(b * length, device=input.device) // max(length, 1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("embedding_bag: a 1-d input needs 1-d offsets (the start of each bag)")
        b = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
        ids = input
        starts = offsets[:b] if include_last_offset else offsets
        # bag of each position: the last start at or before it
        bag = searchsorted(starts, arange(ids.shape[0], device=input.device), right=True) - 1
        psw = per_sample_weights
    else:
        raise ValueError(f"embedding_bag: input must be 1-d or 2-d, got shape "
                         f"{tuple(input.shape)}{_where()}")
    if max_norm is not None:
        _renorm_rows(weight, ids, float(max_norm), float(norm_type))
    rows = _embedding(ids, weight)                                    # (P, D)
    if scale_grad_by_freq and weight.requires_grad and mode != "max":
        rows = _scale_grad(rows, ids, n_emb)
    if padding_idx is not None:
        if not -n_emb <= padding_idx < n_emb:
            raise IndexError(f"embedding_bag: padding_idx {padding_idx} is out of range for "
                             f"{n_emb} embeddings{_where()}")
        padding_idx %= n_emb
        keep = ne(ids, padding_idx)
        bag = where(keep, bag, b)                                     # padding: the spare bag
    if psw is not None:
        rows = rows * psw.unsqueeze(1)
    out_shape = (b + 1, dim)
    if mode == "max":
        index = bag.unsqueeze(1).expand(*rows.shape)
        out = zeros(*out_shape, dtype=rows.dtype, device=rows.device).scatter_reduce(
            0, index, rows, "amax", include_self=False)
        return out[:b]
    out = zeros(*out_shape, dtype=rows.dtype, device=rows.device).index_add(0, bag, rows)
    if mode == "mean":
        ones = cast(bag >= 0, rows.dtype)
        count = zeros(b + 1, dtype=rows.dtype, device=rows.device).index_add(0, bag, ones)
        out = out / count.clamp(min=1).unsqueeze(1)
    return out[:b]
