"""F.interpolate: resampling the spatial dimensions of (N, C, d1[, d2[, d3]]) inputs.

Each spatial dimension is resampled on its own (the modes here are separable): 'nearest'
and 'nearest-exact' gather one source entry per output entry, 'linear' / 'bilinear' /
'trilinear' gather two neighbours and blend them with constant weights, 'area' is the
adaptive average pool. Gathers (x[index]) and products are ordinary ops, so gradients and
double backward come with them. Source positions follow torch's kernels exactly
(upsample.h: nearest in float32, linear in the input's precision), so a resample agrees
with torch's to the last bit of the index."""
import math

import numpy as np

from ..core.tensor import Tensor
from ..messages import plain
from .movement import _where
from .pooling import adaptive_avg_pool

__all__ = ["interpolate"]

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area", "bicubic")


def _per_dim(value, n, name):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"interpolate: {name} {tuple(value)} must give one entry per spatial "
                             f"dimension of the input ({n}){_where()}")
        return tuple(value)
    return (value,) * n


def _output_sizes(spatial, size, scale_factor, recompute):
    n = len(spatial)
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor, got "
                         + ("both" if size is not None else "neither") + _where())
    if size is not None:
        sizes = tuple(int(s) for s in _per_dim(size, n, "size"))
        scales = (None,) * n
    else:
        factors = tuple(float(f) for f in _per_dim(scale_factor, n, "scale_factor"))
        sizes = tuple(math.floor(float(i * f)) for i, f in zip(spatial, factors))
        scales = (None,) * n if recompute else factors
    if any(s <= 0 for s in sizes) or 0 in spatial:
        raise RuntimeError(f"interpolate: input and output sizes must be greater than 0, got input "
                           f"{tuple(spatial)} and output {sizes}{_where()}")
    return sizes, scales


def _scale(n_in, n_out, factor, align_corners):
    """Source step per output step (torch's area_pixel_compute_scale)."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor is not None else n_in / n_out


def _nearest_index(n_in, n_out, factor, exact):
    if n_in == n_out:
        return np.arange(n_out)
    scale = np.float32(1.0 / factor if factor is not None else n_in / n_out)
    dst = np.arange(n_out, dtype=np.float32) + np.float32(0.5 if exact else 0.0)
    return np.minimum(np.floor(dst * scale).astype(np.int64), n_in - 1)


def _linear_weights(n_in, n_out, factor, align_corners, np_dtype):
    scale = np_dtype.type(_scale(n_in, n_out, factor, align_corners))
    dst = np.arange(n_out, dtype=np_dtype)
    if align_corners:
        src = dst * scale
    else:  # pixel centres; positions left of the first centre take the first entry
        src = np.maximum((dst + np_dtype.type(0.5)) * scale - np_dtype.type(0.5), 0)
    i0 = src.astype(np.int64)
    i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
    w1 = src - i0
    return i0, i1, (1 - w1).astype(np_dtype), w1.astype(np_dtype)


def _gather(x, dim, index):
    return x[(slice(None),) * dim + (x.device.xp.asarray(index),)]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate for the modes nearest, nearest-exact, linear (3-d
    input), bilinear (4-d), trilinear (5-d) and area."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected a Tensor, got {type(input).__name__}")
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {plain(mode)!r} is not supported; expected one "
                                  f"of {_MODES}{_where()}")
    mode = str(mode)  # np.str_ would print as np.str_('linear')
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"interpolate: expected a 3-d, 4-d or 5-d input (N, C, d1, ...), "
                                  f"got shape {tuple(input.shape)}{_where()}")
    if mode in _LINEAR and input.ndim != _LINEAR[mode] + 2:
        raise NotImplementedError(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-d input, "
                                  f"got shape {tuple(input.shape)}{_where()}")
    if mode == "bicubic" and input.ndim != 4:
        raise NotImplementedError(f"interpolate: mode 'bicubic' needs a 4-d input, got shape "
                                  f"{tuple(input.shape)}{_where()}")
    if align_corners is not None and mode not in _LINEAR and mode != "bicubic":
        raise ValueError(f"interpolate: align_corners can only be set with the interpolating "
                         f"modes {tuple(_LINEAR)}, got mode {mode!r}{_where()}")
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise NotImplementedError(f"interpolate: anti-alias option is restricted to bilinear and "
                                  f"bicubic modes and requires a 4-d input, got mode {mode!r} and "
                                  f"shape {tuple(input.shape)}{_where()}")
    dt = input.data.dtype
    if dt.kind != "f" and not (dt == np.uint8 and mode.startswith("nearest")):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not implemented for "
                                  f"{input.dtype.name} inputs, as in torch (floats, and uint8 for "
                                  f"the nearest modes){_where()}")
    spatial = tuple(input.shape[2:])
    sizes, scales = _output_sizes(spatial, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return adaptive_avg_pool(input, sizes, len(sizes), "interpolate")
    if mode == "bicubic" or antialias:
        return _filtered(input, sizes, scales, mode, bool(align_corners), antialias)
    x = input
    for k, (n_in, n_out, factor) in enumerate(zip(spatial, sizes, scales)):
        dim = 2 + k
        if mode in ("nearest", "nearest-exact"):
            if n_in != n_out:
                x = _gather(x, dim, _nearest_index(n_in, n_out, factor, mode == "nearest-exact"))
            continue
        i0, i1, w0, w1 = _linear_weights(n_in, n_out, factor, bool(align_corners), x.data.dtype)
        shape = (n_out,) + (1,) * (x.ndim - dim - 1)
        w0 = Tensor._make(x.device.xp.asarray(w0.reshape(shape)), x.device, False)
        w1 = Tensor._make(x.device.xp.asarray(w1.reshape(shape)), x.device, False)
        x = _gather(x, dim, i0) * w0 + _gather(x, dim, i1) * w1
    return x if x is not input else input.clone()


def _filtered(input, sizes, scales, mode, align_corners, antialias):
    """Bicubic and anti-aliased modes: per axis, width first as torch's separable kernel,
    a weighted sum of K gathered taps (ops/interpolate_filters.py)."""
    from .interpolate_filters import antialias_taps, cubic_taps, source_scale
    x = input
    spatial = tuple(input.shape[2:])
    for k in reversed(range(len(sizes))):
        dim, n_in, n_out, factor = 2 + k, spatial[k], sizes[k], scales[k]
        if antialias:
            idx, w = antialias_taps(n_in, n_out, factor, align_corners, mode == "bicubic",
                                    x.data.dtype)
        elif n_in == n_out and source_scale(n_in, n_out, factor, align_corners) == 1.0:
            continue                                                  # the identity
        else:
            idx, w = cubic_taps(n_in, n_out, factor, align_corners, x.data.dtype)
        shape = (n_out,) + (1,) * (x.ndim - dim - 1)
        out = None
        for j in range(idx.shape[1]):
            wj = Tensor._make(x.device.xp.asarray(w[:, j].reshape(shape)), x.device, False)
            term = _gather(x, dim, idx[:, j]) * wj
            out = term if out is None else out + term
        x = out
    return x if x is not input else input.clone()
