"""diagonal, diag_embed and diag: two linear Functions, each the other's gradient.

`Diagonal` reads the (dim1, dim2) diagonal at an offset into a last axis, as NumPy's
`diagonal` lays it out; `DiagonalPut` writes such a last axis onto the diagonal of zeros.
"""

from ..core.function import Function
from ..core.tensor import Tensor
from .movement import _where, norm_dim
from ..device import xp_of as _xp

__all__ = ["diagonal", "diag_embed", "diag"]


class Diagonal(Function):
    # a copy, not a view: NumPy's diagonal views are read-only
    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        return _xp(x).diagonal(x, offset, dim1, dim2).copy()

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        return DiagonalPut.apply(g, shape=ctx.in_meta[0][0], offset=a["offset"], dim1=a["dim1"],
                                 dim2=a["dim2"])

    @staticmethod
    def backward_arrays(ctx, g):
        return DiagonalPut.forward(None, g, ctx.in_meta[0][0], **ctx.attrs)

    @staticmethod
    def jvp(ctx, t):   # linear
        return Diagonal.apply(t, **ctx.attrs)


class DiagonalPut(Function):
    """zeros(shape) with v (*rest, L) on the (dim1, dim2) diagonal at offset."""

    @staticmethod
    def forward(ctx, v, shape, offset, dim1, dim2):
        xp = _xp(v)
        out = xp.zeros(shape, dtype=v.dtype)
        plane = xp.moveaxis(out, (dim1, dim2), (-2, -1))  # a writable view of out
        i = xp.arange(v.shape[-1])
        plane[..., i + max(-offset, 0), i + max(offset, 0)] = v
        return out

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        return Diagonal.apply(g, offset=a["offset"], dim1=a["dim1"], dim2=a["dim2"])

    @staticmethod
    def backward_arrays(ctx, g):
        return Diagonal.forward(None, g, **{k: v for k, v in ctx.attrs.items() if k != "shape"})

    @staticmethod
    def jvp(ctx, t):   # linear
        return DiagonalPut.apply(t, **ctx.attrs)


def _dims(ndim, dim1, dim2, op):
    d1, d2 = norm_dim(dim1, ndim, op), norm_dim(dim2, ndim, op)
    if d1 == d2:
        raise ValueError(f"{op}: diagonal dimensions cannot be identical ({dim1}, {dim2}){_where()}")
    return d1, d2


def _tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the (dim1, dim2) planes, as a new last dimension (torch.diagonal)."""
    _tensor(input, "diagonal")
    if input.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor with at least 2 dimensions, got shape "
                         f"{tuple(input.shape)}{_where()}")
    d1, d2 = _dims(input.ndim, dim1, dim2, "diagonal")
    return Diagonal.apply(input, offset=int(offset), dim1=d1, dim2=d2)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Tensors whose (dim1, dim2) diagonals hold input's last dimension (torch.diag_embed)."""
    _tensor(input, "diag_embed")
    if input.ndim < 1:
        raise ValueError(f"diag_embed: expected a tensor with at least 1 dimension, got a 0-d "
                         f"tensor{_where()}")
    ndim = input.ndim + 1
    d1, d2 = _dims(ndim, dim1, dim2, "diag_embed")
    n = input.shape[-1] + abs(int(offset))
    rest = iter(input.shape[:-1])
    shape = tuple(n if d in (d1, d2) else next(rest) for d in range(ndim))
    return DiagonalPut.apply(input, shape=shape, offset=int(offset), dim1=d1, dim2=d2)


def diag(input, diagonal=0):
    """A 1-d input as the diagonal of a square matrix; a 2-d input's diagonal (torch.diag)."""
    _tensor(input, "diag")
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return Diagonal.apply(input, offset=int(diagonal), dim1=0, dim2=1)
    raise ValueError(f"diag: expected a 1-d or 2-d tensor, got shape {tuple(input.shape)}{_where()}")
