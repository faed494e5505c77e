"""Windows and grids: Tensor.unfold, F.unfold / F.fold (im2col / col2im) and meshgrid.

F.unfold and F.fold are adjoint linear maps, so each Function's gradient is the other;
both reuse the convolution's window kernels (ops/conv.py). In the ops namespace they are
`im2col` and `col2im`, since `unfold` is the Tensor method (windows along one dim).
"""
import math

from ..core.function import Function
from ..core.tensor import Tensor
from ..core.forward_ad import linear_jvp
from ..messages import plain
from .conv import _col2im, _im2col, ntuple, out_size
from .movement import _where, expand, movedim, norm_dim, reshape
from .indexing import getitem

__all__ = ["unfold", "im2col", "col2im", "meshgrid"]


def unfold(input, dimension, size, step):
    """Tensor.unfold: every window of `size` along `dimension`, `step` apart, as a new last dim."""
    if not isinstance(input, Tensor):
        raise TypeError(f"unfold: expected a Tensor, got {type(input).__name__}")
    x = reshape(input, (1,)) if input.ndim == 0 else input  # torch: a 0-d tensor is one window
    d = norm_dim(dimension, x.ndim, "unfold")
    if step <= 0:
        raise ValueError(f"unfold: step is {plain(step)} but must be > 0{_where()}")
    if not 0 <= size <= x.shape[d]:
        raise ValueError(f"unfold: maximum size for tensor at dimension {d} is {x.shape[d]} but size "
                         f"is {plain(size)} (shape {tuple(input.shape)}){_where()}")
    xp = x.device.xp
    n = (x.shape[d] - size) // step + 1
    idx = xp.arange(n)[:, None] * step + xp.arange(size)[None, :]  # (windows, size)
    windows = getitem(x, (slice(None),) * d + (Tensor._make(idx, x.device, False),))
    out = movedim(windows, d + 1, -1)
    return reshape(out, (size,)) if input.ndim == 0 else out


def _geometry(spatial, kernel_size, dilation, padding, stride, op):
    kernel = ntuple(kernel_size, 2, "kernel_size", op)
    dilation, padding, stride = (ntuple(v, 2, name, op) for v, name in
                                 ((dilation, "dilation"), (padding, "padding"), (stride, "stride")))
    for name, v, low in (("kernel_size", kernel, 1), ("dilation", dilation, 1), ("padding", padding, 0),
                         ("stride", stride, 1)):
        if any(e < low for e in v):
            raise ValueError(f"{op}: {name} must be {'non-negative' if low == 0 else 'positive'}, "
                             f"got {name}={v}{_where()}")
    pads = tuple((p, p) for p in padding)
    blocks = out_size(spatial, kernel, stride, pads, dilation)
    if any(b <= 0 for b in blocks):
        raise ValueError(f"{op}: given input spatial size {tuple(spatial)}, kernel_size {kernel}, "
                         f"dilation {dilation}, padding {padding} and stride {stride}, the "
                         f"calculated number of sliding blocks {blocks} is not positive{_where()}")
    return dict(kernel=kernel, stride=stride, pads=pads, dilation=dilation), blocks


class Im2Col(Function):
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, x, kernel, stride, pads, dilation):
        col, out = _im2col(x, kernel, stride, pads, dilation)
        # sizes spelled out, not -1: an empty batch cannot infer them
        return col.reshape(x.shape[0], x.shape[1] * math.prod(kernel), math.prod(out))

    @staticmethod
    def backward(ctx, g):
        a = {k: ctx.attrs[k] for k in ("kernel", "stride", "pads", "dilation")}
        return Col2Im.apply(g, spatial=tuple(ctx.in_meta[0][0][2:]), **a)

    @staticmethod
    def backward_arrays(ctx, g):
        return Col2Im.forward(None, g, tuple(ctx.in_meta[0][0][2:]), **ctx.attrs)


class Col2Im(Function):
    jvp = staticmethod(linear_jvp)

    @staticmethod
    def forward(ctx, col, spatial, kernel, stride, pads, dilation):
        out = out_size(spatial, kernel, stride, pads, dilation)
        col = col.reshape((col.shape[0], col.shape[1] // math.prod(kernel)) + tuple(kernel) + tuple(out))
        return _col2im(col, spatial, kernel, stride, pads, dilation)

    @staticmethod
    def backward(ctx, g):
        a = {k: ctx.attrs[k] for k in ("kernel", "stride", "pads", "dilation")}
        return Im2Col.apply(g, **a)

    @staticmethod
    def backward_arrays(ctx, g):
        return Im2Col.forward(None, g, **{k: v for k, v in ctx.attrs.items() if k != "spatial"})


def im2col(input, kernel_size, dilation=1, padding=0, stride=1):
    """F.unfold: (N, C, H, W) -> (N, C * kh * kw, L), one column per sliding block."""
    if not isinstance(input, Tensor) or input.ndim not in (3, 4):
        got = tuple(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise ValueError(f"unfold: expected a 3-d (unbatched) or 4-d (batched) input tensor, got "
                         f"{got}{_where()}")
    x = reshape(input, (1,) + tuple(input.shape)) if input.ndim == 3 else input
    geometry, _ = _geometry(x.shape[2:], kernel_size, dilation, padding, stride, "unfold")
    y = Im2Col.apply(x, **geometry)
    return reshape(y, tuple(y.shape[1:])) if input.ndim == 3 else y


def col2im(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """F.fold: (N, C * kh * kw, L) -> (N, C, *output_size), overlapping entries summed."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        got = tuple(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise ValueError(f"fold: expected a 2-d (unbatched) or 3-d (batched) input tensor, got "
                         f"{got}{_where()}")
    col = reshape(input, (1,) + tuple(input.shape)) if input.ndim == 2 else input
    spatial = ntuple(output_size, 2, "output_size", "fold")
    geometry, blocks = _geometry(spatial, kernel_size, dilation, padding, stride, "fold")
    k = math.prod(geometry["kernel"])
    if col.shape[1] % k:
        raise ValueError(f"fold: expected size of input's dimension 1 to be divisible by the product "
                         f"of kernel_size {geometry['kernel']} ({k}), but got input of shape "
                         f"{tuple(input.shape)}{_where()}")
    if col.shape[2] != math.prod(blocks):
        raise ValueError(f"fold: given output_size {spatial}, kernel_size {geometry['kernel']}, "
                         f"dilation {geometry['dilation']}, padding {tuple(p for p, _ in geometry['pads'])} "
                         f"and stride {geometry['stride']}, expected input's dimension 2 to match the "
                         f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                         f"{math.prod(blocks)}, but got input of shape {tuple(input.shape)}{_where()}")
    y = Col2Im.apply(col, spatial=spatial, **geometry)
    return reshape(y, tuple(y.shape[1:])) if input.ndim == 2 else y


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 0-d/1-d tensors: 'ij' (matrix) or 'xy' (Cartesian) indexing."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.ndim > 1:
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"meshgrid: expected 0-d or 1-d tensors, got {got} for tensor {k}")
    swap = indexing == "xy" and len(tensors) >= 2  # 'xy' is 'ij' with the first two swapped
    ts = (tensors[1], tensors[0]) + tensors[2:] if swap else tensors
    shape = tuple(t.numel() for t in ts)
    grids = [expand(reshape(t, tuple(n if j == i else 1 for j, n in enumerate(shape))), *shape)
             for i, t in enumerate(ts)]
    return tuple([grids[1], grids[0]] + grids[2:]) if swap else tuple(grids)
