"""Helpers shared by the fused ops (tinytensor/ops) and their CUDA launchers: array-module
dispatch, chunking, constants, vector widths and block sizes."""
import numpy as np

from ..core.tensor import Tensor
from ..device import xp_of  # noqa: F401  (the kernels read it from here)

# rows are processed in chunks of about this many elements on the CPU, so that each
# chunk's temporaries stay in cache while it is read a few times
CHUNK_ELEMS = 1 << 16


def is_cpu(a):
    return isinstance(a, np.ndarray)


def acc_dtype(dtype):
    """What a row is accumulated in: float64 for float64, float32 for narrower floats."""
    return np.float64 if dtype == np.float64 else np.float32


def row_chunks(rows, n, elems=CHUNK_ELEMS):
    step = max(1, elems // max(n, 1))
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)


def const(arr, like):
    """A Tensor holding `arr`, on `like`'s device, outside the graph."""
    return Tensor._make(arr, like.device, False)


def cuda_ok(a):
    """True when `a` is a CuPy array the CUDA kernels take (their dtypes; no bfloat16:
    tinytensor has no such dtype yet, so none is compiled)."""
    return not isinstance(a, np.ndarray) and str(a.dtype) in ("float32", "float64", "float16")


def i32(v):
    return np.int32(v)


def i64(v):
    """A count that may pass 2^31 (rows): the kernels take it as long long."""
    return np.int64(v)


def f32(v):
    return np.float32(v)


def acc_scalar(v, dtype):
    """A scalar for a kernel over `dtype`, in its accumulator type (double for float64)."""
    return acc_dtype(dtype)(v)


def vec_width(n, *arrays):
    """Elements a kernel moves per 16-byte load over rows of n: 16 bytes' worth when n is a
    multiple of it and every array (None: absent) starts 16-byte aligned, else 1."""
    v = 16 // arrays[0].dtype.itemsize
    return v if n % v == 0 and all(a is None or a.data.ptr % 16 == 0 for a in arrays) else 1


def block_threads(n, vec, dtype):
    """Threads of a block-per-row kernel (long-row softmax, cross-entropy) for a row of n:
    a power of two from 64 up to the kernels' launch bounds, about 4 loads per thread."""
    t, top = 64, 512 if dtype == np.float64 else 1024
    while t < top and t * vec * 4 < n:
        t *= 2
    return t
