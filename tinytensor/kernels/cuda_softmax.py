"""CUDA launch of softmax / log_softmax over the last axis (`cuda/softmax.cu`): a warp per
row in registers for rows up to 1024, a block per row with the online max/sum algorithm
beyond (float64 always the latter). Row counts are 64-bit, on a 2-D grid past 2^31 - 1
blocks (`_cuda.grid`). The op that calls it is `tinytensor.ops.softmax.FusedSoftmax`."""
import numpy as np

from . import _cuda
from ._common import block_threads, i32, i64, vec_width

CUDA_SOURCE = "softmax"
_WARP_MAX_COLS = 32     # values one lane holds in registers
_BLOCK_ROW = 1024       # rows longer than this use one block per row


def _warp_items(n, vec):
    items, need = 1, -(-n // (32 * vec))
    while items < need:
        items *= 2
    return items


def _launch(kind, arrays, out, log):
    """softmax_{kind}_warp or _block over the rows of `out`, reading `arrays`."""
    n = out.shape[-1]
    rows = out.size // n
    t = _cuda.ctype(out.dtype)
    vec = vec_width(n, *arrays)
    lg = "true" if log else "false"
    args = tuple(arrays) + (out, i64(rows), i32(n))
    if n <= _BLOCK_ROW and out.dtype != np.float64:
        _cuda.launch(CUDA_SOURCE, f"softmax_{kind}_warp<{t}, {vec}, {_warp_items(n, vec)}, {lg}>",
                     _cuda.grid(-(-rows // 4)), (32, 4), args)
    else:
        _cuda.launch(CUDA_SOURCE, f"softmax_{kind}_block<{t}, {vec}, {lg}>", _cuda.grid(rows),
                     (block_threads(n, vec, out.dtype),), args)
    return out


def forward(x, log):
    # CuPy is optional: imported only on a GPU path
    import cupy
    x = cupy.ascontiguousarray(x)
    return _launch("fwd", (x,), cupy.empty_like(x), log)


def backward(g, y, log):
    # CuPy is optional: imported only on a GPU path
    import cupy
    g, y = cupy.ascontiguousarray(g), cupy.ascontiguousarray(y)
    return _launch("bwd", (g, y), cupy.empty_like(y), log)


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
