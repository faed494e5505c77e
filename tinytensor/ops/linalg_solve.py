"""Square systems, torch.linalg's solving half: det, slogdet, inv, solve, solve_triangular,
cholesky and the functions built from them. Forwards are NumPy's / CuPy's `linalg` (batched
over leading dims); every backward is written in tinytensor ops (these Functions and
matmul), so double backward works. Singular or non-positive-definite input raises as in
torch; the `*_ex` forms return torch's `info` instead, computed inside a recorded op."""
import numpy as np

from ..core.function import Function
from ..creation import eye
from ..messages import OpError
from .elementwise import cast, float_operand, where
from .forward_mode import add, no_tangent
from .linalg import matmul
from .movement import _where, broadcast_shapes, expand, squeeze, tril, triu, unsqueeze
from ..device import xp_of as _xp


class LinAlgError(RuntimeError):
    """A singular or non-positive-definite input (torch.linalg.LinAlgError, a RuntimeError):
    raised inside the op's forward, so a compiled function checks every call's input."""


def square(A, op):
    """A as a float tensor of square matrices (*, n, n), or an error naming op and shape."""
    A = float_operand(A, op)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise OpError(f"{op}: A must be a batch of square matrices, but got shape "
                      f"{tuple(A.shape)}{_where()}")
    return A


def matrices(A, op):
    A = float_operand(A, op)
    if A.ndim < 2:
        raise OpError(f"{op}: A must have at least 2 dimensions, but got shape "
                      f"{tuple(A.shape)}{_where()}")
    return A


def same_dtype(A, B):
    if A.dtype is not B.dtype:
        B = cast(B, A.dtype)
    return B


def _bad(xp, batch_ok):
    """The index (int) of the first matrix whose `batch_ok` is False, for messages."""
    return int(np.argmax(~np.asarray(batch_ok).reshape(-1)))


# ---------------------------------------------------------------- LU (for info and pivots)
def lu_arrays(xp, A):
    """Doolittle LU with partial pivoting, batched over leading dims: (LU packed as LAPACK's
    getrf, pivots 1-based int32, info int32 = first zero pivot (1-based), 0 if none). One
    step per column: NumPy has no batched getrf, and n is small next to the batch."""
    A = A.astype(A.dtype, copy=True)
    *batch, m, n = A.shape
    k = min(m, n)
    piv = xp.zeros((*batch, k), dtype=np.int32)
    info = xp.zeros(tuple(batch), dtype=np.int32)
    rows = xp.broadcast_to(xp.arange(m), (*batch, m))
    for j in range(k):
        p = xp.argmax(xp.abs(A[..., j:, j]), axis=-1) + j  # (*batch)
        piv[..., j] = p + 1
        perm = rows.copy()
        pj = p[..., None]
        xp.put_along_axis(perm, pj, j, axis=-1)
        perm[..., j] = p
        A = xp.take_along_axis(A, perm[..., None], axis=-2)
        pivot = A[..., j, j]
        zero = pivot == 0
        info = xp.where((info == 0) & zero, j + 1, info).astype(np.int32)
        scale = xp.where(zero, 1, pivot)[..., None]
        A[..., j + 1:, j] = xp.where(zero[..., None], A[..., j + 1:, j], A[..., j + 1:, j] / scale)
        A[..., j + 1:, j + 1:] -= A[..., j + 1:, j, None] * A[..., j, None, j + 1:]
    return A, piv, info


# ---------------------------------------------------------------- det, slogdet
class Det(Function):
    name = "linalg_det"

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _xp(A).linalg.det(A).astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        # d det = <cof(A), dA>; the cofactor matrix is a Function of its own, so that it is
        # right at singular A too (where det * A^-T is 0 * inf)
        return unsqueeze(unsqueeze(g, -1), -1) * Cofactor.apply(A)

    @staticmethod
    def jvp(ctx, t):   # d det = <cof(A), dA>
        return (Cofactor.apply(ctx.saved_tensor(0)) * t).sum((-2, -1))


class Cofactor(Function):
    """The cofactor matrix adj(A)^T from the SVD: sign * U diag(prod_{j != i} s_j) V^T, finite
    for singular A. Its backward is the invertible case's, det (<gC, A^-T> A^-T - A^-T gC^T A^-T)."""
    name = "linalg_cofactor"

    @staticmethod
    def forward(ctx, A):
        xp = _xp(A)
        ctx.save_for_backward(A)
        U, S, Vh = xp.linalg.svd(A)
        ones = xp.ones(S.shape[:-1] + (1,), dtype=S.dtype)
        before = xp.concatenate([ones, xp.cumprod(S[..., :-1], axis=-1)], axis=-1)
        after = xp.flip(xp.concatenate([ones, xp.cumprod(xp.flip(S, -1)[..., :-1], axis=-1)], axis=-1), -1)
        sign = xp.linalg.det(U) * xp.linalg.det(Vh)
        C = sign[..., None, None] * ((U * (before * after)[..., None, :]) @ Vh)
        return C.astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, gC):
        (A,) = ctx.saved_tensors
        d = unsqueeze(unsqueeze(Det.apply(A), -1), -1)
        Yt = Inv.apply(A, check=False).mT
        inner = unsqueeze(unsqueeze((gC * Yt).sum((-2, -1)), -1), -1)
        return d * (inner * Yt - matmul(matmul(Yt, gC.mT), Yt))

    # forward mode: dC = d(det A^-T) = det (<A^-T, dA> A^-T - A^-T dA^T A^-T), backward's
    # formula with the tangent for gC (the map is self-adjoint)
    jvp = backward


class Slogdet(Function):
    name = "linalg_slogdet"

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        sign, logabs = _xp(A).linalg.slogdet(A)
        sign = sign.astype(A.dtype, copy=False)
        ctx.mark_non_differentiable(sign)
        return sign, logabs.astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, gsign, glog):
        (A,) = ctx.saved_tensors
        return unsqueeze(unsqueeze(glog, -1), -1) * Inv.apply(A, check=False).mT

    @staticmethod
    def jvp(ctx, t):   # d log|det A| = <A^-T, dA>; the sign is locally constant
        return None, (Inv.apply(ctx.saved_tensor(0), check=False).mT * t).sum((-2, -1))


def det(A):
    return Det.apply(square(A, "linalg.det"))


def slogdet(A):
    return Slogdet.apply(square(A, "linalg.slogdet"))


def logdet(A):
    """log det A: nan where det < 0, -inf where it is 0 (torch.logdet)."""
    sign, logabs = slogdet(square(A, "logdet"))
    return where(sign < 0, float("nan"), logabs)


# ---------------------------------------------------------------- inverse
class Inv(Function):
    name = "linalg_inv"

    @staticmethod
    def forward(ctx, A, check=True):
        xp = _xp(A)
        out = _lapack(lambda: xp.linalg.inv(A), check, lambda: LinAlgError(
            f"linalg.inv: the matrix of shape {A.shape[-2:]} (batch element "
            f"{_bad(xp, lu_arrays(xp, A)[2] == 0)}) is singular: the inversion could not be "
            f"completed{_where()}"), lambda: _per_matrix(xp, A, xp.linalg.inv))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (Y,) = ctx.saved_tensors
        Yt = Y.mT
        return -matmul(matmul(Yt, g), Yt)

    @staticmethod
    def jvp(ctx, t):   # dY = -Y dA Y
        Y = ctx.saved_tensor(0)
        return -matmul(matmul(Y, t), Y)


def _lapack(f, check, refusal, fallback):
    """f() (a LAPACK call over a batch); where LAPACK refuses a matrix, the LinAlgError
    `refusal()` (naming the culprit) when `check`, else `fallback()` (nan where it failed)."""
    try:
        return f()
    except np.linalg.LinAlgError:
        if check:
            raise refusal() from None
        return fallback()


def _per_matrix(xp, A, f):
    """f on each matrix alone; a singular one gives nan (the `_ex` forms report it in info)."""
    flat = A.reshape(-1, *A.shape[-2:])
    outs = []
    for a in flat:
        try:
            outs.append(f(a))
        except np.linalg.LinAlgError:
            outs.append(xp.full(a.shape, np.nan, dtype=a.dtype))
    return xp.stack(outs).reshape(A.shape)


class LuInfo(Function):
    """torch's `info` of an LU factorization (0, or the 1-based index of the first zero
    pivot): a recorded op, so a compiled function re-computes it on each call."""
    name = "lu_info"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, A):
        return lu_arrays(_xp(A), A)[2]


def inv(A):
    return Inv.apply(square(A, "linalg.inv"))


def inv_ex(A, *, check_errors=False):
    A = square(A, "linalg.inv_ex")
    return Inv.apply(A, check=bool(check_errors)), LuInfo.apply(A)


def inverse(A):
    return Inv.apply(square(A, "inverse"))


# ---------------------------------------------------------------- solve
class Solve(Function):
    """X with A X = B; A (*, n, n) and B (*, n, k) of the same batch shape."""
    name = "linalg_solve"

    @staticmethod
    def forward(ctx, A, B, check=True):
        xp = _xp(A)
        X = _lapack(lambda: xp.linalg.solve(A, B), check, lambda: LinAlgError(
            f"linalg.solve: the solver failed because the input matrix of shape {A.shape[-2:]} "
            f"(batch element {_bad(xp, lu_arrays(xp, A)[2] == 0)}) is singular{_where()}"),
            lambda: xp.full(B.shape, np.nan, dtype=B.dtype))
        ctx.save_for_backward(A, X)
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        gB = Solve.apply(A.mT, g)
        gA = -matmul(gB, X.mT) if ctx.needs_input_grad[0] else None
        return gA, gB

    @staticmethod
    def jvp(ctx, tA, tB):   # A dX = dB - dA X
        A, X = ctx.saved_tensors
        rhs = add(tB, -matmul(tA, X) if tA is not None else None)
        return Solve.apply(A, rhs, check=False)


def _is_vector_rhs(A, B):
    # torch: B is a (batch of) vector(s) when it is 1-d or has A's shape without the last dim
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve(A, B, left, check, op):
    A = square(A, op)
    B = same_dtype(A, float_operand(B, op))
    vector = _is_vector_rhs(A, B)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        if vector:
            return _solve(A.mT, B, True, check, op)
        return _solve(A.mT, B.mT, True, check, op).mT
    given = tuple(B.shape)
    if vector:
        B = unsqueeze(B, -1)
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise OpError(f"{op}: A of shape {tuple(A.shape)} and B of shape {given} do "
                      f"not fit (B needs {n} rows){_where()}")
    try:
        batch = broadcast_shapes(A.shape[:-2], B.shape[:-2], op=op)
    except ValueError:
        raise OpError(f"{op}: the batch dimensions of A {tuple(A.shape)} and B "
                      f"{tuple(B.shape)} do not broadcast{_where()}") from None
    A2 = expand(A, *batch, n, n) if tuple(A.shape[:-2]) != tuple(batch) else A
    B2 = expand(B, *batch, *B.shape[-2:]) if tuple(B.shape[:-2]) != tuple(batch) else B
    X = Solve.apply(A2, B2, check=check)
    return squeeze(X, -1) if vector else X


def solve(A, B, *, left=True):
    return _solve(A, B, left, True, "linalg.solve")


def solve_ex(A, B, *, left=True, check_errors=False):
    X = _solve(A, B, left, bool(check_errors), "linalg.solve_ex")
    return X, LuInfo.apply(square(A, "linalg.solve_ex"))


# ---------------------------------------------------------------- triangular systems
class SolveTriangular(Function):
    """X with T X = B, T the upper (or lower) triangle of A, with ones on the diagonal when
    unitriangular: the other entries of A are not read. Substitution row by row, batched:
    like LAPACK's trsm it gives inf/nan for a zero diagonal instead of raising."""
    name = "linalg_solve_triangular"

    @staticmethod
    def forward(ctx, A, B, upper, unitriangular=False):
        xp = _xp(A)
        n = A.shape[-1]
        X = xp.empty(xp.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:], dtype=B.dtype)
        order = range(n - 1, -1, -1) if upper else range(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in order:
                done = slice(i + 1, n) if upper else slice(0, i)
                r = B[..., i, :] - (A[..., i, None, done] @ X[..., done, :])[..., 0, :]
                X[..., i, :] = r if unitriangular else r / A[..., i, i, None]
        ctx.save_for_backward(A, X)
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        upper, unit = ctx.attrs["upper"], ctx.attrs.get("unitriangular", False)
        gB = SolveTriangular.apply(A.mT, g, upper=not upper, unitriangular=unit)
        if not ctx.needs_input_grad[0]:
            return None, gB
        gA = -matmul(gB, X.mT)
        k = 1 if unit else 0  # only the entries the solve read get a gradient
        gA = triu(gA, k) if upper else tril(gA, -k)
        return gA, gB

    @staticmethod
    def jvp(ctx, tA, tB):   # T dX = dB - dT X, dT the part of dA the solve reads
        A, X = ctx.saved_tensors
        upper, unit = ctx.attrs["upper"], ctx.attrs.get("unitriangular", False)
        dT = None
        if tA is not None:
            k = 1 if unit else 0
            dT = triu(tA, k) if upper else tril(tA, -k)
        rhs = add(tB, -matmul(dT, X) if dT is not None else None)
        return SolveTriangular.apply(A, rhs, upper=upper, unitriangular=unit)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    op = "linalg.solve_triangular"
    A = square(A, op)
    B = same_dtype(A, matrices(B, op))
    if not left:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    if B.shape[-2] != A.shape[-1]:
        raise OpError(f"{op}: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} do "
                      f"not fit (B needs {A.shape[-1]} rows){_where()}")
    try:
        broadcast_shapes(A.shape[:-2], B.shape[:-2], op=op)
    except ValueError:
        raise OpError(f"{op}: the batch dimensions of A {tuple(A.shape)} and B "
                      f"{tuple(B.shape)} do not broadcast{_where()}") from None
    return SolveTriangular.apply(A, B, upper=bool(upper), unitriangular=bool(unitriangular))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (b first): (the solution of A X = b, or of A^T X = b when
    transpose, and a copy of A)."""
    A = square(A, "triangular_solve")
    if transpose:
        X = solve_triangular(A.mT, b, upper=not upper, unitriangular=unitriangular)
    else:
        X = solve_triangular(A, b, upper=upper, unitriangular=unitriangular)
    return X, A.clone()


# ---------------------------------------------------------------- Cholesky
class Cholesky(Function):
    """L lower triangular with A = L L^T, read from A's lower triangle (LAPACK potrf)."""
    name = "linalg_cholesky"

    @staticmethod
    def forward(ctx, A, check=True):
        xp = _xp(A)

        def factor():
            L = xp.linalg.cholesky(A)
            if xp is not np and check and bool(xp.isnan(L).any()):  # CuPy returns nan instead
                raise np.linalg.LinAlgError
            return L

        def refusal():
            bad, order = _cholesky_failure(np, A if xp is np else A.get())
            return LinAlgError(f"linalg.cholesky: the factorization could not be completed "
                               f"because the input of shape {A.shape[-2:]} (batch element {bad}) "
                               f"is not positive-definite (the leading minor of order {order} "
                               f"is not positive-definite){_where()}")

        L = _lapack(factor, check, refusal, lambda: _per_matrix(xp, A, xp.linalg.cholesky))
        if xp is not np:  # only the lower triangle is L
            L = xp.tril(L)
        ctx.save_for_backward(L)
        return L

    @staticmethod
    def backward(ctx, gL):
        (L,) = ctx.saved_tensors
        # torch's formula: gA = L^-T Phi(L^T gL) L^-1, Phi = the symmetric part of the lower
        # triangle with its diagonal halved
        P = tril(matmul(L.mT, gL))
        P = 0.5 * (P + tril(P, -1).mT)
        P = SolveTriangular.apply(L.mT, P, upper=True)
        return SolveTriangular.apply(L.mT, P.mT, upper=True).mT  # (.) L^-1

    @staticmethod
    def jvp(ctx, tA):
        """torch's cholesky_jvp: dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with its
        diagonal halved."""
        (L,) = ctx.saved_tensors
        X = SolveTriangular.apply(L, tA, upper=False)                  # L^-1 dA
        X = SolveTriangular.apply(L, X.mT, upper=False).mT             # (.) L^-T
        return matmul(L, tril(X, -1) + 0.5 * (tril(X) - tril(X, -1)))


class CholeskyInfo(Function):
    """torch's info of a Cholesky factorization: 0, or the order of the first leading minor
    that is not positive-definite. A recorded op."""
    name = "cholesky_info"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, A):
        xp = _xp(A)
        flat = A.reshape(int(np.prod(A.shape[:-2])), *A.shape[-2:])
        info = np.zeros(len(flat), dtype=np.int32)
        for b, a in enumerate(flat):
            info[b] = _leading_failure(xp, a)
        return xp.asarray(info.reshape(A.shape[:-2]))


def _leading_failure(xp, a):
    try:
        xp.linalg.cholesky(a)
        return 0
    except np.linalg.LinAlgError:
        for k in range(1, a.shape[-1] + 1):
            try:
                xp.linalg.cholesky(a[:k, :k])
            except np.linalg.LinAlgError:
                return k
    return 0


def _cholesky_failure(xp, A):
    flat = A.reshape(-1, *A.shape[-2:])
    for b, a in enumerate(flat):
        k = _leading_failure(xp, a)
        if k:
            return b, k
    return 0, 0


def cholesky(A, *, upper=False):
    L = Cholesky.apply(square(A, "linalg.cholesky"))
    return L.mT if upper else L


def cholesky_ex(A, *, upper=False, check_errors=False):
    A = square(A, "linalg.cholesky_ex")
    L = Cholesky.apply(A, check=bool(check_errors))
    return (L.mT if upper else L), CholeskyInfo.apply(A)


def cholesky_top(A, upper=False):
    """torch.cholesky (the older name): upper as a positional argument."""
    return cholesky(A, upper=upper)


def _from_factor(L, upper):
    """A = L L^T (U^T U when upper) as a product: torch's gradients of cholesky_solve and
    cholesky_inverse treat the factor as a full matrix through this product."""
    return matmul(L.mT, L) if upper else matmul(L, L.mT)


def cholesky_solve(B, L, upper=False):
    """X with A X = B, A = L L^T (or U^T U when upper), from the factor."""
    L = square(L, "cholesky_solve")
    B = same_dtype(L, matrices(B, "cholesky_solve"))
    return _solve(_from_factor(L, upper), B, True, True, "cholesky_solve")


def cholesky_inverse(L, upper=False):
    """A^-1 for A = L L^T (or U^T U when upper), from the factor."""
    L = square(L, "cholesky_inverse")
    return Inv.apply(_from_factor(L, upper))


# ---------------------------------------------------------------- built from the above
def matrix_power(A, n):
    A = square(A, "linalg.matrix_power")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        return expand(eye(A.shape[-1], dtype=A.dtype, device=A.device), *A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:  # binary powering, as torch: log2(n) products
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def multi_dot(tensors):
    op = "linalg.multi_dot"
    tensors = list(tensors)
    if len(tensors) < 2:
        raise OpError(f"{op}: expected at least 2 tensors but got {len(tensors)}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    ts = [unsqueeze(tensors[0], 0) if first_vec else tensors[0]] + tensors[1:-1] + \
         [unsqueeze(tensors[-1], -1) if last_vec else tensors[-1]]
    for k, t in enumerate(ts):
        if t.ndim != 2:
            raise OpError(f"{op}: tensor {k} must be 2-d (the first and last may be 1-d), got "
                          f"shape {tuple(tensors[k].shape)}{_where()}")
    out = ts[0]
    for t in ts[1:]:
        out = matmul(out, t)
    if first_vec:
        out = squeeze(out, 0)
    if last_vec:
        out = squeeze(out, -1)
    return out


def tensorinv(A, ind=2):
    op = "linalg.tensorinv"
    A = float_operand(A, op)
    if ind <= 0:
        raise OpError(f"{op}: expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    n, m = int(np.prod(rows)), int(np.prod(cols))
    if n != m:
        raise OpError(f"{op}: expected prod(shape[:ind]) == prod(shape[ind:]), but got "
                      f"{n} != {m} for shape {tuple(A.shape)}{_where()}")
    return inv(A.reshape(n, m)).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    op = "linalg.tensorsolve"
    A = float_operand(A, op)
    B = same_dtype(A, float_operand(B, op))
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        rest = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*rest, *dims)
    cols = tuple(A.shape[B.ndim:])
    n, m = int(np.prod(A.shape[:B.ndim])), int(np.prod(cols))
    if n != m or n != int(np.prod(B.shape)):
        raise OpError(f"{op}: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} do "
                      f"not fit{_where()}")
    return solve(A.reshape(n, m), B.reshape(n)).reshape(*cols)

