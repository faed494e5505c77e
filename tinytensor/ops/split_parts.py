"""split_parts: x cut along one dim into pieces of the given sizes as ONE op, one tape node
whose backward is one concatenation of the pieces' gradients.

split / chunk / unbind are a slice per piece, and a slice's backward is a zero array of x's
whole shape with the piece's gradient written in: cutting a (T*B, F) tensor into its T time
steps costs T arrays of the whole size in backward, which is quadratic in T. A recurrent
net cuts every layer's input projection into its time steps, so it uses this op instead
(nn/recurrent.py). The pieces are copies, not views: a compiled program may place x in
memory it reuses.
"""
from ..core.function import Function
from ..messages import OpError
from .movement import cat, norm_dim


class SplitParts(Function):
    @staticmethod
    def forward(ctx, x, sizes, dim):
        out, start = [], 0
        for s in sizes:
            out.append(x[(slice(None),) * dim + (slice(start, start + s),)].copy())
            start += s
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):     # a piece without a gradient arrives as zeros (materialized)
        return cat(list(grads), ctx.attrs["dim"])

    @staticmethod
    def jvp(ctx, t):   # linear: the tangent split alike
        return SplitParts.apply(t, **ctx.attrs)


def split_parts(x, sizes, dim=0):
    """The pieces of x along `dim` with the given sizes (a tuple of Tensors), as one op."""
    d = norm_dim(dim, x.ndim, "split_parts")
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[d]:
        raise OpError(f"split_parts: sizes {list(sizes)} must be non-negative and add up to the "
                      f"size {x.shape[d]} of dimension {dim} of shape {tuple(x.shape)}")
    return SplitParts.apply(x, sizes=sizes, dim=d)
