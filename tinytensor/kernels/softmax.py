"""Fused softmax and log_softmax over the last axis.

CPU: rows in cache-sized chunks; each chunk is shifted, exponentiated and normalised in
place in the output, so the forward allocates only the output (plus per-row scalars).
CUDA: `cuda/softmax.cu` (a warp per row in registers for rows up to 1024, a block per
row with the online max/sum algorithm beyond; float64 always the latter). Row counts are
64-bit, on a 2-D grid past 2^31 - 1 blocks (`_cuda.grid`).

The reference decomposition is `tinytensor.ops.nn.Softmax` / `LogSoftmax`; with
`create_graph=True` the backward here is written in tinytensor ops, as there.
"""
import numpy as np

from ..autograd import STATE
from ..core.function import Function
from ..ops.elementwise import exp
from ..ops.reduce import sum as sum_
from . import _cuda
from ._common import acc_dtype, const, cuda_ok, i32, i64, is_cpu, row_chunks

CUDA_SOURCE = "softmax"
_WARP_MAX_COLS = 32     # values one lane holds in registers
_BLOCK_ROW = 1024       # rows longer than this use one block per row


# ---------------------------------------------------------------- CPU
def _cpu_forward(x, log):
    n = x.shape[-1]
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


# ---------------------------------------------------------------- CUDA
def _vec(a, n):
    v = 16 // a.dtype.itemsize
    return v if n % v == 0 and a.data.ptr % 16 == 0 else 1


def _warp_items(n, vec):
    items, need = 1, -(-n // (32 * vec))
    while items < need:
        items *= 2
    return items


def _cuda_forward(x, log):
    import cupy
    x = cupy.ascontiguousarray(x)
    n = x.shape[-1]
    rows = x.size // n
    y = cupy.empty_like(x)
    t = _cuda.ctype(x.dtype)
    vec = _vec(x, n)
    lg = "true" if log else "false"
    if n <= _BLOCK_ROW and x.dtype != np.float64:
        items = _warp_items(n, vec)
        _cuda.launch(CUDA_SOURCE, f"softmax_fwd_warp<{t}, {vec}, {items}, {lg}>",
                     _cuda.grid(-(-rows // 4)), (32, 4), (x, y, i64(rows), i32(n)))
    else:
        _cuda.launch(CUDA_SOURCE, f"softmax_fwd_block<{t}, {vec}, {lg}>", _cuda.grid(rows),
                     (_block_threads(n, vec, x.dtype),), (x, y, i64(rows), i32(n)))
    return y


def _cuda_backward(g, y, log):
    import cupy
    g, y = cupy.ascontiguousarray(g), cupy.ascontiguousarray(y)
    n = y.shape[-1]
    rows = y.size // n
    dx = cupy.empty_like(y)
    t = _cuda.ctype(y.dtype)
    vec = min(_vec(g, n), _vec(y, n))
    lg = "true" if log else "false"
    if n <= _BLOCK_ROW and y.dtype != np.float64:
        items = _warp_items(n, vec)
        _cuda.launch(CUDA_SOURCE, f"softmax_bwd_warp<{t}, {vec}, {items}, {lg}>",
                     _cuda.grid(-(-rows // 4)), (32, 4), (g, y, dx, i64(rows), i32(n)))
    else:
        _cuda.launch(CUDA_SOURCE, f"softmax_bwd_block<{t}, {vec}, {lg}>", _cuda.grid(rows),
                     (_block_threads(n, vec, y.dtype),), (g, y, dx, i64(rows), i32(n)))
    return dx


def _block_threads(n, vec, dtype):
    t, top = 64, 512 if dtype == np.float64 else 1024  # the kernels' launch bounds
    while t < top and t * vec * 4 < n:
        t *= 2
    return t


def cuda_instantiations(full=False, arch=90):
    """Every kernel the dispatcher above can pick (`full`), or the largest of each kind,
    which bound the register use of the rest, plus the smallest. The same on every
    compute capability (`arch`)."""
    out = []
    for t, size in (("float", 4), ("half16", 2), ("double", 8)):
        for vec in (1, 16 // size):
            for lg in ("false", "true"):
                for kind in ("fwd", "bwd"):
                    out.append(f"softmax_{kind}_block<{t}, {vec}, {lg}>")
                    if t == "double":
                        continue
                    top = _WARP_MAX_COLS // vec
                    items = [1 << i for i in range(top.bit_length())] if full else sorted({1, top})
                    for it in items:
                        out.append(f"softmax_{kind}_warp<{t}, {vec}, {it}, {lg}>")
    return out


_cuda.register(CUDA_SOURCE, cuda_instantiations)


# ---------------------------------------------------------------- the ops
def _forward(x, log):
    return _cpu_forward(x, log) if is_cpu(x) else _cuda_forward(x, log)


class FusedSoftmax(Function):
    """softmax over the last axis; one op on the tape, named like the reference."""
    name = "softmax"

    @staticmethod
    def forward(ctx, x):
        y = _forward(x, False)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        if not STATE.grad_enabled:
            (y,) = ctx.saved_arrays
            gd = g.data
            return const(_cpu_backward(gd, y, False) if is_cpu(y) else _cuda_backward(gd, y, False), g)
        (y,) = ctx.saved_tensors  # the decomposition, differentiable again
        gy = g * y
        return gy - y * sum_(gy, dim=-1, keepdim=True)


class FusedLogSoftmax(Function):
    name = "log_softmax"

    @staticmethod
    def forward(ctx, x):
        y = _forward(x, True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        if not STATE.grad_enabled:
            (y,) = ctx.saved_arrays
            gd = g.data
            return const(_cpu_backward(gd, y, True) if is_cpu(y) else _cuda_backward(gd, y, True), g)
        (y,) = ctx.saved_tensors
        return g - exp(y) * sum_(g, dim=-1, keepdim=True)


def applies(x, dim):
    """The fused kernels take the last axis of a non-empty float array."""
    a = x.data
    return dim == a.ndim - 1 and a.size > 0 and (is_cpu(a) or cuda_ok(a))


def softmax(x, log=False):
    return (FusedLogSoftmax if log else FusedSoftmax).apply(x)
