"""Decompositions with torch's gradients: svd (and svdvals, pinv, matrix_rank, lstsq built on
it), eigh / eigvalsh, qr. Forwards are NumPy's / CuPy's batched `linalg` (LAPACK gesdd,
syevd, geqrf, the routines torch calls on the CPU, so signs of singular and eigenvectors
agree with torch's); backwards are written in tinytensor ops, so double backward works.
The gradients of svd and eigh are gauge invariant as torch's: they are finite only when
the loss does not depend on the sign (or basis) of the vectors, and they are inf/nan at
repeated singular values / eigenvalues, as torch's."""
import numpy as np

from ..core.function import Function
from ..creation import eye
from ..messages import OpError
from .diagonal import diag_embed
from .forward_mode import no_tangent
from .linalg import matmul
from .linalg_solve import matrices, same_dtype, solve_triangular, square
from .movement import _where, cat, tril, unsqueeze
from ..device import xp_of as _xp


def _skew(X):
    return X - X.mT


# ---------------------------------------------------------------- SVD
class Svd(Function):
    """A = U diag(S) Vh, S descending; (U, S, Vh). Gradients: torch's svd_backward."""
    name = "linalg_svd"
    materialize_grads = False  # an absent gU/gVh must stay absent: zeros would make 0/0 at ties

    @staticmethod
    def forward(ctx, A, full_matrices):
        xp = _xp(A)
        if A.shape[-2] < A.shape[-1]:  # wide: LAPACK on the transpose, as torch (same signs)
            V, S, Uh = xp.linalg.svd(A.swapaxes(-1, -2), full_matrices=full_matrices)
            U, Vh = Uh.swapaxes(-1, -2), V.swapaxes(-1, -2)
        else:
            U, S, Vh = xp.linalg.svd(A, full_matrices=full_matrices)
        ctx.save_for_backward(U, S, Vh)
        return U, S.astype(A.dtype, copy=False), Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        U, S, Vh = ctx.saved_tensors
        m, n = ctx.in_meta[0][0][-2:]
        k = min(m, n)
        if ctx.attrs["full_matrices"]:  # the extra columns carry no information: dropped
            U, Vh = U[..., :, :k], Vh[..., :k, :]
            gU = gU[..., :, :k] if gU is not None else None
            gVh = gVh[..., :k, :] if gVh is not None else None
        if gU is None and gVh is None:
            return None if gS is None else matmul(U * unsqueeze(gS, -2), Vh)
        S2 = S * S
        E = unsqueeze(S2, -2) - unsqueeze(S2, -1) + eye(k, dtype=S.dtype, device=S.device)
        inner = None
        if gU is not None:
            inner = _skew(matmul(U.mT, gU)) * unsqueeze(S, -2)
        if gVh is not None:
            term = unsqueeze(S, -1) * _skew(matmul(Vh, gVh.mT))
            inner = term if inner is None else inner + term
        gA = inner / E
        if gS is not None:
            gA = gA + diag_embed(gS)
        if m > n and gU is not None:  # the part of gU outside U's column space
            gA = matmul(U, gA)
            gUSinv = gU / unsqueeze(S, -2)
            gA = matmul(gA + gUSinv - matmul(U, matmul(U.mT, gUSinv)), Vh)
        elif m < n and gVh is not None:
            gA = matmul(gA, Vh)
            SinvgVh = gVh / unsqueeze(S, -1)
            gA = matmul(U, gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mT), Vh))
        else:
            gA = matmul(matmul(U, gA), Vh)
        return gA


    @staticmethod
    def jvp(ctx, tA):
        """torch's linalg_svd_jvp (real): dP = U^T dA V, dS = diag(dP),
        dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1,
        dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1, F_ij = 1 / (S_j^2 - S_i^2)
        off the diagonal (the extra terms only where U or V is not square)."""
        U, S, Vh = ctx.saved_tensors
        m, n = ctx.in_meta[0][0][-2:]
        k = min(m, n)
        if ctx.attrs["full_matrices"] and m != n:
            raise OpError(f"linalg.svd: forward-mode derivative with full_matrices=True of a "
                          f"{m} x {n} matrix is not defined (the extra singular vectors are "
                          f"arbitrary; torch refuses it too): pass full_matrices=False{_where()}")
        V = Vh.mT
        dP = matmul(matmul(U.mT, tA), V)                       # (..., k, k)
        dS = dP.diagonal(0, -2, -1)
        I = eye(k, dtype=S.dtype, device=S.device)
        S2 = S * S
        F = (1.0 - I) / (unsqueeze(S2, -2) - unsqueeze(S2, -1) + I)
        Sr, Sc = unsqueeze(S, -2), unsqueeze(S, -1)            # S as a row / a column
        dU = matmul(U, F * (dP * Sr + Sc * dP.mT))
        dV = matmul(V, F * (Sc * dP + dP.mT * Sr))
        if m > k:
            AV = matmul(tA, V) / Sr
            dU = dU + AV - matmul(U, matmul(U.mT, AV))
        if n > k:
            AU = matmul(tA.mT, U) / Sr
            dV = dV + AU - matmul(V, matmul(V.mT, AU))
        return dU, dS, dV.mT


def svd(A, full_matrices=True, *, driver=None):
    return Svd.apply(matrices(A, "linalg.svd"), full_matrices=bool(full_matrices))


def svdvals(A, *, driver=None):
    # the singular values' gradient needs U and Vh: they are the same op's other outputs
    return Svd.apply(matrices(A, "linalg.svdvals"), full_matrices=False)[1]


def svd_top(A, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V (not V^T); some=False gives the full U and V; without
    compute_uv, U and V are zeros (and S has no gradient through them)."""
    A = matrices(A, "svd")
    U, S, Vh = Svd.apply(A, full_matrices=not some)
    if not compute_uv:
        from ..creation import zeros
        return (zeros(*U.shape, dtype=A.dtype, device=A.device), S,
                zeros(*Vh.mT.shape, dtype=A.dtype, device=A.device))
    return U, S, Vh.mT


# ---------------------------------------------------------------- eigh
class Eigh(Function):
    """A = V diag(L) V^T for symmetric A read from one triangle, L ascending; (L, V)."""
    name = "linalg_eigh"
    materialize_grads = False

    @staticmethod
    def forward(ctx, A, UPLO):
        L, V = _xp(A).linalg.eigh(A, UPLO=UPLO)
        L = L.astype(A.dtype, copy=False)
        ctx.save_for_backward(L, V)
        return L, V

    @staticmethod
    def backward(ctx, gL, gV):
        L, V = ctx.saved_tensors
        if gV is None:
            return None if gL is None else matmul(V * unsqueeze(gL, -2), V.mT)
        n = L.shape[-1]
        E = unsqueeze(L, -2) - unsqueeze(L, -1) + eye(n, dtype=L.dtype, device=L.device)
        # torch's symmetric gradient: the skew part of V^T gV over (L_j - L_i) (zero diagonal)
        inner = 0.5 * _skew(matmul(V.mT, gV)) / E
        if gL is not None:
            inner = inner + diag_embed(gL)
        return matmul(matmul(V, inner), V.mT)

    @staticmethod
    def jvp(ctx, tA):
        """dL = diag(V^T dA V), dV = V (F o V^T dA V), F_ij = 1 / (L_j - L_i) off the
        diagonal (torch's: dA taken whole, as a symmetric tangent)."""
        L, V = ctx.saved_tensors
        n = L.shape[-1]
        I = eye(n, dtype=L.dtype, device=L.device)
        dP = matmul(matmul(V.mT, tA), V)
        F = (1.0 - I) / (unsqueeze(L, -2) - unsqueeze(L, -1) + I)
        return dP.diagonal(0, -2, -1), matmul(V, F * dP)


def _uplo(UPLO, op):
    if UPLO not in ("L", "U"):
        raise OpError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO


def eigh(A, UPLO="L"):
    return Eigh.apply(square(A, "linalg.eigh"), UPLO=_uplo(UPLO, "linalg.eigh"))


def eigvalsh(A, UPLO="L"):
    return Eigh.apply(square(A, "linalg.eigvalsh"), UPLO=_uplo(UPLO, "linalg.eigvalsh"))[0]


# ---------------------------------------------------------------- QR
def _qr_differentiable(ctx):
    """(m, n) of the input, or the refusal where linalg.qr has no derivative (both modes)."""
    m, n = ctx.in_meta[0][0][-2:]
    mode = ctx.attrs["mode"]
    if mode == "r" or (mode == "complete" and m > n):
        raise OpError(f"linalg.qr: the derivative of linalg.qr is not defined when "
                      f"mode='{mode}' and the input has {m} > {n} rows than columns; use "
                      f"mode='reduced'{_where()}")
    return m, n


class Qr(Function):
    """A = Q R (LAPACK geqrf + orgqr); mode 'reduced', 'complete' or 'r' (Q empty)."""
    name = "linalg_qr"

    @staticmethod
    def forward(ctx, A, mode):
        xp = _xp(A)
        if mode == "r":
            R = xp.linalg.qr(A, mode="r")
            Q = xp.empty((0,), dtype=A.dtype)
        else:
            Q, R = xp.linalg.qr(A, mode=mode)
        ctx.save_for_backward(Q, R)
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):
        Q, R = ctx.saved_tensors
        m, n = _qr_differentiable(ctx)
        if m >= n:
            return _qr_back_tall(Q, R, gQ, gR)
        # A = Q [X | Y], R = [U | V]: X = Q U is square's case, Y = Q V adds to gQ
        U, V = R[..., :, :m], R[..., :, m:]
        gU, gV = gR[..., :, :m], gR[..., :, m:]
        gX = _qr_back_tall(Q, U, gQ + matmul(matmul(Q, V), gV.mT), gU)
        return cat([gX, matmul(Q, gV)], -1)

    @staticmethod
    def jvp(ctx, tA):
        """A = Q R: C = Q^T dA R^-1 = Q^T dQ + dR R^-1 with Q^T dQ skew and dR R^-1 upper, so
        Om = tril(C, -1) - tril(C, -1)^T, dR = (C - Om) R, dQ = dA R^-1 - Q (C - Om). Wide A:
        the square part X = Q U so, then dV = Q^T (dY - dQ V) for A = Q [U | V]."""
        Q, R = ctx.saved_tensors
        m, n = _qr_differentiable(ctx)
        if m >= n:
            return _qr_jvp_tall(Q, R, tA)
        U, V = R[..., :, :m], R[..., :, m:]
        dQ, dU = _qr_jvp_tall(Q, U, tA[..., :, :m])
        dV = matmul(Q.mT, tA[..., :, m:] - matmul(dQ, V))
        return dQ, cat([dU, dV], -1)


def _qr_jvp_tall(Q, R, tA):
    ARi = solve_triangular(R, tA, upper=True, left=False)     # dA R^-1
    C = matmul(Q.mT, ARi)
    low = tril(C, -1)
    CO = C - (low - low.mT)                                    # C - Om: upper triangular
    return ARi - matmul(Q, CO), matmul(CO, R)


def _qr_back_tall(Q, R, gQ, gR):
    """m >= n, reduced: M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T."""
    M = matmul(R, gR.mT) - matmul(gQ.mT, Q)
    M = tril(M, -1) + tril(M, -1).mT + diag_embed(M.diagonal(0, -2, -1))
    b = gQ + matmul(Q, M)
    # b R^-T = (R^-1 b^T)^T
    return solve_triangular(R, b.mT, upper=True).mT


def qr(A, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise OpError(f"linalg.qr: qr received unrecognized mode {mode!r} but expected one of "
                      f"'reduced' (default), 'r', or 'complete'")
    return Qr.apply(matrices(A, "linalg.qr"), mode=mode)


def qr_top(A, some=True):
    """torch.qr: some=True is mode='reduced', some=False mode='complete'."""
    return qr(A, "reduced" if some else "complete")


# ---------------------------------------------------------------- built on the SVD
def _eps(dtype):
    return float(np.finfo(np.float32 if dtype.name == "float32" else np.float64).eps)


def _tolerances(A, atol, rtol, op):
    """(atol, rtol) as tensors that broadcast against A's batch shape + (1,): torch's rule,
    rtol = eps * max(m, n) unless atol is given (then 0)."""
    from ..creation import tensor
    if rtol is None:
        rtol = _eps(A.dtype) * max(A.shape[-2:]) if atol is None else 0.0
    atol = 0.0 if atol is None else atol
    out = []
    for t in (atol, rtol):
        if hasattr(t, "shape"):
            out.append(unsqueeze(t.to(A.dtype) if t.dtype is not A.dtype else t, -1))
        else:
            out.append(tensor(float(t), dtype=A.dtype, device=A.device))
    return out


class Pinv(Function):
    """The pseudo-inverse V diag(1/S) U^T with the singular values at or below
    max(atol, rtol * S_max) dropped (eigh instead of svd when hermitian). Its backward is
    torch's closed form (Golub & Pereyra), in ops of A and the result: differentiable again."""
    name = "linalg_pinv"

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        xp = _xp(A)
        m, n = A.shape[-2:]
        if A.size == 0:
            P = xp.zeros(A.shape[:-2] + (n, m), dtype=A.dtype)
        elif hermitian:
            L, V = xp.linalg.eigh(A)
            tol = xp.maximum(atol, rtol * xp.abs(L).max(axis=-1, keepdims=True))
            keep = xp.abs(L) > tol
            inv_l = xp.where(keep, 1 / xp.where(keep, L, 1), 0)
            P = (V * inv_l[..., None, :]) @ V.swapaxes(-1, -2)
        else:
            U, S, Vh = xp.linalg.svd(A, full_matrices=False)
            tol = xp.maximum(atol, rtol * S.max(axis=-1, keepdims=True))
            keep = S > tol
            inv_s = xp.where(keep, 1 / xp.where(keep, S, 1), 0)
            P = (Vh.swapaxes(-1, -2) * inv_s[..., None, :]) @ U.swapaxes(-1, -2)
        P = P.astype(A.dtype, copy=False)
        ctx.save_for_backward(A, P)
        return P

    @staticmethod
    def backward(ctx, gP, *_):
        A, P = ctx.saved_tensors
        Pt, gPt = P.mT, gP.mT
        # gA = -P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A)
        first = -matmul(matmul(Pt, gP), Pt)
        PPt = matmul(P, Pt)
        second = matmul(gPt, PPt) - matmul(A, matmul(P, matmul(gPt, PPt)))
        PtP = matmul(Pt, P)
        third = matmul(PtP, gPt) - matmul(matmul(matmul(PtP, gPt), P), A)
        return first + second + third, None, None

    @staticmethod
    def jvp(ctx, tA, *_):
        """Golub & Pereyra: dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
        A, P = ctx.saved_tensors
        tAt = tA.mT
        PPt = matmul(P, P.mT)
        PtP = matmul(P.mT, P)
        first = -matmul(matmul(P, tA), P)
        second = matmul(PPt, tAt) - matmul(matmul(matmul(PPt, tAt), A), P)
        third = matmul(tAt, PtP) - matmul(P, matmul(A, matmul(tAt, PtP)))
        return first + second + third


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None):
    op = "linalg.pinv"
    A = matrices(A, op)
    if rcond is not None:
        rtol = rcond
    if hermitian:
        A = square(A, op)
    atol_t, rtol_t = _tolerances(A, atol, rtol, op)
    return Pinv.apply(A, atol_t, rtol_t, hermitian=bool(hermitian))


def pinverse(A, rcond=1e-15):
    return pinv(A, rtol=rcond)


class Rank(Function):
    """How many singular values exceed max(atol, rtol * S_max): a recorded op (int64),
    re-run on each call of a compiled function."""
    name = "matrix_rank"

    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, S, atol, rtol):
        xp = _xp(S)
        smax = S.max(axis=-1, keepdims=True) if S.shape[-1] else xp.zeros(S.shape[:-1] + (1,), S.dtype)
        return (S > xp.maximum(atol, rtol * smax)).sum(axis=-1).astype(np.int64)


def matrix_rank(A, tol=None, *, atol=None, rtol=None, hermitian=False):
    op = "linalg.matrix_rank"
    A = matrices(A, op)
    if tol is not None:
        atol, rtol = tol, 0.0
    S = (eigvalsh(A).abs() if hermitian else svdvals(A)).detach()
    atol_t, rtol_t = _tolerances(A, atol, rtol, op)
    return Rank.apply(S, atol_t, rtol_t)


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) as torch.linalg.lstsq on the CPU: the
    solution is pinv(A) B (the minimum-norm least-squares solution); residuals are the squared
    residual norms when m > n and A has full rank (else empty); rank and singular values as
    the driver gives them ('gelsy', the default: rank only; 'gelsd'/'gelss': both)."""
    op = "linalg.lstsq"
    A = matrices(A, op)
    B = same_dtype(A, matrices(B, op) if B.ndim >= 2 else B)
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise OpError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                      f"got {driver!r}")
    vector = B.ndim == A.ndim - 1
    Bm = unsqueeze(B, -1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise OpError(f"{op}: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} do "
                      f"not fit (B needs {A.shape[-2]} rows){_where()}")
    m, n = A.shape[-2:]
    rtol = _eps(A.dtype) * max(m, n) if rcond is None or rcond < 0 else rcond
    X = matmul(pinv(A, rtol=rtol), Bm)
    from ..creation import empty
    rank = matrix_rank(A, rtol=rtol) if driver != "gels" else empty(0, dtype="int64")
    S = svdvals(A) if driver in ("gelsd", "gelss") else empty(0, dtype=A.dtype)
    if m > n and driver != "gelsy":
        R = matmul(A, X) - Bm
        residuals = (R * R).sum(-2)
    else:
        residuals = empty(0, dtype=A.dtype)
    if vector:
        X = X[..., 0]
    return X, residuals, rank, S


# ---------------------------------------------------------------- Householder (geqrf's format)
class Geqrf(Function):
    """(a, tau) of LAPACK geqrf: R on and above the diagonal, the Householder vectors below
    it. torch gives it no derivative; neither does tinytensor (use linalg.qr)."""
    name = "geqrf"

    @staticmethod
    def forward(ctx, A):
        xp = _xp(A)
        if A.size == 0:
            return A.copy(), xp.zeros(A.shape[:-2] + (min(A.shape[-2:]),), dtype=A.dtype)
        h, tau = xp.linalg.qr(A, mode="raw")  # h is the Fortran-order result: transposed
        return xp.ascontiguousarray(h.swapaxes(-1, -2)).astype(A.dtype, copy=False), tau.astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, ga, gtau):
        raise OpError("geqrf: the derivative of geqrf is not implemented (torch neither); "
                      "differentiate linalg.qr instead")

    @staticmethod
    def jvp(ctx, tA):
        Geqrf.backward(ctx, None, None)


def geqrf(A):
    return Geqrf.apply(matrices(A, "geqrf"))


def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th column
    of A below the diagonal and 1 on it (LAPACK orgqr). Built from ops, one reflector at a
    time, so its gradients (and theirs) are those of the products."""
    op = "linalg.householder_product"
    A = matrices(A, op)
    tau = same_dtype(A, tau)
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    if n > m or k > n:
        raise OpError(f"{op}: expected A of shape (*, m, n) with m >= n >= k = tau.shape[-1], got "
                      f"A {tuple(A.shape)} and tau {tuple(tau.shape)}{_where()}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise OpError(f"{op}: the batch dimensions of A {tuple(A.shape)} and tau "
                      f"{tuple(tau.shape)} must be equal{_where()}")
    V = tril(A, -1) + eye(m, n, dtype=A.dtype, device=A.device)  # (*, m, n) unit lower
    Q = eye(m, n, dtype=A.dtype, device=A.device)
    for i in range(k - 1, -1, -1):  # Q = H_i Q from the last reflector back
        v = V[..., :, i:i + 1]                                     # (*, m, 1)
        Q = Q - unsqueeze(unsqueeze(tau[..., i], -1), -1) * matmul(v, matmul(v.mT, Q))
    return Q


def ormqr(input, tau, other, left=True, transpose=False):
    """Q other (other Q when not left; Q^T when transpose), Q = H_1 ... H_k of (input, tau)
    as geqrf gives them: the whole m x m Q, from the reflectors padded with tau = 0."""
    op = "ormqr"
    input = matrices(input, op)
    m, k = input.shape[-2], tau.shape[-1]
    from ..creation import zeros
    if input.shape[-1] < m:
        pad = zeros(*input.shape[:-1], m - input.shape[-1], dtype=input.dtype, device=input.device)
        input = cat([input, pad], -1)
    tau = same_dtype(input, tau)
    if k < m:
        tau = cat([tau, zeros(*tau.shape[:-1], m - k, dtype=tau.dtype, device=tau.device)], -1)
    Q = householder_product(input[..., :, :m], tau)
    if transpose:
        Q = Q.mT
    return matmul(Q, other) if left else matmul(other, Q)


# ---------------------------------------------------------------- randomized low-rank SVD
def _approximate_basis(A, q, niter, generator=None):
    """An orthonormal (*, m, q) basis whose span holds most of A's range (Halko et al. 2009,
    algorithm 4.4): a Gaussian sketch, then niter power iterations, each re-orthonormalized."""
    from ..creation import randn
    R = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    Q = qr(matmul(A, R))[0]
    for _ in range(niter):
        Q = qr(matmul(A.mT, Q))[0]
        Q = qr(matmul(A, Q))[0]
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of rank q approximating A (minus M), as torch.svd_lowrank: a random sketch
    (tt's generator, so the vectors' signs differ from torch's; U S V^T does not)."""
    op = "svd_lowrank"
    A = matrices(A, op)
    if M is not None:
        A = A - same_dtype(A, M)
    m, n = A.shape[-2:]
    q = 6 if q is None else q
    if m < n or n > q:  # sketch the transpose, so the small SVD is of a q x m matrix
        Q = _approximate_basis(A.mT, q, niter)
        U, S, Vh = svd(matmul(A, Q), full_matrices=False)
        return U, S, matmul(Q, Vh.mT)
    Q = _approximate_basis(A, q, niter)
    U, S, Vh = svd(matmul(Q.mT, A), full_matrices=False)
    return matmul(Q, U), S, Vh.mT


def pca_lowrank(A, q=None, center=True, niter=2):
    """svd_lowrank of A with its column means removed (when center), q = min(6, m, n)."""
    op = "pca_lowrank"
    A = matrices(A, op)
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise OpError(f"{op}: q(={q}) must be non-negative integer and not greater than "
                      f"min(m, n)={min(m, n)}")
    if center:
        A = A - A.mean(-2, keepdim=True)
    return svd_lowrank(A, q, niter)
