"""torch.linalg's norms: vector_norm (the reduction Norm of reduce.py, every p torch defines),
matrix_norm ('fro', 'nuc', +-1, +-2, +-inf over two dims), norm (either, by its arguments)
and cond. Gradients come from the ops they are built of (Norm, amax/amin, the SVD)."""
import numbers

from ..messages import OpError, plain
from .elementwise import absolute, cast
from .linalg_decomp import svdvals
from .linalg_solve import inv, square
from .movement import _where, movedim, norm_dim, squeeze, unsqueeze
from .reduce import amax, amin, norm as _vector_norm, sum as sum_


def _dtype(x, dtype, op):
    if dtype is not None:
        return cast(x, dtype)
    if not (x.dtype.name.startswith("float") or x.dtype.name == "bfloat16"):
        raise OpError(f"{op}: expected a floating point tensor as input, got {x.dtype.name}")
    return x


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    op = "linalg.vector_norm"
    if isinstance(ord, str) or isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise OpError(f"{op}: ord must be a number (inf and -inf included), got {plain(ord)!r}")
    x = _dtype(x, dtype, op)
    if dim is None and x.ndim:
        dim = tuple(range(x.ndim))
    return _vector_norm(x, float(ord), dim, keepdim)


def _two_dims(A, dim, op):
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise OpError(f"{op}: dim must be a 2-tuple of ints, got {plain(dim)!r}")
    d0, d1 = norm_dim(dim[0], A.ndim, op), norm_dim(dim[1], A.ndim, op)
    if d0 == d1:
        raise OpError(f"{op}: dims must be different, got {plain(tuple(dim))}{_where()}")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    op = "linalg.matrix_norm"
    A = _dtype(A, dtype, op)
    if A.ndim < 2:
        raise OpError(f"{op}: A must have at least 2 dimensions, got shape {tuple(A.shape)}{_where()}")
    d0, d1 = _two_dims(A, dim, op)
    if ord == "fro":
        return _vector_norm(A, 2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        S = svdvals(movedim(A, (d0, d1), (-2, -1)))  # (*, k)
        out = sum_(S, -1) if ord == "nuc" else (amax(S, -1) if ord == 2 else amin(S, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, float("inf"), -float("inf")):
        # 1: the largest column sum of |A|; inf: the largest row sum (min for the negatives)
        inner, outer = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = sum_(absolute(A), inner, keepdim=True)
        out = (amax if ord > 0 else amin)(sums, outer, keepdim=True)
        return out if keepdim else squeeze(out, (d0, d1))
    raise OpError(f"{op}: order {plain(ord)!r} is not supported: use 'fro', 'nuc', 1, -1, 2, -2, "
                  f"inf or -inf")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a matrix norm when dim is a 2-tuple (or A is 2-d with ord given and no
    dim), else a vector norm; with neither ord nor dim, the 2-norm of A flattened."""
    op = "linalg.norm"
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise OpError(f"{op}: dim must be an int or a tuple of 1 or 2 ints, got {plain(dim)!r}")
    if ord is not None and dim is None:
        if A.ndim not in (1, 2):
            raise OpError(f"{op}: input must be 1-D or 2-D when dim is None and ord is not None, "
                          f"but got shape {tuple(A.shape)}{_where()}")
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise OpError(f"{op}: order {ord!r} is a matrix norm, but the norm is over one dimension")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cond(A, p=None):
    """The condition number ||A|| ||A^-1|| in the norm p: for None/2/-2 the ratio of extreme
    singular values (any shape), for the others the product of the two matrix norms."""
    op = "linalg.cond"
    A = _dtype(A, None, op)
    if A.ndim < 2:
        raise OpError(f"{op}: A must have at least 2 dimensions, got shape {tuple(A.shape)}{_where()}")
    if p in (None, 2, -2):
        S = svdvals(A)
        big, small = amax(S, -1), amin(S, -1)
        return big / small if p in (None, 2) else small / big
    A = square(A, op)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)
