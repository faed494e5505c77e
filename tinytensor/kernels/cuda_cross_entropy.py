"""CUDA launch of the fused cross-entropy (`cuda/cross_entropy.cu`) over (rows, C)
contiguous class-last logits. The op that calls it, and the formulas, are in
`tinytensor.ops.cross_entropy`."""
from . import _cuda
from ._common import acc_dtype, acc_scalar, block_threads, i32, i64, vec_width

CUDA_SOURCE = "cross_entropy"


def _launch(kind, x2, args):
    vec = vec_width(x2.shape[1], x2)
    _cuda.launch(CUDA_SOURCE, f"ce_{kind}<{_cuda.ctype(x2.dtype)}, {vec}>", _cuda.grid(x2.shape[0]),
                 (block_threads(x2.shape[1], vec, x2.dtype),), args)


def _tail(x2, w, ignore_index, eps):
    """The arguments both kernels end with: sizes, ignore_index, eps, weight flag, sum(w)."""
    rows, C = x2.shape
    acc = acc_dtype(x2.dtype)
    wsum = float(w.sum()) if w is not None else float(C)
    return (i64(rows), i32(C), i64(ignore_index), acc_scalar(eps, acc), i32(w is not None),
            acc_scalar(wsum, acc))


def forward(x2, t, w, ignore_index, eps):
    """(loss per row, stats (2, rows): max and log(sum(exp(x - max))) per row)."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    acc = acc_dtype(x2.dtype)
    loss = cupy.empty(x2.shape[0], acc)
    stats = cupy.empty((2, x2.shape[0]), acc)
    _launch("fwd", x2, (x2, t, w if w is not None else loss, loss, stats[0], stats[1])
            + _tail(x2, w, ignore_index, eps))
    return loss, stats


def backward(x2, t, w, stats, coef, ignore_index, eps):
    """dx of the rows, coef the upstream gradient per row (or one for all)."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    coef = cupy.ascontiguousarray(coef, dtype=acc_dtype(x2.dtype)).reshape(-1)
    dx = cupy.empty_like(x2)
    _launch("bwd", x2, (x2, t, w if w is not None else coef, stats[0], stats[1], coef,
                        i32(0 if coef.size == 1 else 1), dx) + _tail(x2, w, ignore_index, eps))
    return dx


def cuda_instantiations(full=False, arch=90):
    """Every kernel the dispatcher can pick, on every compute capability (`arch`)."""
    return [f"ce_{k}<{t}, {v}>" for t, size in (("float", 4), ("half16", 2), ("double", 8))
            for v in (1, 16 // size) for k in ("fwd", "bwd")]


_cuda.register(CUDA_SOURCE, cuda_instantiations)
