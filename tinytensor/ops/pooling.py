"""Pooling, N-d once: max, average, adaptive average/max and max-unpool in 1d/2d/3d.

Each reuses an op that is already differentiable to every order rather than adding a
backward of its own:

- max pooling finds each window's argmax on raw arrays (a strided view of the padded
  input, as conv's im2col) and then *gathers* those elements: gather's backward is a
  scatter-add and its backward a gather, so gradients and double backward route through
  the chosen element exactly as torch does (ties go to the first element of the window);
- average pooling is conv's im2col with a ones kernel on (N*C, 1, *spatial), divided by
  the per-position count (separable: a product of one count per dim);
- adaptive average pooling is separable too: one constant (out, in) averaging matrix per
  spatial dim, applied with matmul;
- adaptive max pooling gathers every variable-size window padded to the longest one by
  repeating its last element (which cannot change the max nor the first argmax).
"""
import math
import numbers

import numpy as np

from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..kernels import c_rows as _c_rows
from ..messages import plain
from .conv import Conv, _error, _pad, _x, batched, fit_pads, ntuple, windows
from .elementwise import float_operand
from .indexing import _GatherOp, _IndexInRange, _along_dim_key
from .forward_mode import no_tangent
from .reduce import mean
from .movement import cat, reshape
from ..device import xp_of as _xp

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _const(arr, like):
    return Tensor._make(arr, like._device, False)


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, op):
    """kernel, stride, dilation, (low, high) pads fitted to the windows, and the output size."""
    n = x.ndim - 2
    kernel = ntuple(kernel_size, n, "kernel_size", op)
    empty = stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0)
    stride = kernel if empty else ntuple(stride, n, "stride", op)
    padding = ntuple(padding, n, "padding", op)
    dilation = ntuple(dilation, n, "dilation", op)
    for name, vals in (("kernel_size", kernel), ("stride", stride), ("dilation", dilation)):
        if any(v <= 0 for v in vals):
            raise _error(f"{op}: {name} should be greater than zero, but got {name}={vals}")
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > k // 2:   # torch's rule, dilated or not (torch 2.13 refuses above it)
            raise _error(f"{op}: pad should be at most half of kernel size and non-negative, but got "
                         f"pad={p}, kernel_size={k} and dilation={d} (padding {padding})")
    spatial = tuple(x.shape[2:])
    out = []
    for s, k, st, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = s + 2 * p - d * (k - 1) - 1
        # torch's rule, flooring division included: with ceil_mode a span of -1 still has a window
        o = (span + (st - 1 if ceil_mode else 0)) // st + 1
        if ceil_mode and o > 0 and (o - 1) * st >= s + p:  # the last window must start inside
            o -= 1
        out.append(o)
    out = tuple(out)
    if any(o <= 0 for o in out):
        raise _error(f"{op}: given input size: {_x(x.shape[1:])}. Calculated output size: "
                     f"{_x((x.shape[1],) + out)}. Output size is too small (kernel_size={kernel}, "
                     f"stride={stride}, padding={padding}, dilation={dilation})")
    pads = fit_pads(spatial, kernel, stride, tuple((p, p) for p in padding), dilation, out)
    return kernel, stride, dilation, pads, out


def _take(x, idx, out, return_indices):
    """x's elements at the flat spatial indices `idx` (N, C, *out), through gather."""
    N, C = x.shape[:2]
    # sizes spelled out: -1 cannot be inferred for an empty batch
    vals = reshape(_GatherOp.apply(reshape(x, (N, C, math.prod(x.shape[2:]))),
                                   reshape(idx, (N, C, math.prod(out))), dim=2), (N, C) + out)
    return (vals, idx) if return_indices else vals


def _flat_index(xp, coords, spatial):
    flat = 0
    for c, s in zip(coords, spatial):
        flat = flat * s + c
    return flat.astype(np.int64)


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _grid(xp, size, i, n):
    """arange(size) shaped to broadcast along spatial dim i of n."""
    return xp.arange(size).reshape([size if j == i else 1 for j in range(n)])


# ---------------------------------------------------------------- max pooling
def max_pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False, n=2, op="max_pool"):
    x, added = batched(input, n, op)
    kernel, stride, dilation, pads, out = _geometry(x, kernel_size, stride, padding, dilation,
                                                    ceil_mode, op)
    _refuse_padding_only_windows(x.shape[2:], kernel, stride, dilation, pads, out, op)
    idx = MaxPoolIndex.apply(x, kernel=kernel, stride=stride, dilation=dilation, pads=pads, out=out)
    res = _take(x, idx, out, return_indices)
    return tuple(_unbatch(r, added) for r in res) if return_indices else _unbatch(res, added)


def _refuse_padding_only_windows(spatial, kernel, stride, dilation, pads, out, op):
    """Refuse a window whose every element is padding (a dilation wider than the input can
    step over it): it has no element to name, so no index, value or gradient to give (torch
    gives -inf and an index outside the input). A window is padding only where it is so
    along one spatial dim; along a dim, its first tap at or past element 0 is ceil(-start / d)."""
    for dim, (s, k, st, d, (lo, _), o) in enumerate(zip(spatial, kernel, stride, dilation, pads, out)):
        start = np.arange(o) * st - lo
        first = np.maximum(0, -(start // d))
        real = (first < k) & (start + first * d < s)
        if not real.all():
            raise _error(f"{op}: window {int(np.argmin(real))} along spatial dim {dim} covers only "
                         f"padding (input size {s}, kernel_size={k}, stride={st}, padding={lo}, "
                         f"dilation={d}): it has no input element to take the maximum of")


class MaxPoolIndex(Function):
    """Each window's winner as a flat index into the input's spatial dims, (N, C, *out)
    int64: a recorded op, so a compiled program picks this call's winners (its values and
    gradients follow them through the gather)."""
    jvp = staticmethod(no_tangent)   # integer indices (the values' tangent is the gather's)

    @staticmethod
    def forward(ctx, a, kernel, stride, dilation, pads, out):
        n = len(kernel)
        if a.size == 0:   # an empty batch or channel dim: no window, no winner (torch: empty)
            return _xp(a).zeros(a.shape[:2] + tuple(out), np.int64)
        if n == 2:   # one C pass over the windows (kernels/c_rows.py), the same winners
            got = _c_rows.max_pool2d_index(a, kernel, stride, dilation, [lo for lo, _ in pads], out)
            if got is not None:
                return got
        xp = _xp(a)
        win = windows(_pad(a, pads, _lowest(a.dtype)), kernel, stride, dilation, out)
        arg = win.reshape(win.shape[:2 + n] + (-1,)).argmax(axis=-1)
        ks = xp.unravel_index(arg, kernel)
        coords = []
        for i, (o, st, (lo, _), k, d) in enumerate(zip(out, stride, pads, ks, dilation)):
            c = _grid(xp, o, i, n) * st - lo + k * d
            # a padding element wins only a window whose real elements all hold the lowest
            # value; torch then names the window's first real element
            coords.append(xp.where(c < 0, c + (-c + d - 1) // d * d, c))
        return _flat_index(xp, coords, a.shape[2:])


def _unbatch(y, added):
    return reshape(y, tuple(y.shape[1:])) if added else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool1d on (N, C, L) or (C, L); indices are into L."""
    return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool2d on (N, C, H, W) or (C, H, W); indices are into H*W."""
    return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool3d on (N, C, D, H, W) or unbatched; indices are into D*H*W."""
    return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


# ---------------------------------------------------------------- average pooling
def avg_pool(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None, n=2, op="avg_pool"):
    x, added = batched(float_operand(input, op) if isinstance(input, Tensor) else input, n, op)
    kernel, stride, dilation, pads, out = _geometry(x, kernel_size, stride, padding, 1, ceil_mode,
                                                    op)
    N, C, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
    xp = x._device.xp
    ones = _const(xp.ones((1, 1) + kernel, dtype=x.data.dtype), x)
    y = Conv.apply(reshape(x, (N * C, 1) + spatial), ones, stride=stride, pads=pads,
                   dilation=dilation, groups=1)
    y = reshape(y, (N, C) + out)
    if divisor_override is not None:
        if not isinstance(divisor_override, numbers.Number) or divisor_override == 0:
            raise _error(f"{op}: divisor must be not zero, got divisor_override={plain(divisor_override)!r}")
        return _unbatch(y / divisor_override, added)
    count = np.ones(out)
    for i, (s, k, st, (lo, _), o) in enumerate(zip(spatial, kernel, stride, pads, out)):
        start = np.arange(o) * st - lo
        if count_include_pad:  # padding counts, the ceil_mode overhang past it does not
            c = np.minimum(start + k, s + lo) - start
        else:
            c = np.minimum(start + k, s) - np.maximum(start, 0)
        count = count * c.reshape([o if j == i else 1 for j in range(n)])
    return _unbatch(y / _const(xp.asarray(count, dtype=x.data.dtype), x), added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """torch.nn.functional.avg_pool1d on (N, C, L) or (C, L)."""
    return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """torch.nn.functional.avg_pool2d on (N, C, H, W) or (C, H, W)."""
    return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, 2, "avg_pool2d")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """torch.nn.functional.avg_pool3d on (N, C, D, H, W) or unbatched."""
    return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, 3, "avg_pool3d")


# ---------------------------------------------------------------- adaptive pooling
def _adaptive_sizes(output_size, spatial, op):
    n = len(spatial)
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size,) * n
    output_size = tuple(output_size)
    if len(output_size) == 1 and n > 1:
        output_size *= n
    if len(output_size) != n:
        raise _error(f"{op}: output_size {plain(output_size)} must have {n} entries for an input with "
                     f"spatial size {spatial}")
    sizes = tuple(s if o is None else int(o) for o, s in zip(output_size, spatial))
    if any(o < 0 for o in sizes):
        raise _error(f"{op}: output_size {plain(output_size)} must be non-negative")
    if any(s == 0 for s in spatial) and any(o > 0 for o in sizes):
        raise _error(f"{op}: input spatial size {spatial} is empty, so no output of size {sizes} exists")
    return sizes


def _bins(s, o):
    """torch's adaptive windows: bin i covers [floor(i*s/o), ceil((i+1)*s/o))."""
    i = np.arange(o)
    return (i * s) // o, -((-(i + 1) * s) // o)


def adaptive_avg_pool(input, output_size, n, op):
    x, added = batched(float_operand(input, op) if isinstance(input, Tensor) else input, n, op)
    spatial = tuple(x.shape[2:])
    sizes = _adaptive_sizes(output_size, spatial, op)
    # each bin a mean over its own elements: an inf or nan stays in its bins (an averaging
    # matrix of 0s and 1s spread it to all: 0 * inf). A dim pooled to one bin is one mean
    # over all the dims so pooled (global average pooling, a CNN's head: 8x64x32x32 f32
    # fwd+bwd, 2 threads, Zen 5: 0.89 -> 0.23 ms, torch 0.25); equal bins, one mean over a
    # split of the dim; others, torch's bins one by one
    whole = tuple(2 + i for i, o in enumerate(sizes) if o == 1 and spatial[i] > 1)
    y = mean(x, dim=whole, keepdim=True) if whole else x
    for i, (s, o) in enumerate(zip(spatial, sizes)):
        if o == s or o == 1:
            continue
        d = 2 + i
        if s % o == 0:
            y = mean(reshape(y, tuple(y.shape[:d]) + (o, s // o) + tuple(y.shape[d + 1:])), dim=d + 1)
        else:
            lead = (slice(None),) * d
            y = cat([mean(y[lead + (slice(int(a), int(b)),)], dim=d, keepdim=True) for a, b in zip(*_bins(s, o))],
                    dim=d)
    return _unbatch(y, added)


def adaptive_avg_pool1d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool1d."""
    return adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool2d; an entry None keeps that input size."""
    return adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool3d; an entry None keeps that input size."""
    return adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def adaptive_max_pool(input, output_size, return_indices, n, op):
    x, added = batched(input, n, op)
    spatial = tuple(x.shape[2:])
    sizes = _adaptive_sizes(output_size, spatial, op)
    if any(s == 0 for s in spatial):
        raise _error(f"{op}: expected a non-empty input, got shape {tuple(x.shape)}")
    idx = AdaptiveMaxPoolIndex.apply(x, sizes=sizes)
    res = _take(x, idx, sizes, return_indices)
    return tuple(_unbatch(r, added) for r in res) if return_indices else _unbatch(res, added)


class AdaptiveMaxPoolIndex(Function):
    """Each adaptive window's winner as a flat spatial index, (N, C, *sizes) int64 (a
    recorded op, as MaxPoolIndex)."""
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, a, sizes):
        n = len(sizes)
        xp = _xp(a)
        spatial = a.shape[2:]
        rows, key = [], [slice(None), slice(None)]
        for i, (s, o) in enumerate(zip(spatial, sizes)):
            start, end = _bins(s, o)
            width = int((end - start).max()) if o else 1
            # each window padded to the longest by repeating its last element
            r = np.minimum(start[:, None] + np.arange(width), end[:, None] - 1)
            rows.append(xp.asarray(r))
            key.append(xp.asarray(r).reshape([o if j == 2 * i else width if j == 2 * i + 1 else 1
                                              for j in range(2 * n)]))
        win = a[tuple(key)]  # (N, C, o1, w1, o2, w2, ...)
        win = win.transpose((0, 1) + tuple(range(2, 2 + 2 * n, 2)) + tuple(range(3, 3 + 2 * n, 2)))
        arg = win.reshape(win.shape[:2 + n] + (-1,)).argmax(axis=-1)
        ls = xp.unravel_index(arg, tuple(r.shape[1] for r in rows))
        coords = [r[_grid(xp, o, i, n), l] for i, (r, o, l) in enumerate(zip(rows, sizes, ls))]
        return _flat_index(xp, coords, spatial)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool1d."""
    return adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool2d; indices are into H*W."""
    return adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool3d; indices are into D*H*W."""
    return adaptive_max_pool(input, output_size, return_indices, 3, "adaptive_max_pool3d")


# ---------------------------------------------------------------- max unpooling
class MaxUnpool(Function):
    """Writes x at `indices` of a zero (N, C, *size) output; the gradient gathers them back."""

    @staticmethod
    def forward(ctx, x, indices, size):
        ctx.save_for_backward(indices)
        N, C = x.shape[:2]
        xp = _xp(x)
        out = xp.zeros((N, C, math.prod(size)), dtype=x.dtype)
        # a repeated index (overlapping pooling windows) holds one value: written, not added
        out[_along_dim_key(xp, indices.reshape(N, C, -1), 2)] = x.reshape(N, C, -1)
        return out.reshape((N, C) + tuple(size))

    @staticmethod
    def backward(ctx, g):
        idx = ctx.saved_tensor(0)
        N, C = idx.shape[:2]
        flat = _GatherOp.apply(reshape(g, (N, C, -1)), reshape(idx, (N, C, -1)), dim=2)
        return reshape(flat, tuple(idx.shape)), None

    @staticmethod
    def jvp(ctx, tx, tidx):   # linear in x: the tangent is unpooled to the same places
        return None if tx is None else MaxUnpool.apply(tx, ctx.saved_tensor(0), size=ctx.attrs["size"])


def max_unpool(input, indices, kernel_size, stride=None, padding=0, output_size=None, n=2,
               op="max_unpool"):
    x, added = batched(float_operand(input, op) if isinstance(input, Tensor) else input, n, op)
    if not isinstance(indices, Tensor) or indices.data.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be an integer Tensor (the indices of max_pool with "
                        f"return_indices=True), got {type(indices).__name__}"
                        f"{' of dtype ' + indices.dtype.name if isinstance(indices, Tensor) else ''}")
    if tuple(indices.shape) != tuple(input.shape):
        raise _error(f"{op}: expected indices of the input's shape {tuple(input.shape)}, got "
                     f"{tuple(indices.shape)}")
    idx = reshape(indices, tuple(x.shape)) if added else indices
    kernel = ntuple(kernel_size, n, "kernel_size", op)
    empty = stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0)
    stride = kernel if empty else ntuple(stride, n, "stride", op)
    padding = ntuple(padding, n, "padding", op)
    spatial = tuple(x.shape[2:])
    default = tuple((s - 1) * st - 2 * p + k for s, st, p, k in zip(spatial, stride, padding, kernel))
    if output_size is None:
        size = default
    else:
        size = tuple(int(s) for s in output_size)
        if len(size) == n + 2 or (added and len(size) == n + 1):
            size = size[-n:]
        if len(size) != n:
            raise _error(f"{op}: output_size {plain(tuple(output_size))} must have {n} or {n + 2} "
                         f"entries")
        for s, d, st in zip(size, default, stride):
            if not d - st < s < d + st:
                raise _error(f"{op}: invalid output_size {size} (dim size must be between "
                             f"{tuple(a - b + 1 for a, b in zip(default, stride))} and "
                             f"{tuple(a + b - 1 for a, b in zip(default, stride))})")
    if any(s <= 0 for s in size):
        raise _error(f"{op}: calculated output size {size} is too small for input {tuple(x.shape)}")
    if STATE.hooks.traced(idx):
        # a recorded check: every replay checks its indices (into the flattened output)
        idx = _IndexInRange.apply(idx, size=math.prod(size), dim="of the flattened output",
                                  op=op, word="an invalid max index, out of range")
    elif idx.numel():
        lo, hi = int(idx.data.min()), int(idx.data.max())
        if lo < 0 or hi >= math.prod(size):
            raise IndexError(f"{op}: found an invalid max index {lo if lo < 0 else hi} "
                             f"(output volumes are of size {'x'.join(str(s) for s in size)}): out of "
                             f"bounds")
    return _unbatch(MaxUnpool.apply(x, idx, size=size), added)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """torch.nn.functional.max_unpool1d: the inverse of max_pool1d(..., return_indices=True)."""
    return max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """torch.nn.functional.max_unpool2d: the inverse of max_pool2d(..., return_indices=True)."""
    return max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """torch.nn.functional.max_unpool3d: the inverse of max_pool3d(..., return_indices=True)."""
    return max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")
