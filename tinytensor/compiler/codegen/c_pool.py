"""The C backend's thread pool, in C: `run(kernel, buffers, sizes, parts)` calls a generated
kernel's parts 1..parts-1 on the pool's workers and part 0 on the calling thread, and
returns when all are done; `gemm_job(...)` makes a BLAS matmul such a job.

Why C: a handoff between Python threads (a lock released, the GIL taken back) cost ~56 µs
on the dev machine, more than the gain on a 0.3 ms kernel and ~3 ms per GPT-2 bench step
over its ~110 split kernels and matmuls. Here a worker spins for a while (SPIN_NS) on the
pool's job counter before sleeping on a condition variable,
so the handoffs of one program run are a memory write away (a program's Python steps
between two kernels take ~10-100 µs); the caller's ctypes call holds
no GIL, so none of it touches Python.

One run at a time: a second caller (another thread's program) runs its parts itself, in
order (same results). A forked child starts with no workers (pthread_atfork) and runs
every part itself until `start` is called again there (threads.py does).

The gemm job calls the loaded OpenBLAS's cblas_sgemm/cblas_dgemm (threads.py finds it) on
a share of the output: whole matrices of the batch when there are at least as many as
parts, else blocks of rows. Each part is BLAS's product of its rows. Whether that is the
same arithmetic per element as one call over all the rows depends on the CPU's BLAS kernel:
on Zen 4 (AVX-512) it is bit for bit, on OpenBLAS's Haswell kernels (AVX2) it is not (NumPy's
own a[:k] @ b differs from (a @ b)[:k] there too), so only whole matrices of a batch keep the
bits everywhere.
"""
import ctypes

from .. import cache_disk
from .toolchain import FLAGS, source_file

SPIN_NS = 200_000   # how long a worker spins for the next job (0.2 ms),
YIELD_NS = 4_000_000   # then keeps spinning, yielding its core to any other runnable thread,
# up to 4 ms before it sleeps: woken from sleep, a worker joined a job 1-1.5 ms late on the
# 2-core dev VM (measured: a 2-thread eager sigmoid step after an idle 30 ms 5.9 -> 3.1 ms,
# layer_norm 5.9 -> 4.3 ms); OpenBLAS's own workers spin yielding the same way

SOURCE = "\n".join(source_file(f) for f in ("c_pool.c", "blas.h", "gemm.c"))   # one library: the pool runs gemm jobs


class Gemm(ctypes.Structure):
    _fields_ = [("gemm", ctypes.c_void_p), ("ilp64", ctypes.c_int64), ("dbl", ctypes.c_int64),
                ("nlead", ctypes.c_int64), ("lead", ctypes.c_int64 * 4), ("sa", ctypes.c_int64 * 4),
                ("sb", ctypes.c_int64 * 4), ("sc", ctypes.c_int64 * 4),
                ("M", ctypes.c_int64), ("N", ctypes.c_int64), ("K", ctypes.c_int64),
                ("ta", ctypes.c_int64), ("tb", ctypes.c_int64), ("lda", ctypes.c_int64),
                ("ldb", ctypes.c_int64), ("ldc", ctypes.c_int64), ("a_row", ctypes.c_int64),
                ("c_row", ctypes.c_int64), ("by_batch", ctypes.c_int64),
                ("A", ctypes.c_void_p), ("B", ctypes.c_void_p), ("C", ctypes.c_void_p)]


_lib = []


def library():
    if not _lib:
        lib = cache_disk.load(SOURCE, [f for f in FLAGS if f != "-shared"] + ["-shared", "-pthread"])
        lib.tt_pool_start.argtypes, lib.tt_pool_start.restype = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64], ctypes.c_int
        lib.tt_pool_run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
        lib.tt_pool_run.restype = ctypes.c_int
        _lib.append(lib)
    return _lib[0]


def start(workers):
    """Starts the pool's workers (up to `workers`); returns how many run."""
    return library().tt_pool_start(workers, SPIN_NS, max(SPIN_NS, YIELD_NS))


def runner():
    """run(kernel address, buffers address, sizes address or None, parts)."""
    return library().tt_pool_run


def gemm_part_address():
    return ctypes.cast(library().tt_gemm_part, ctypes.c_void_p).value
