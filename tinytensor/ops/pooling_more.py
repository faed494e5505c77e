"""lp_pool1d/2d/3d and fractional_max_pool2d/3d.

lp_pool is torch's composition: the average pool of x^p, times the window size, to the
power 1/p (with torch's sign * relu(abs) guard). Fractional max pooling places its windows
at pseudo-random starts from `_random_samples` (N, C, k), uniform in [0, 1): the starts are
computed from the samples by recorded ops (FractionalStarts), the windows are gathered and
their maximum taken, so the result, its indices and its gradient follow each call's samples
(drawn by a recorded op when not given) and a compiled replay never freezes them.
"""
import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from .distributions import _draw
from .elementwise import _xp, absolute, relu, sign
from .forward_mode import no_tangent
from .movement import _where
from .pooling import avg_pool1d, avg_pool2d, avg_pool3d

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "fractional_max_pool2d",
           "fractional_max_pool3d"]


def _tuple(v, n):
    return tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else (int(v),) * n


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, n, pool):
    k = _tuple(kernel_size, n)
    out = pool(input ** norm_type, k, stride if stride is not None else None, 0, ceil_mode)
    size = int(np.prod(k))
    return ((sign(out) * relu(absolute(out))) * size) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p) on (N, C, L) or (C, L)."""
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 1, avg_pool1d)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 2, avg_pool2d)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 3, avg_pool3d)


# ---------------------------------------------------------------- fractional max pooling
class FractionalStarts(Function):
    """Window starts (N, C, out) along one dimension from samples (N, C) in [0, 1), as
    torch's generate_intervals: alpha = (in - k) / (out - 1) in the samples' precision,
    start_i = int((i + u) * alpha) - int(u * alpha), the last start in - k."""

    @staticmethod
    def forward(ctx, u, n_in, n_out, k):
        xp = _xp(u)
        dt = u.dtype.type
        starts = xp.empty(u.shape + (n_out,), dtype=np.int64)
        if n_out > 1:
            alpha = dt(n_in - k) / dt(n_out - 1)
            i = xp.arange(n_out - 1, dtype=u.dtype)
            starts[..., :-1] = (((i + u[..., None]) * alpha).astype(np.int64)
                                - (u[..., None] * alpha).astype(np.int64))
        starts[..., -1] = n_in - k
        return starts

    @staticmethod
    def backward(ctx, g):   # integer positions: no gradient
        return (None,)

    jvp = staticmethod(no_tangent)


def _fractional(input, kernel_size, output_size, output_ratio, return_indices, samples, n, op):
    from ..creation import arange
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(input.shape)}{_where()}")
    batched = input.ndim == n + 2
    x = input if batched else input.unsqueeze(0)                      # (N, C, *in)
    spatial = tuple(x.shape[2:])
    k = _tuple(kernel_size, n)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = tuple(float(r) for r in (output_ratio if isinstance(output_ratio, (list, tuple))
                                         else (output_ratio,) * n))
        output_size = tuple(int(s * r) for s, r in zip(spatial, ratio))
    out = _tuple(output_size, n)
    for s, o, kk in zip(spatial, out, k):
        if o + kk - 1 > s:
            raise RuntimeError(f"{op}: output size {out} plus kernel size {k} minus 1 is too "
                               f"large for input size {spatial}{_where()}")
    nb, c = x.shape[:2]
    if samples is None:   # one recorded draw per call, as torch's torch.rand(N, C, n)
        samples = _draw("uniform", (nb, c, n), x.dtype, x.device)
    elif tuple(samples.shape) != (nb, c, n):
        raise ValueError(f"{op}: _random_samples shape {tuple(samples.shape)} must be "
                         f"{(nb, c, n)} for input shape {tuple(input.shape)}{_where()}")
    # torch takes sample 0 for the last dimension (width) in 2-d and for the first in 3-d
    order = (1, 0) if n == 2 else (0, 1, 2)
    flat_idx = None
    stride = 1
    for d in reversed(range(n)):
        st = FractionalStarts.apply(samples[:, :, order[d]], n_in=spatial[d], n_out=out[d],
                                    k=k[d])                           # (N, C, out_d)
        pos = st.unsqueeze(-1) + arange(k[d], device=x.device)        # (N, C, out_d, k_d)
        # place this dimension's (out_d, k_d) among the others: (out_0.., k_0..)
        shape = [nb, c] + [1] * (2 * n)
        shape[2 + d], shape[2 + n + d] = out[d], k[d]
        term = pos.reshape(shape) * stride
        flat_idx = term if flat_idx is None else flat_idx + term
        stride *= spatial[d]
    p_out, kk = int(np.prod(out)), int(np.prod(k))
    flat_idx = flat_idx.expand(nb, c, *out, *k).reshape(nb, c, p_out, kk)
    vals = x.reshape(nb, c, int(np.prod(spatial))).gather(2, flat_idx.reshape(nb, c, p_out * kk)).reshape(flat_idx.shape)
    best, arg = vals.max(-1)                                          # (N, C, P_out)
    result = best.reshape(nb, c, *out)
    if not batched:
        result = result.squeeze(0)
    if not return_indices:
        return result
    indices = flat_idx.gather(3, arg.unsqueeze(-1)).reshape(nb, c, *out)
    return result, (indices if batched else indices.squeeze(0))


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Max over pseudo-randomly placed kh x kw windows of (N, C, H, W) or (C, H, W)."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 2, "fractional_max_pool2d")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Max over pseudo-randomly placed windows of (N, C, D, H, W) or (C, D, H, W)."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 3, "fractional_max_pool3d")
