"""softmax and log_softmax: the reference ops, the fused ops and the rule that picks one.

`softmax(x, dim)` runs `FusedSoftmax` (one op, the last axis in cache-sized chunks on the
CPU, `kernels/cuda_softmax.py` on the GPU) when fusion is on and `_why_not_fused` finds
nothing against it, else `Softmax`, the reference (any dim). Both are one node on the tape
with the same two backward forms: `backward` in tinytensor ops (differentiable again, for
create_graph) and `backward_arrays` on raw arrays (first order). Graphs show which ran:
`softmax (fused)` or `softmax (reference: <why>)`; `tt.kernels.report()` tells the same.
"""
import numpy as np

from ..amp import cast_inputs
from ..core.function import Function
from ..core.primitives import summand
from ..kernels import c_eager as _c_eager, c_softmax as _c_softmax, c_softmax_mid as _c_softmax_mid, cuda_softmax, \
    fusion as _fusion
from ..kernels._common import acc_dtype, cuda_ok, is_cpu, row_chunks
from ..core.rules import Rule
from .elementwise import exp, float_operand, log
from .movement import norm_dim
from .reduce import amax, sum as sum_
from ..device import xp_of as _xp

__all__ = ["Softmax", "LogSoftmax", "FusedSoftmax", "FusedLogSoftmax", "softmax", "log_softmax"]  # what `from .softmax import *` gives the ops namespace


def _rowdot(a, b, dim):
    """sum(a * b, dim, keepdims=True) without materialising a * b when dim is the last."""
    if dim == a.ndim - 1 and a.dtype == b.dtype:
        return _xp(a).einsum("...i,...i->...", a, b)[..., None]
    return (a * b).sum(axis=dim, keepdims=True)


# the gradients in tinytensor ops, shared by the reference and the fused op
def _softmax_grad(g, y, dim):
    # y * (g - sum(g * y)), as backward_arrays: g * y - y * sum(g * y) rounds both terms
    # before they cancel, ~10x eager's error where g ~ sum(g * y) (a compiled step records this)
    return y * (g - sum_(g * y, dim=dim, keepdim=True))


def _log_softmax_grad(g, y, dim):
    return g - exp(y) * sum_(g, dim=dim, keepdim=True)


# forward mode (issue 27): softmax's Jacobian diag(y) - y y^T is symmetric, so its jvp is its
# backward with the tangent for the gradient; log_softmax's, I - 1 p^T, is not: t - sum(p * t)
def _log_softmax_tangent(t, y, dim):
    return t - sum_(exp(y) * t, dim=dim, keepdim=True)


# ---------------------------------------------------------------- the reference ops
class Softmax(Function):
    # compiled as its `decompose` (a row kernel); the compiler's 5 FLOPs per element are its steps
    compile_rule = Rule(transcendental=True, lower=True, flops=5)

    @staticmethod
    def decompose(x, dim):
        """The NumPy forward's ops in its order (max, subtract, exp, sum, divide): what
        tt.compile computes for this op (bit for bit the forward's, tests/test_decompose.py)."""
        e = exp(x - amax(x, dim=dim, keepdim=True))
        return e / sum_(e, dim=dim, keepdim=True)

    @staticmethod
    def forward(ctx, x, dim):
        xp = _xp(x)
        if x.size == 0:  # max over an empty dim has no identity
            e = x.copy()
            ctx.save_for_backward(e)
            return e
        if dim == x.ndim - 1 and _c_eager.takes(x):   # the fused op's C kernel: the same bits
            e = _cpu_forward(x, False)
            ctx.save_for_backward(e)
            return e
        e = _c_softmax_mid.forward(x, dim)   # a dim before the last, in C: NumPy's order
        if e is not None:
            ctx.save_for_backward(e)
            return e
        # one temporary: shift, exponentiate and normalise in place
        e = xp.subtract(x, x.max(axis=dim, keepdims=True))
        xp.exp(e, out=e)
        e /= summand(e).sum(axis=dim, keepdims=True)   # in index order (tt.compile's too)
        ctx.save_for_backward(e)
        return e

    @staticmethod
    def backward(ctx, g):
        return _softmax_grad(g, ctx.saved_tensor(0), ctx.attrs["dim"])

    jvp = backward   # a symmetric Jacobian

    @staticmethod
    def backward_arrays(ctx, g):  # y * (g - sum(g * y)), with one temporary
        y = ctx.saved_array(0)
        if ctx.attrs["dim"] == y.ndim - 1 and _c_eager.takes(y, g):
            return _cpu_backward(g, y, False)
        gx = _c_softmax_mid.backward(g, y, ctx.attrs["dim"])   # NumPy's bits below, in C
        if gx is not None:
            return gx
        gx = _xp(g).subtract(g, _rowdot(g, y, ctx.attrs["dim"]))
        gx *= y
        return gx


class LogSoftmax(Function):
    compile_rule = Rule(transcendental=True, lower=True, flops=5)

    @staticmethod
    def decompose(x, dim):
        """The NumPy forward's ops in its order: max, subtract, exp, sum, log, subtract."""
        d = x - amax(x, dim=dim, keepdim=True)
        return d - log(sum_(exp(d), dim=dim, keepdim=True))

    @staticmethod
    def forward(ctx, x, dim):
        xp = _xp(x)
        if x.size == 0:
            out = x.copy()
            ctx.save_for_backward(out)
            return out
        if dim == x.ndim - 1 and _c_eager.takes(x):
            out = _cpu_forward(x, True)
            ctx.save_for_backward(out)
            return out
        out = xp.subtract(x, x.max(axis=dim, keepdims=True))
        out -= xp.log(summand(xp.exp(out)).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return _log_softmax_grad(g, ctx.saved_tensor(0), ctx.attrs["dim"])

    @staticmethod
    def jvp(ctx, t):
        return _log_softmax_tangent(t, ctx.saved_tensor(0), ctx.attrs["dim"])

    @staticmethod
    def backward_arrays(ctx, g):
        y = ctx.saved_array(0)
        if ctx.attrs["dim"] == y.ndim - 1 and _c_eager.takes(y, g):
            return _cpu_backward(g, y, True)
        xp = _xp(y)
        gx = xp.exp(y)
        gx *= g.sum(axis=ctx.attrs["dim"], keepdims=True)
        xp.subtract(g, gx, out=gx)
        return gx


# ---------------------------------------------------------------- the fused ops
def _forward_op(log):
    return log_softmax if log else softmax


def _cpu_forward(x, log):
    """Rows in cache-sized chunks, each shifted, exponentiated and normalised in place in
    the output: the forward allocates only the output (plus per-row scalars). Big
    float32/float64 inputs run the op's C kernel instead (kernels/c_eager.py)."""
    n = x.shape[-1]
    if _c_eager.takes(x):
        got = _c_softmax.forward(x.reshape(-1, n), log)   # exp once per element
        if got is not None:
            return got.reshape(x.shape)
        fn = _forward_op(log)
        got = _c_eager.run(fn.__name__, lambda t: fn(t, -1), [x.reshape(-1, n)], ("rn",))
        if got is not None:
            return got[0].reshape(x.shape)
    x2 = x.reshape(-1, n)
    out = np.empty(x.shape, x.dtype)
    o2 = out.reshape(-1, n)
    acc = acc_dtype(x.dtype)
    for r0, r1 in row_chunks(x2.shape[0], n):
        xc = x2[r0:r1]
        if acc != x.dtype:
            xc = xc.astype(acc)
        oc = np.subtract(xc, xc.max(axis=1, keepdims=True), out=None if acc != x.dtype else o2[r0:r1])
        if log:
            oc -= np.log(np.exp(oc).sum(axis=1, keepdims=True))
        else:
            np.exp(oc, out=oc)
            oc /= oc.sum(axis=1, keepdims=True)
        if oc.dtype != x.dtype:
            o2[r0:r1] = oc
    return out


def _cpu_backward(g, y, log):
    n = y.shape[-1]
    if _c_eager.takes(y, g):
        # the compiled backward's formula (the op's `backward`), so the same bits as tt.compile's
        grad = _log_softmax_grad if log else _softmax_grad
        got = _c_eager.run(("log_softmax" if log else "softmax") + "_backward",
                           lambda yt, gt: grad(gt, yt, -1), [y.reshape(-1, n), g.reshape(-1, n)],
                           ("rn", "rn"))
        if got is not None:
            return got[0].reshape(y.shape)
    g2, y2 = g.reshape(-1, n), y.reshape(-1, n)
    gx = np.empty(y.shape, y.dtype)
    d2 = gx.reshape(-1, n)
    acc = acc_dtype(y.dtype)
    for r0, r1 in row_chunks(y2.shape[0], n):
        gc, yc = g2[r0:r1], y2[r0:r1]
        if acc != y.dtype:
            gc, yc = gc.astype(acc), yc.astype(acc)
        out = d2[r0:r1] if acc == y.dtype else None
        if log:  # g - exp(y) * sum(g)
            dc = np.exp(yc, out=out)
            dc *= gc.sum(axis=1, keepdims=True)
            np.subtract(gc, dc, out=dc)
        else:    # y * (g - sum(g * y))
            dc = np.subtract(gc, np.einsum("ij,ij->i", gc, yc)[:, None], out=out)
            dc *= yc
        if dc.dtype != y.dtype:
            d2[r0:r1] = dc
    return gx


class FusedSoftmax(Function):
    """softmax over the last axis in one pass; one op on the tape, named like the reference."""
    compile_rule = Rule(transcendental=True, flops=5)   # the reference's steps: a graph costs the same fused or not
    name = "softmax"
    fusion = "fused"
    log = False

    @classmethod
    def forward(cls, ctx, x):
        y = _cpu_forward(x, cls.log) if is_cpu(x) else cuda_softmax.forward(x, cls.log)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return _softmax_grad(g, ctx.saved_tensor(0), -1)

    jvp = backward

    @classmethod
    def backward_arrays(cls, ctx, g):
        y = ctx.saved_array(0)
        return _cpu_backward(g, y, cls.log) if is_cpu(y) else cuda_softmax.backward(g, y, cls.log)


class FusedLogSoftmax(FusedSoftmax):
    name = "log_softmax"
    log = True

    @staticmethod
    def backward(ctx, g):
        return _log_softmax_grad(g, ctx.saved_tensor(0), -1)

    @staticmethod
    def jvp(ctx, t):
        return _log_softmax_tangent(t, ctx.saved_tensor(0), -1)


# ---------------------------------------------------------------- the rule and the functions
def _why_not_fused(x, dim):
    """None when the fused op takes x over dim (the last axis of a non-empty float array, on
    the GPU in a dtype its kernels have), else why not."""
    a = x.data
    if dim != a.ndim - 1:
        return f"dim {dim} is not the last axis ({a.ndim - 1})"
    if a.size == 0:
        return "empty input"
    if not (is_cpu(a) or cuda_ok(a)):
        return f"no CUDA kernel for {a.dtype}"
    return None


def _pick(x, dim, dtype, op, fused, reference):
    x, = cast_inputs(op, x)
    x = float_operand(x, op) if dtype is None else x.to(dtype)
    dim = norm_dim(dim, x.ndim, op)
    if x.ndim == 0:  # as torch: a one-element row (1 / 0); the array code needs an axis
        return _pick(x.reshape(1), 0, None, op, fused, reference).reshape(())
    why = _fusion.choose("softmax", _why_not_fused, x, dim)
    if why is None:
        return fused.apply(x)
    return _fusion.mark(reference.apply(x, dim=dim), op, why, x)


def softmax(x, dim=-1, dtype=None):
    return _pick(x, dim, dtype, "softmax", FusedSoftmax, Softmax)


def log_softmax(x, dim=-1, dtype=None):
    return _pick(x, dim, dtype, "log_softmax", FusedLogSoftmax, LogSoftmax)
