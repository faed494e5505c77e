"""The rest of torch.linalg: matrix_exp (a Function: its backward is matrix_exp of a block
matrix, so every order of derivative comes from the same op), cross, vecdot, vander,
diagonal. The last four are built from other ops and differentiate through them."""
import numpy as np

from ..core.function import Function
from ..creation import ones, zeros
from ..messages import OpError, plain
from .cumulative import cumprod
from .diagonal import diagonal as _diagonal
from .elementwise import float_operand
from .linalg_solve import same_dtype, square
from .movement import _where, broadcast_shapes, broadcast_tensors, cat, expand, norm_dim, select, stack, unsqueeze
from .reduce import sum as sum_
from ..device import xp_of as _xp


# ---------------------------------------------------------------- matrix_exp
_TAYLOR_DEGREE = 18  # with ||A / 2^s||_1 <= 1/2 the truncation error is below 2^-19 / 19! ~ 1e-23


class MatrixExp(Function):
    """exp(A) by scaling and squaring: A / 2^s (s per matrix, so that its 1-norm is at most
    1/2), the Taylor polynomial of degree 18 by Horner's rule, then s squarings."""
    name = "linalg_matrix_exp"

    @staticmethod
    def forward(ctx, A):
        xp = _xp(A)
        ctx.save_for_backward(A)
        n = A.shape[-1]
        norm1 = xp.abs(A).sum(axis=-2).max(axis=-1) if n else xp.zeros(A.shape[:-2])
        with np.errstate(divide="ignore"):
            s = xp.maximum(0, xp.ceil(xp.log2(norm1 / 0.5)))
        s = xp.where(xp.isfinite(s), s, 0).astype(np.int64)
        X = A / (2.0 ** s)[..., None, None]
        I = xp.eye(n, dtype=A.dtype)
        R = xp.broadcast_to(I, A.shape)
        for k in range(_TAYLOR_DEGREE, 0, -1):
            R = I + (X @ R) / k
        for i in range(int(s.max()) if s.size else 0):
            R = xp.where((i < s)[..., None, None], R @ R, R)
        return R.astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        # the Frechet derivative's adjoint: exp([[A^T, g], [0, A^T]]) holds it top right
        n = A.shape[-1]
        At = A.mT
        top = cat([At, g], -1)
        bottom = cat([zeros(*A.shape, dtype=A.dtype, device=A.device), At], -1)
        return MatrixExp.apply(cat([top, bottom], -2))[..., :n, n:]

    @staticmethod
    def jvp(ctx, t):   # the Frechet derivative: exp([[A, dA], [0, A]]) holds it top right
        (A,) = ctx.saved_tensors
        n = A.shape[-1]
        top = cat([A, t], -1)
        bottom = cat([zeros(*A.shape, dtype=A.dtype, device=A.device), A], -1)
        return MatrixExp.apply(cat([top, bottom], -2))[..., :n, n:]


def matrix_exp(A):
    return MatrixExp.apply(square(A, "linalg.matrix_exp"))


# ---------------------------------------------------------------- products of vectors
def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along `dim`, broadcasting the other dims."""
    op = "linalg.cross"
    a, b = float_operand(input, op), same_dtype(float_operand(input, op), float_operand(other, op))
    if a.ndim != b.ndim:  # torch does not add leading dims here
        raise OpError(f"{op}: input and other must have the same number of dimensions, got "
                      f"shapes {tuple(a.shape)} and {tuple(b.shape)}{_where()}")
    d = norm_dim(dim, a.ndim, op)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise OpError(f"{op}: inputs dimension {dim} must have length 3, got shapes "
                      f"{tuple(a.shape)} and {tuple(b.shape)}{_where()}")
    try:
        a, b = broadcast_tensors(a, b)
    except ValueError:
        raise OpError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                      f"broadcast{_where()}") from None
    a0, a1, a2 = (select(a, d, i) for i in range(3))
    b0, b1, b2 = (select(b, d, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def cross_top(input, other, dim=None):
    """torch.cross: without dim, the first dimension of size 3 (torch's deprecated default)."""
    if dim is None:
        shape = broadcast_shapes(input.shape, other.shape, op="cross")
        dim = next((k for k, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise OpError(f"cross: no dimension of size 3 in input of shape "
                          f"{tuple(input.shape)}{_where()}")
    return cross(input, other, dim=dim)


def vecdot(x, y, *, dim=-1):
    """sum(x * y, dim) (the conjugate of x is x: tinytensor's dtypes are real)."""
    op = "linalg.vecdot"
    if not (x.dtype.name.startswith("float") or x.dtype.name == "bfloat16"):
        raise OpError(f"{op}: expected a floating point tensor as input, got {x.dtype.name}")
    return sum_(x * same_dtype(x, y), dim)


def vander(x, *, N=None):
    """(*, n) -> (*, n, N): the powers x^0 .. x^(N-1) of each entry, by a running product (no
    0 * x^-1 in the gradient at x = 0)."""
    op = "linalg.vander"
    if x.ndim == 0:  # torch: a 0-d x is one entry
        x = unsqueeze(x, 0)
    n = x.shape[-1]
    N = n if N is None else N
    if N <= 1:
        raise OpError(f"{op}: N must be greater than 1, got {plain(N)}")
    first = ones(*x.shape, 1, dtype=x.dtype, device=x.device)
    powers = cumprod(expand(unsqueeze(x, -1), *x.shape, N - 1), -1)
    return cat([first, powers], -1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _diagonal(A, offset, dim1, dim2)
