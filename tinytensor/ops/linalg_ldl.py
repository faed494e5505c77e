"""LDL^T with Bunch-Kaufman pivoting, torch's names: linalg.ldl_factor(_ex) and
linalg.ldl_solve. NumPy has no sytrf, so the factorization is LAPACK's unblocked dsytf2
(lower) step by step, and the solve its dsytrs: one matrix at a time (1x1 and 2x2 pivot
blocks fall at different places in different matrices), the same pivots and the same compact
LD as torch for the small matrices these are used on. Both are recorded ops (the pivots and
info are read from the data); like torch, neither has a derivative."""
import math

import numpy as np

from ..core.function import Function
from ..messages import OpError
from .linalg_solve import matrices, same_dtype, square
from .movement import _where

_ALPHA = (1 + math.sqrt(17)) / 8  # Bunch-Kaufman's threshold: bounds the growth of L


def _host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def _device_like(a, like):
    return a if isinstance(like, np.ndarray) else __import__("cupy").asarray(a)


def _sytf2_lower(A):
    """dsytf2 with UPLO='L' on one matrix (a copy): (LD with the upper triangle zeroed,
    1-based pivots, info)."""
    A = A.copy()
    n = A.shape[0]
    piv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(A[k, k])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(np.abs(A[k + 1:, k])))
            colmax = abs(A[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or math.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                row = np.abs(A[imax, k:imax])  # row imax left of the diagonal ...
                rowmax = row.max() if row.size else 0.0
                if imax < n - 1:               # ... and column imax below it
                    rowmax = max(rowmax, np.abs(A[imax + 1:, imax]).max())
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(A[imax, imax]) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:  # swap rows and columns kk and kp of the trailing lower triangle
                if kp < n - 1:
                    A[kp + 1:, [kk, kp]] = A[kp + 1:, [kp, kk]]
                tmp = A[kk + 1:kp, kk].copy()
                A[kk + 1:kp, kk] = A[kp, kk + 1:kp]
                A[kp, kk + 1:kp] = tmp
                A[kk, kk], A[kp, kp] = A[kp, kp], A[kk, kk]
                if kstep == 2:
                    A[k + 1, k], A[kp, k] = A[kp, k], A[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / A[k, k]
                    x = A[k + 1:, k].copy()
                    A[k + 1:, k + 1:] -= d11 * np.tril(np.outer(x, x))
                    A[k + 1:, k] = x * d11
            elif k < n - 2:
                d21 = A[k + 1, k]
                d11 = A[k + 1, k + 1] / d21
                d22 = A[k, k] / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                wk = d21 * (d11 * A[k + 2:, k] - A[k + 2:, k + 1])
                wkp1 = d21 * (d22 * A[k + 2:, k + 1] - A[k + 2:, k])
                A[k + 2:, k + 2:] -= np.tril(np.outer(A[k + 2:, k], wk) + np.outer(A[k + 2:, k + 1], wkp1))
                A[k + 2:, k] = wk
                A[k + 2:, k + 1] = wkp1
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(A), piv, info


class LdlFactor(Function):
    """(LD, pivots, info) of symmetric A, read from its lower triangle."""
    name = "linalg_ldl_factor"

    @staticmethod
    def forward(ctx, A):
        a = _host(A)
        flat = a.reshape(int(np.prod(a.shape[:-2])), *a.shape[-2:])
        LD = np.empty_like(flat)
        piv = np.empty(flat.shape[:-1], dtype=np.int32)
        info = np.empty(len(flat), dtype=np.int32)
        for b in range(len(flat)):
            LD[b], piv[b], info[b] = _sytf2_lower(flat[b])
        out = (LD.reshape(a.shape), piv.reshape(a.shape[:-1]), info.reshape(a.shape[:-2]))
        ctx.mark_non_differentiable(*out)
        return tuple(_device_like(o, A) for o in out)

    @staticmethod
    def backward(ctx, *grads):
        raise OpError("linalg.ldl_factor: the derivative of ldl_factor is not implemented "
                      "(torch neither)")

    @staticmethod
    def jvp(ctx, tA):
        LdlFactor.backward(ctx)


def _sytrs_lower(LD, piv, B):
    """dsytrs with UPLO='L': X with A X = B from one matrix's (LD, pivots)."""
    B = B.copy()
    n = LD.shape[0]
    k = 0
    while k < n:  # L D Y = P^T B
        if piv[k] > 0:
            kp = piv[k] - 1
            if kp != k:
                B[[k, kp]] = B[[kp, k]]
            B[k + 1:] -= np.outer(LD[k + 1:, k], B[k])
            B[k] /= LD[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            if kp != k + 1:
                B[[k + 1, kp]] = B[[kp, k + 1]]
            if k < n - 2:
                B[k + 2:] -= np.outer(LD[k + 2:, k], B[k]) + np.outer(LD[k + 2:, k + 1], B[k + 1])
            akm1k = LD[k + 1, k]
            akm1, ak = LD[k, k] / akm1k, LD[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = B[k] / akm1k, B[k + 1] / akm1k
            B[k], B[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y
        if piv[k] > 0:
            if k < n - 1:
                B[k] -= LD[k + 1:, k] @ B[k + 1:]
            kp = piv[k] - 1
            if kp != k:
                B[[k, kp]] = B[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                B[k] -= LD[k + 1:, k] @ B[k + 1:]
                B[k - 1] -= LD[k + 1:, k - 1] @ B[k + 1:]
            kp = -piv[k] - 1
            if kp != k:
                B[[k, kp]] = B[[kp, k]]
            k -= 2
    return B


class LdlSolve(Function):
    name = "linalg_ldl_solve"

    @staticmethod
    def forward(ctx, LD, piv, B):
        ld, p, b = _host(LD), _host(piv), _host(B)
        batch = np.broadcast_shapes(ld.shape[:-2], p.shape[:-1], b.shape[:-2])
        count = int(np.prod(batch))  # reshape(-1, 0, 0) cannot infer a count
        ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape(count, *ld.shape[-2:])
        p = np.broadcast_to(p, batch + p.shape[-1:]).reshape(count, p.shape[-1])
        bb = np.broadcast_to(b, batch + b.shape[-2:]).reshape(count, *b.shape[-2:])
        X = np.stack([_sytrs_lower(ld[i], p[i], bb[i]) for i in range(len(bb))]) if len(bb) else \
            np.empty(bb.shape, dtype=b.dtype)
        return _device_like(X.reshape(batch + b.shape[-2:]), B)

    @staticmethod
    def backward(ctx, g):
        raise OpError("linalg.ldl_solve: the derivative of ldl_solve is not implemented "
                      "(torch neither)")

    @staticmethod
    def jvp(ctx, *tangents):
        LdlSolve.backward(ctx, None)


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    op = "linalg.ldl_factor_ex"  # hermitian: the same for real dtypes (symmetric)
    LD, piv, info = LdlFactor.apply(square(A, op))
    if check_errors:
        from .linalg_lu import CheckInfo
        CheckInfo.apply(info, op=op)
    return LD, piv, info


def ldl_factor(A, *, hermitian=False):
    LD, piv, _ = LdlFactor.apply(square(A, "linalg.ldl_factor"))
    return LD, piv


def ldl_solve(LD, pivots, B, *, hermitian=False):
    op = "linalg.ldl_solve"
    LD = square(LD, op)
    B = same_dtype(LD, matrices(B, op))
    if B.shape[-2] != LD.shape[-1]:
        raise OpError(f"{op}: LD of shape {tuple(LD.shape)} and B of shape {tuple(B.shape)} do "
                      f"not fit (B needs {LD.shape[-1]} rows){_where()}")
    return LdlSolve.apply(LD, pivots, B)
