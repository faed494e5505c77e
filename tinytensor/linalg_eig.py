"""`tt.linalg.eig` and `tt.linalg.eigvals` (issue 23): eigen-decomposition of general square
matrices, complex results, gradients by torch's formula (`linalg_eig_backward`).

The rest of `tt.linalg` is another family's module; these two attach themselves to it
(or, where it is absent, to a `tinytensor.linalg` namespace made here), so the two
branches merge without editing each other's files.

The backward of Eig, in tinytensor ops (recorded, so create_graph differentiates it):
    VhgV = V^H gV - V^H V Re(diag(V^H gV))          (projected: the phase gauge of V)
    gA   = V^-H (VhgV / conj(L_j - L_i) off the diagonal, gL on it) V^H
and the real part of it for a real A. Like torch, a loss that depends on the arbitrary
phase of the eigenvectors has no gradient; torch raises there, tinytensor does not check.
"""
import importlib
import sys
import types

from .core.function import Function
from .core.tensor import Tensor
from .messages import OpError
from .device import xp_of as _xp


class Eig(Function):
    name = "linalg_eig"
    complex_rule = "own"

    @staticmethod
    def forward(ctx, a):
        xp = _xp(a)
        if xp is not __import__("numpy"):
            raise NotImplementedError("linalg.eig: CuPy has no general eigen-solver; move the "
                                      "matrix to cpu")
        w, v = xp.linalg.eig(a)
        want = xp.complex64 if a.dtype in (xp.float32, xp.complex64) else xp.complex128
        w, v = w.astype(want, copy=False), v.astype(want, copy=False)
        ctx.save_for_backward(w, v)   # its own outputs: recorded, no reference cycle
        return w, v

    @staticmethod
    def backward(ctx, gL, gV):
        from .ops.complex import real
        L, V = ctx.saved_tensors
        n = V.shape[-1]
        from .creation import eye
        eye_n = eye(n, dtype=V.dtype, device=V.device)
        Vh = V.mH
        VhgV = Vh @ gV
        diag = real((VhgV * eye_n).sum(-1))                    # (..., n)
        VhgV = VhgV - Vh @ (V * diag.unsqueeze(-2))
        Lc = L.conj()
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1)                 # E[i, j] = conj(L_j - L_i)
        E = E + eye_n                                           # no division on the diagonal
        off = (VhgV / E) * (1 - eye_n)
        inner = off + gL.unsqueeze(-1) * eye_n
        gA = Inv.apply(Vh) @ (inner @ Vh)
        return gA if ctx.in_meta[0][1].is_complex else real(gA)

    @staticmethod
    def jvp(ctx, tA):
        """torch's linalg_eig_jvp: dP = V^-1 dA V, dL = diag(dP), dV = V X with X = dP / E off
        the diagonal (E_ij = L_j - L_i) and X_ii = -Re((V^H V X)_ii), which keeps each
        eigenvector at unit norm (Re(v_i^H dv_i) = 0, LAPACK's normalisation)."""
        from .ops.complex import real
        from .creation import eye
        L, V = ctx.saved_tensors
        n = V.shape[-1]
        eye_n = eye(n, dtype=V.dtype, device=V.device)
        if not tA.is_complex():
            tA = tA.to(V.dtype)
        dP = Inv.apply(V) @ (tA @ V)
        dL = (dP * eye_n).sum(-1)
        E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_n
        X = (dP / E) * (1 - eye_n)
        fix = real((V.mH @ (V @ X) * eye_n).sum(-1))               # (..., n)
        X = X - fix.to(V.dtype).unsqueeze(-1) * eye_n
        return dL, V @ X


class Inv(Function):
    """The inverse of a square complex matrix, for Eig's backward: holomorphic, its real
    formula -A^-T g A^-T turns into torch's -A^-H g A^-H (ops/complex_rules.py)."""
    name = "linalg_eig_inv"
    complex_rule = "holomorphic"

    @staticmethod
    def forward(ctx, a):
        out = _xp(a).linalg.inv(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out = ctx.saved_tensor(0)
        return -(out.mT @ g @ out.mT)

    @staticmethod
    def jvp(ctx, t):   # dY = -Y dA Y
        out = ctx.saved_tensor(0)
        return -(out @ t @ out)


def _check(a, op):
    if not isinstance(a, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(a).__name__}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise OpError(f"{op}: A must be a batch of square matrices, but they are "
                      f"{'x'.join(str(s) for s in a.shape[-2:]) or tuple(a.shape)} matrices "
                      f"(shape {tuple(a.shape)})")
    if not (a.dtype.is_floating_point or a.dtype.is_complex) or a.dtype.itemsize < 4:
        raise TypeError(f"{op}: expects a float32, float64, complex64 or complex128 tensor, got "
                        f"{a.dtype.name}")


def eig(A, *, out=None):
    """(eigenvalues, eigenvectors) of square matrices, complex; eigenvectors of unit norm."""
    _check(A, "linalg.eig")
    if out is not None:
        raise TypeError("linalg.eig: out= is not supported; use the returned tensors")
    L, V = Eig.apply(A)
    return _EigResult((L, V))


def eigvals(A, *, out=None):
    """The eigenvalues of square matrices (complex), with eig's gradient for them."""
    if out is not None:
        raise TypeError("linalg.eigvals: out= is not supported; use the returned tensor")
    _check(A, "linalg.eigvals")
    return Eig.apply(A)[0]


class _EigResult(tuple):
    """torch.return_types.linalg_eig: a pair with .eigenvalues and .eigenvectors."""
    eigenvalues = property(lambda self: self[0])
    eigenvectors = property(lambda self: self[1])


def _linalg_namespace():
    parent = sys.modules["tinytensor"]
    try:
        return importlib.import_module("tinytensor.linalg")
    except ModuleNotFoundError as e:
        if e.name != "tinytensor.linalg":
            raise
        ns = types.ModuleType("tinytensor.linalg", "tt.linalg (eig and eigvals: tinytensor/linalg_eig.py)")
        sys.modules["tinytensor.linalg"] = ns
        parent.linalg = ns
        return ns


_ns = _linalg_namespace()
_ns.eig, _ns.eigvals = eig, eigvals
