"""Rearranging and resampling images: pixel_shuffle, pixel_unshuffle, channel_shuffle,
affine_grid, grid_sample, and torch's deprecated upsample / upsample_nearest /
upsample_bilinear (thin calls of interpolate).

The shuffles are reshapes and permutes. grid_sample follows torch's GridSampler kernels step
by step in tinytensor ops: unnormalise the grid, apply the padding mode (border clip,
reflection), take the corner (bilinear), the rounded (nearest, half to even) or the 4x4
(bicubic, A = -0.75) taps, gather them from the flattened input and blend. Tap positions
depend on the grid's values, so they are recorded ops too (floor, casts, gathers): a
compiled replay recomputes them for each call's grid. Gradients with respect to the input
and the grid come from the composition, as torch's do from its chain rule.
"""
import warnings

from ..core.tensor import Tensor
from ..messages import plain
from .elementwise import absolute, cast, eq, floor, ge, logical_and, lt, minimum, round_half_even, where
from .math_functions import fmod
from .interpolate import interpolate
from .movement import _where

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "affine_grid", "grid_sample",
           "upsample", "upsample_nearest", "upsample_bilinear"]


# ---------------------------------------------------------------- shuffles
def pixel_shuffle(input, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r)."""
    r = int(upscale_factor)
    if input.ndim < 3 or r <= 0 or input.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: input shape {tuple(input.shape)} needs at least 3 "
                           f"dimensions and channels (dimension -3) divisible by upscale_factor "
                           f"squared ({r}*{r}){_where()}")
    *b, c, h, w = input.shape
    n = len(b)
    x = input.reshape(*b, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)           # (*, oc, H, r, W, r)
    return x.reshape(*b, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W)."""
    r = int(downscale_factor)
    if (input.ndim < 3 or r <= 0 or input.shape[-2] % r or input.shape[-1] % r):
        raise RuntimeError(f"pixel_unshuffle: input shape {tuple(input.shape)} needs at least 3 "
                           f"dimensions and height and width divisible by downscale_factor "
                           f"{r}{_where()}")
    *b, c, h, w = input.shape
    n = len(b)
    x = input.reshape(*b, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)           # (*, C, r, r, H/r, W/r)
    return x.reshape(*b, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g * k, *) -> channels reordered as (N, k * g, *): torch's channel_shuffle."""
    g = int(groups)
    if g <= 0:
        raise ValueError(f"channel_shuffle: number of groups must be positive, got {groups}")
    if input.ndim < 3 or input.shape[1] % g:
        raise RuntimeError(f"channel_shuffle: input shape {tuple(input.shape)} needs at least 3 "
                           f"dimensions and channels divisible by groups {g}{_where()}")
    n, c, *rest = input.shape
    x = input.reshape(n, g, c // g, *rest).transpose(1, 2)            # (N, C/g, g, *)
    return x.reshape(n, c, *rest)


# ---------------------------------------------------------------- affine_grid
def _base_coords(n, align_corners, like):
    """torch's linspace_from_neg_one: n points across [-1, 1], pixel centres unless aligned."""
    from ..creation import linspace
    if n <= 1:
        return linspace(0.0, 0.0, n, dtype=like.dtype, device=like.device)
    c = linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return c if align_corners else c * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps theta (N, 2, 3)
    (or (N, 3, 4)) for an output of `size` (N, C, H, W) (or (N, C, D, H, W))."""
    from ..creation import ones
    from .stacking import stack
    if align_corners is None:
        warnings.warn("affine_grid: default align_corners is False, as in torch", stacklevel=2)
        align_corners = False
    size = tuple(int(s) for s in size)
    k = len(size) - 2
    if k not in (2, 3) or theta.ndim != 3 or tuple(theta.shape) != (size[0], k, k + 1):
        raise ValueError(f"affine_grid: theta shape {tuple(theta.shape)} does not fit size "
                         f"{size}: expected theta (N, 2, 3) for a 4-d size or (N, 3, 4) for a "
                         f"5-d size{_where()}")
    if not theta.dtype.is_floating_point:
        raise TypeError(f"affine_grid: theta must be floating, got {theta.dtype.name}")
    if min(size[2:]) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    spatial = size[2:]                                                # (H, W) or (D, H, W)
    axes = [_base_coords(s, align_corners, theta) for s in spatial]
    # coordinate c_j varies along output dimension j; the grid lists them x (W) first
    shape = tuple(spatial)
    parts = []
    for j in reversed(range(k)):
        view = [1] * k
        view[j] = spatial[j]
        parts.append(axes[j].reshape(*view).expand(*shape))
    parts.append(ones(*shape, dtype=theta.dtype, device=theta.device))
    base = stack(parts, -1).reshape(1, -1, k + 1)                   # (1, P, k+1)
    grid = base @ theta.transpose(1, 2)                              # (N, P, k)
    return grid.reshape(size[0], *spatial, k)


# ---------------------------------------------------------------- grid_sample
_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")
_A = -0.75  # torch's cubic convolution constant


def _unnormalize(coord, size, align_corners, vec=False):
    """[-1, 1] -> input pixels. torch's 2-d CPU kernel (vectorised) and its 3-d kernel
    (scalar) write it differently, and float32 rounds the two differently: both are kept."""
    if vec:
        if align_corners:
            return (coord + 1) * ((size - 1) / 2)
        return (coord + 1) * (size / 2) - 0.5
    if align_corners:
        return ((coord + 1) / 2) * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(coord, size):
    return coord.clamp(0, size - 1)


def _reflect(coord, twice_low, twice_high):
    if twice_low == twice_high:
        return coord * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = absolute(coord - low)
    extra = fmod(d, span)
    flips = floor(d / span).detach()
    even = eq(flips - floor(flips / 2) * 2, 0)
    return where(even, extra + low, span - extra + low)


def _reflect_vec(coord, size, align_corners):
    """The 2-d vectorised kernel's reflection: fold by whole double spans, then mirror."""
    low = 0.0 if align_corners else -0.5
    twice_span = 2.0 * (size - 1) if align_corners else 2.0 * size
    if twice_span <= 0:
        return coord * 0.0
    d = absolute(coord - low) if low else absolute(coord)
    extra = d - (d / twice_span).detach().trunc() * twice_span
    out = minimum(extra, twice_span - extra)
    return out + low if low else out


def _pad_coords(coord, size, padding_mode, align_corners, vec=False):
    if padding_mode == "border":
        return _clip(coord, size)
    if padding_mode == "reflection":
        if vec:
            return _clip(_reflect_vec(coord, size, align_corners), size)
        coord = (_reflect(coord, 0, 2 * (size - 1)) if align_corners
                 else _reflect(coord, -1, 2 * size - 1))
        return _clip(coord, size)
    return coord


class _Taps:
    """Gathers input entries at integer positions (one tensor per spatial axis, x first) of
    the output grid; positions outside the input read as 0."""

    def __init__(self, input):
        from ..dtypes import int64
        self.input, self.int64 = input, int64
        n, c, *spatial = input.shape
        self.spatial = tuple(spatial)                                 # (H, W) or (D, H, W)
        self.flat = input.reshape(n, c, -1)                           # (N, C, P_in)

    def __call__(self, positions):
        """positions: float tensors (N, *out) of whole numbers, x (W) first."""
        n, c = self.input.shape[:2]
        sizes = self.spatial[::-1]                                    # (W, H[, D])
        inside, flat = None, None
        for pos, size in zip(positions, sizes):
            ok = logical_and(ge(pos, 0), lt(pos, size))
            inside = ok if inside is None else logical_and(inside, ok)
        stride = 1
        for pos, size in zip(positions, sizes):
            idx = cast(where(inside, pos, 0.0), self.int64) * stride
            flat = idx if flat is None else flat + idx
            stride *= size
        out_shape = tuple(flat.shape[1:])
        index = flat.reshape(n, 1, -1).expand(n, c, flat[0].numel())   # (N, C, P_out)
        values = self.flat.gather(2, index).reshape(n, c, *out_shape)
        return where(inside.unsqueeze(1), values, 0.0)


def _cubic_coeffs(t):
    def conv1(x):
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def conv2(x):
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return [conv2(t + 1.0), conv1(t), conv1(1.0 - t), conv2((1.0 - t) + 1.0)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) (or (N, C, D, H, W)) at the normalised positions of grid
    (N, Ho, Wo, 2) (or (N, Do, Ho, Wo, 3)), x first, in [-1, 1] across the input."""
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode must be one of {_MODES}, got {plain(mode)!r}")
    if padding_mode not in _PADDING:
        raise ValueError(f"grid_sample: padding_mode must be one of {_PADDING}, got "
                         f"{plain(padding_mode)!r}")
    if align_corners is None:
        warnings.warn("grid_sample: default align_corners is False, as in torch", stacklevel=2)
        align_corners = False
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError("grid_sample: input and grid must be Tensors")
    k = input.ndim - 2
    if (k not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != k
            or grid.shape[0] != input.shape[0]):
        raise RuntimeError(f"grid_sample: input shape {tuple(input.shape)} and grid shape "
                           f"{tuple(grid.shape)} do not fit: expected (N, C, H, W) with "
                           f"(N, Ho, Wo, 2), or (N, C, D, H, W) with (N, Do, Ho, Wo, 3){_where()}")
    if mode == "bicubic" and k != 2:
        raise ValueError(f"grid_sample: bicubic interpolation only supports 4-d input, got "
                         f"shape {tuple(input.shape)}{_where()}")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"grid_sample: input ({input.dtype.name}) and grid "
                           f"({grid.dtype.name}) must have the same dtype{_where()}")
    taps = _Taps(input)
    sizes = tuple(input.shape[2:])[::-1]                              # (W, H[, D])
    vec = k == 2
    coords = [_unnormalize(grid[..., j], sizes[j], align_corners, vec) for j in range(k)]
    if mode == "bicubic":
        return _bicubic(taps, coords, sizes, padding_mode, align_corners)
    coords = [_pad_coords(c, s, padding_mode, align_corners, vec) for c, s in zip(coords, sizes)]
    if mode == "nearest":
        return taps([round_half_even(c) for c in coords])
    lows = [floor(c) for c in coords]
    out = None
    for corner in range(2 ** k):                                      # x fastest: nw, ne, sw, se
        bits = [(corner >> j) & 1 for j in range(k)]
        w = None
        for c, lo, bit in zip(coords, lows, bits):
            if vec:   # the 2-d kernel's 1 - (c - lo); the 3-d kernel's (lo + 1) - c
                f = (c - lo) if bit else 1.0 - (c - lo)
            else:
                f = (c - lo) if bit else ((lo + 1) - c)
            w = f if w is None else w * f
        v = taps([lo + 1 if bit else lo for lo, bit in zip(lows, bits)]) * w.unsqueeze(1)
        out = v if out is None else out + v
    return out


def _bicubic(taps, coords, sizes, padding_mode, align_corners):
    (ix, iy), (w, h) = coords, sizes
    x0, y0 = floor(ix), floor(iy)
    cx, cy = _cubic_coeffs(ix - x0), _cubic_coeffs(iy - y0)
    out = None
    for i in range(4):
        yi = _tap_coord(y0 + (i - 1), h, padding_mode, align_corners)
        row = None
        for j in range(4):
            xj = _tap_coord(x0 + (j - 1), w, padding_mode, align_corners)
            v = taps([xj, yi]) * cx[j].unsqueeze(1)
            row = v if row is None else row + v
        v = row * cy[i].unsqueeze(1)
        out = v if out is None else out + v
    return out


def _tap_coord(c, size, padding_mode, align_corners):
    """torch's get_value_bounded: pad one tap's coordinate, then truncate it to an index."""
    if padding_mode == "zeros":
        return c
    return _pad_coords(c, size, padding_mode, align_corners, True).detach().trunc()


# ---------------------------------------------------------------- upsample
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated in torch in favour of interpolate; the same call."""
    warnings.warn("upsample is deprecated, use interpolate instead (as in torch)", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("upsample_nearest is deprecated, use interpolate instead (as in torch)",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Bilinear upsampling with align_corners=True, as torch's deprecated function."""
    warnings.warn("upsample_bilinear is deprecated, use interpolate instead (as in torch)",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- torch.grid_sampler_*
_MODE_CODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING_CODES = {0: "zeros", 1: "border", 2: "reflection"}


def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, k, op):
    if input.ndim != k + 2:
        raise RuntimeError(f"{op}: expected a {k + 2}-d input, got shape {tuple(input.shape)}")
    if interpolation_mode not in _MODE_CODES or padding_mode not in _PADDING_CODES:
        raise ValueError(f"{op}: interpolation_mode must be 0, 1 or 2 (bilinear, nearest, "
                         f"bicubic) and padding_mode 0, 1 or 2 (zeros, border, reflection), got "
                         f"{plain(interpolation_mode)} and {plain(padding_mode)}")
    return grid_sample(input, grid, _MODE_CODES[interpolation_mode], _PADDING_CODES[padding_mode],
                       bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_2d: grid_sample of a 4-d input with the modes as integer codes."""
    return _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, 2,
                         "grid_sampler_2d")


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_3d: grid_sample of a 5-d input with the modes as integer codes."""
    return _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, 3,
                         "grid_sampler_3d")
