"""Source indices and weights of F.interpolate's filter modes: bicubic (torch's cubic
convolution, A = -0.75, taps clamped at the border) and antialias=True for bilinear and
bicubic (torch's separable anti-aliased resampling, the PIL filters: a triangle, or a cubic
with A = -0.5, stretched by the downscaling factor and normalised per output entry).

Both are functions of the shapes only (NumPy constants, no tensor values): interpolate
applies them as gathers and products, so gradients and double backward come with them."""
import math

import numpy as np

_A = -0.75


def _cubic1(x, a):
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic2(x, a):
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def source_scale(n_in, n_out, factor, align_corners):
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor is not None else n_in / n_out


def cubic_taps(n_in, n_out, factor, align_corners, np_dtype):
    """(index (n_out, 4), weight (n_out, 4)) of torch's upsample_bicubic2d along one axis."""
    scale = np_dtype.type(source_scale(n_in, n_out, factor, align_corners))
    dst = np.arange(n_out, dtype=np_dtype)
    src = dst * scale if align_corners else (dst + np_dtype.type(0.5)) * scale - np_dtype.type(0.5)
    base = np.floor(src)
    t = (src - base).astype(np_dtype)
    w = np.stack([_cubic2(t + 1, _A), _cubic1(t, _A), _cubic1(1 - t, _A), _cubic2(2 - t, _A)], 1)
    idx = np.clip(base.astype(np.int64)[:, None] + np.arange(-1, 3), 0, n_in - 1)
    return idx, w.astype(np_dtype)


def antialias_taps(n_in, n_out, factor, align_corners, cubic, np_dtype):
    """(index (n_out, K), weight (n_out, K)) of torch's anti-aliased resampling along one
    axis (_compute_weights_aa); unused taps get index 0 and weight 0."""
    scale = float(source_scale(n_in, n_out, factor, align_corners))
    half = 2.0 if cubic else 1.0                                      # interp_size / 2
    support = half * scale if scale >= 1.0 else half
    k = int(math.ceil(support)) * 2 + 1
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    idx = np.zeros((n_out, k), dtype=np.int64)
    w = np.zeros((n_out, k), dtype=np.float64)
    for i in range(n_out):       # n_out small loop over output positions: shape-only setup
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        size = min(max(min(int(center + support + 0.5), n_in) - lo, 0), k)
        x = np.abs((np.arange(size) + lo - center + 0.5) * invscale)
        if cubic:
            f = np.where(x < 1, _cubic1(x, -0.5), np.where(x < 2, _cubic2(x, -0.5), 0.0))
        else:
            f = np.where(x < 1, 1 - x, 0.0)
        total = f.sum()
        idx[i, :size] = np.arange(size) + lo
        w[i, :size] = f / total if total != 0 else f
    return idx, w.astype(np_dtype)
