"""Channel-wise and self-normalising dropouts: dropout1d/2d/3d, alpha_dropout,
feature_alpha_dropout.

All follow torch's `_dropout_impl`: a keep mask drawn with probability 1 - p (per element,
or per (sample, channel) for the feature variants, broadcast over the spatial dimensions),
scaled by 1 / (1 - p) for plain dropout, or turned into torch's affine `x * a * keep + b`
for the alpha variants so that a SELU network keeps mean 0 and variance 1. The mask is one
recorded draw (random_ops.DropoutMask), so tt.compile's replay draws a fresh one each call.
"""
import math
import warnings

from ..core.tensor import Tensor
from .inplace import apply_inplace
from .movement import _where
from .random_ops import DropoutMask

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_ALPHA = 1.7580993408473766  # torch's alpha' = -selu_scale * selu_alpha


def _check(input, p, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _mask(x, p, feature, op):
    """keep / (1 - p): per element, or per (N, C) broadcast over the rest."""
    if feature:
        if x.ndim < 2:
            raise RuntimeError(f"{op}: feature dropout needs an input of at least 2 dimensions "
                               f"(N, C, ...), got shape {tuple(x.shape)}{_where()}")
        shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    else:
        shape = tuple(x.shape)
    return DropoutMask.apply(shape=shape, dtype=x.dtype, device=x.device, p=float(p))


def _dropout(x, p, training, inplace, alpha, feature, op):
    """torch's _dropout_impl for one of its four variants."""
    if p == 0 or not training or x.numel() == 0:
        return x

    def fn(t):
        if p == 1:
            return t * 0.0
        m = _mask(t, p, feature, op)                     # keep / (1 - p)
        if not alpha:
            return t * m
        a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
        keep = m * (1.0 - p)                             # 0 or 1
        b = (keep - 1.0) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
        return t * (keep * a) + b
    return apply_inplace(x, op + "_", fn) if inplace else fn(x)


def _unbatched(input, batched_ndim, p, training, inplace, op):
    """Feature dropout with an unbatched input given a batch dimension of 1."""
    if input.ndim == batched_ndim:
        return _dropout(input, p, training, inplace, False, True, op)
    if inplace:
        # the result is written back through the view-free path: drop on a batched copy
        return apply_inplace(input, op + "_", lambda t: _dropout(
            t.unsqueeze(0), p, training, False, False, True, op).squeeze(0))
    return _dropout(input.unsqueeze(0), p, training, False, False, True, op).squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability p."""
    _check(input, p, "dropout1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: expected a 2-d or 3-d input, (C, L) or (N, C, L), got "
                           f"shape {tuple(input.shape)}{_where()}")
    return _unbatched(input, 3, p, training, inplace, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) inputs with probability p. As torch, a 3-d input
    is read as (N, C, L) (with torch's warning), not as an unbatched (C, H, W)."""
    _check(input, p, "dropout2d")
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: received a {input.ndim}-D input, which is deprecated and will "
                      "raise an error in a future release of torch", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: received a 3D input and assuming that channel-wise 1D dropout "
                      "is desired - input is interpreted as shape (N, C, L), as in torch",
                      stacklevel=2)
    return _dropout(input, p, training, inplace, False, True, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability p."""
    _check(input, p, "dropout3d")
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: received a {input.ndim}-D input, which is deprecated and will "
                      "raise an error in a future release of torch", stacklevel=2)
    return _unbatched(input, 5, p, training, inplace, "dropout3d")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps a SELU network's mean and variance: dropped entries are set to
    SELU's negative saturation value and the result is rescaled (torch's alpha_dropout)."""
    _check(input, p, "alpha_dropout")
    return _dropout(input, p, training, inplace, True, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout on whole channels (N, C, ...)."""
    _check(input, p, "feature_alpha_dropout")
    return _dropout(input, p, training, inplace, True, True, "feature_alpha_dropout")
