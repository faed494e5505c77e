"""CUDA launch of layer_norm / rms_norm (`cuda/layer_norm.cu`) over (rows, n) arrays: every
array contiguous (a weight or bias may come as a strided view, `W[:, 0]`, which the kernels
would read as `w + c`), row counts 64-bit, eps in the accumulator type. The op that calls
it is `tinytensor.ops.norms.FusedNorm`."""
from . import _cuda
from ._common import acc_dtype, acc_scalar, i32, i64, vec_width

CUDA_SOURCE = "layer_norm"


def _threads(n, vec):
    t = 32
    while t < 1024 and t * vec * 4 < n:
        t *= 2
    return t


def _flat(cupy, a, n):
    """`a` as n contiguous elements (None stays None)."""
    return None if a is None else cupy.ascontiguousarray(a).reshape(n)


def forward(x2, w, b, eps, rms):
    """(y, mean, rstd) of the rows of x2; mean stays zero for rms."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    x2 = cupy.ascontiguousarray(x2)
    rows, n = x2.shape
    w, b = _flat(cupy, w, n), _flat(cupy, b, n)
    acc = acc_dtype(x2.dtype)
    y = cupy.empty_like(x2)
    mu = cupy.zeros(rows, acc)
    rstd = cupy.empty(rows, acc)
    vec = vec_width(n, x2, w, b)
    _cuda.launch(CUDA_SOURCE, f"norm_fwd<{_cuda.ctype(x2.dtype)}, {vec}, {'true' if rms else 'false'}>",
                 _cuda.grid(rows), (_threads(n, vec),),
                 (x2, x2 if w is None else w, x2 if b is None else b, y, mu, rstd,
                  i64(rows), i32(n), acc_scalar(eps, x2.dtype), i32(w is not None), i32(b is not None)))
    return y, mu, rstd


def backward(g2, x2, w, mu, rstd, rms, need_x, need_w, need_b):
    """(dx, dw, db), None where not needed; dw and db in the accumulator type."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    g2, x2 = cupy.ascontiguousarray(g2), cupy.ascontiguousarray(x2)
    rows, n = x2.shape
    w = _flat(cupy, w, n)
    t = _cuda.ctype(x2.dtype)
    r = "true" if rms else "false"
    gx = gw = gb = None
    if need_x:
        gx = cupy.empty_like(x2)
        vec = vec_width(n, x2, g2, w)
        _cuda.launch(CUDA_SOURCE, f"norm_bwd_dx<{t}, {vec}, {r}>", _cuda.grid(rows), (_threads(n, vec),),
                     (g2, x2, x2 if w is None else w, mu, rstd, gx, i64(rows), i32(n),
                      i32(w is not None)))
    if need_w or need_b:
        chunk = max(32, -(-rows // 256))
        chunks = -(-rows // chunk)
        acc = acc_dtype(x2.dtype)
        dw = cupy.empty((chunks, n), acc)
        db = cupy.empty((chunks, n), acc)
        _cuda.launch(CUDA_SOURCE, f"norm_bwd_wb<{t}, {r}>", (-(-n // 256), chunks), (256,),
                     (g2, x2, mu, rstd, dw, db, i64(rows), i32(n), i64(chunk)))
        gw = dw.sum(axis=0) if need_w else None
        gb = db.sum(axis=0) if need_b else None
    return gx, gw, gb


def cuda_instantiations(full=False, arch=90):
    """Every kernel the dispatcher can pick, on every compute capability (`arch`)."""
    out = []
    for t, size in (("float", 4), ("half16", 2), ("double", 8)):
        for r in ("false", "true"):
            for vec in (1, 16 // size):
                out += [f"norm_fwd<{t}, {vec}, {r}>", f"norm_bwd_dx<{t}, {vec}, {r}>"]
            out.append(f"norm_bwd_wb<{t}, {r}>")
    return out


_cuda.register(CUDA_SOURCE, cuda_instantiations)
