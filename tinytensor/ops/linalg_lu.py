"""LU with partial pivoting, torch's names: linalg.lu_factor(_ex), linalg.lu, linalg.lu_solve
and the top-level lu, lu_unpack, lu_solve. One Function factors (forward: the batched
Doolittle loop of linalg_solve.lu_arrays, LAPACK getrf's packed output and 1-based
pivots); the pivots and the permutation matrix built from them are recorded ops (a compiled
function re-runs them). Unpacking and solving are built from ops, so their gradients are
the ones of their pieces; the factorization's own backward is torch's lu_factor_ex_backward."""
import numpy as np

from ..core.function import Function
from ..creation import eye, zeros
from ..messages import OpError
from .forward_mode import no_tangent
from .linalg import matmul
from .linalg_solve import LinAlgError, lu_arrays, matrices, same_dtype, solve_triangular
from .movement import _where, cat, tril, triu
from ..device import xp_of as _xp


class LuFactor(Function):
    """(LU packed, pivots int32, info int32) of A (*, m, n), as LAPACK's getrf."""
    name = "linalg_lu_factor"

    @staticmethod
    def forward(ctx, A):
        LU, piv, info = lu_arrays(_xp(A), A)
        ctx.save_for_backward(LU, piv)
        ctx.mark_non_differentiable(piv, info)
        return LU, piv, info

    @staticmethod
    def backward(ctx, gLU, gpiv=None, ginfo=None):
        LU, piv = ctx.saved_tensors
        m, n = LU.shape[-2:]
        P, L, U = _unpack(LU, piv)
        k = min(m, n)
        gL, gU = tril(gLU[..., :, :k], -1), triu(gLU[..., :k, :])
        return _lu_backward(P, L, U, gL, gU, m, n, k)

    @staticmethod
    def jvp(ctx, tA):
        """Square A = P L U: X = L^-1 P^T dA U^-1 = L^-1 dL + dU U^-1, so dL = L tril(X, -1)
        and dU = triu(X) U, packed as LU is. A rectangular A takes the double-vjp identity."""
        LU, piv = ctx.saved_tensors
        m, n = LU.shape[-2:]
        if m != n:
            from ..core.forward_ad import _double_vjp
            return _double_vjp(LuFactor, ctx, [tA])
        P, L, U = _unpack(LU, piv)
        X = solve_triangular(L, matmul(P.mT, tA), upper=False, unitriangular=True)
        X = solve_triangular(U, X, upper=True, left=False)
        return tril(matmul(L, tril(X, -1)), -1) + triu(matmul(triu(X), U)), None, None


def _lu_backward(P, L, U, gL, gU, m, n, k):
    """torch's linalg_lu_backward for A = P L U (real case), gL and gU already masked."""
    if m <= n:  # wide (or square): U = [U1 | U2]
        U1 = U[..., :, :k]
        gA = matmul(L.mT, gL) - matmul(gU, U.mT)
        gA = solve_triangular(U1.mT, tril(gA, -1), upper=False, left=False)
        gA = cat([gA + gU[..., :, :k], gU[..., :, k:]], -1) if n > k else gA + gU
        gA = solve_triangular(L.mT, gA, upper=True, unitriangular=True)
    else:  # tall: L = [L1; L2]
        L1 = L[..., :k, :]
        gA = matmul(gU, U.mT) - matmul(L.mT, gL)
        gA = solve_triangular(L1.mT, triu(gA), upper=True, unitriangular=True)
        gA = cat([gA + gL[..., :k, :], gL[..., k:, :]], -2)
        gA = solve_triangular(U.mT, gA, upper=False, left=False)
    return matmul(P, gA)


class Permutation(Function):
    """The permutation matrix P (float, A's dtype) of LAPACK pivots: A = P L U. A recorded
    op: it reads the pivots' values."""
    name = "lu_pivots_to_permutation"
    jvp = staticmethod(no_tangent)   # a function of integer pivots

    @staticmethod
    def forward(ctx, piv, m, dtype):
        xp = _xp(piv)
        batch = piv.shape[:-1]
        perm = xp.array(xp.broadcast_to(xp.arange(m), batch + (m,)))
        for i in range(piv.shape[-1]):  # the row swaps in order, as getrf applied them
            j = (piv[..., i:i + 1] - 1).astype(np.int64)
            a = perm[..., i:i + 1].copy()
            b = xp.take_along_axis(perm, j, axis=-1)
            perm[..., i:i + 1] = b
            xp.put_along_axis(perm, j, a, axis=-1)
        P = xp.zeros(batch + (m, m), dtype=np.dtype(dtype))
        # A[perm] = L U, so P[perm[i], i] = 1
        xp.put_along_axis(P, perm[..., None, :], 1, axis=-2)
        return P


def _unpack(LU, piv):
    m, n = LU.shape[-2:]
    k = min(m, n)
    L = tril(LU[..., :, :k], -1) + eye(m, k, dtype=LU.dtype, device=LU.device)
    U = triu(LU[..., :k, :])
    P = Permutation.apply(piv, m=m, dtype=LU.dtype.name)
    return P, L, U


def _no_pivot(pivot, op):
    if not pivot:
        raise OpError(f"{op}: LU without pivoting is not implemented on the CPU (torch neither)")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    op = "linalg.lu_factor_ex"
    _no_pivot(pivot, op)
    A = matrices(A, op)
    LU, piv, info = LuFactor.apply(A)
    if check_errors:
        _check_info(info, op)
    return LU, piv, info


class CheckInfo(Function):
    """Raises when an info is nonzero: a recorded op, so a compiled function checks each call."""
    name = "lu_check_info"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, info, op):
        if info.size and bool((info != 0).any()):
            k = int(info.reshape(-1)[int(np.argmax(info.reshape(-1) != 0))])
            raise LinAlgError(f"{op}: U[{k},{k}] is zero and using it on lu_solve would result in a "
                          f"division by zero. If you still want to perform the factorization, "
                          f"consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
        return info


def _check_info(info, op):
    CheckInfo.apply(info, op=op)


def lu_factor(A, *, pivot=True):
    op = "linalg.lu_factor"
    _no_pivot(pivot, op)
    A = matrices(A, op)
    LU, piv, info = LuFactor.apply(A)
    _check_info(info, op)
    return LU, piv


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U."""
    op = "linalg.lu"
    _no_pivot(pivot, op)
    LU, piv, _ = LuFactor.apply(matrices(A, op))
    return _unpack(LU, piv)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m, n = LU_data.shape[-2:]
    P, L, U = _unpack(LU_data, LU_pivots)
    if not unpack_data:
        L = zeros(0, dtype=LU_data.dtype)
        U = zeros(0, dtype=LU_data.dtype)
    if not unpack_pivots:
        P = zeros(0, dtype=LU_data.dtype)
    return P, L, U


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (A^T X = B when adjoint; X A = B when not left), A = P L U."""
    op = "linalg.lu_solve"
    LU = matrices(LU, op)
    B = same_dtype(LU, matrices(B, op))
    if LU.shape[-1] != LU.shape[-2]:
        raise OpError(f"{op}: LU must be a batch of square matrices, got shape {tuple(LU.shape)}{_where()}")
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT
    if B.shape[-2] != LU.shape[-1]:
        raise OpError(f"{op}: LU of shape {tuple(LU.shape)} and B of shape {tuple(B.shape)} do "
                      f"not fit (B needs {LU.shape[-1]} rows){_where()}")
    P, _, _ = _unpack(LU, pivots)
    if adjoint:  # A^T = U^T L^T P^T: X = P L^-T U^-T B
        Y = solve_triangular(LU.mT, B, upper=False)
        Y = solve_triangular(LU.mT, Y, upper=True, unitriangular=True)
        return matmul(P, Y)
    Y = solve_triangular(LU, matmul(P.mT, B), upper=False, unitriangular=True)
    return solve_triangular(LU, Y, upper=True)


def lu_top(A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots) or (LU, pivots, infos)."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    return (LU, piv, info) if get_infos else (LU, piv)


def lu_solve_top(b, LU_data, LU_pivots):
    """torch.lu_solve (b first)."""
    return lu_solve(LU_data, LU_pivots, b)
