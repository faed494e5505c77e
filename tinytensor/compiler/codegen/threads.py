"""Threads of the C backend: one pool that splits big kernels and matmuls over the cores,
and the BLAS thread count it borrows those cores from.

Why both: NumPy's OpenBLAS keeps its worker threads spinning for a while after every
matmul (~0.1 s by default), so a kernel run on a second thread of our own right after a
matmul shares its core with a spinner and gains nothing (measured: 0.55 -> 0.60 ms on a
compute-bound 1M-element kernel). So while a compiled program runs, OpenBLAS is held to
one thread and the pool splits the matmuls itself (row blocks, or the leading batch dim),
which frees the cores between matmuls for the pool's kernel halves. Measured on the dev
machine (2 cores): a (1024, 1024) @ (1024, 256) matmul 2.68 ms by OpenBLAS's 2 threads,
2.69 ms as two 1-thread halves; the kernel after it 0.52 ms alone, 0.31 ms in halves.

`blas()` finds the loaded OpenBLAS by its exported thread-count functions; with another
BLAS (MKL, Accelerate) or none found, `default_threads()` is 1 and nothing is borrowed.
While a program holds OpenBLAS to one thread, NumPy matmuls that are not gemm jobs (small
ones, layouts BLAS cannot read) and another Python thread's matmuls run on one thread.

The pool itself is C (c_pool.py): its workers spin briefly between jobs, so a handoff is a
memory write, not a trip through the GIL. Only work of at least SPLIT_ELEMENTS elements or
SPLIT_FLOPS multiply-adds is split, and a kernel only where its first calls measured that
faster (runner.py `_tuned`).
"""
import contextlib
import os
import threading

from ...blas_threads import blas, configured  # noqa: F401  (the loaded OpenBLAS: below the compiler, eager adapts it too)

SPLIT_ELEMENTS = 1 << 18   # a kernel over fewer elements runs in one thread (256K)
SPLIT_FLOPS = 1 << 22      # a matmul of fewer multiply-adds (m*n*k) too
TUNE_CALLS = 3             # a kernel's first calls time it whole and split, 3 each (runner.py)
SPLIT_GAIN = 0.9           # and split it from then on if that took <= 0.9 of the whole time

def default_threads():
    """The threads a compiled C program uses unless told (tt.compile(threads=)): as many as
    NumPy's OpenBLAS runs, so a program uses the cores an eager step would; 1 when the BLAS
    is not one whose threads can be borrowed."""
    b = blas()
    return max(1, b.get()) if b is not None else 1


def program_threads():
    """The threads a compiled C program is built for unless told: default_threads() as the
    user configured it, not as eager matmuls adapt it to the machine's load at the moment
    of the build (blas_threads.configured): a program keeps its count for life, and one
    built while a short-lived process happened to run would otherwise run every later step
    on one thread (seen: nanoGPT's compiled iteration 117 ms instead of 74 ms)."""
    b = blas()
    return max(1, configured(b)) if b is not None else 1


_held = [0, None]                 # holders inside blas_held_to_one, the count to restore
_held_lock = threading.Lock()


@contextlib.contextmanager
def blas_held_to_one(active=True):
    """OpenBLAS at one thread inside (when `active` and there is one to hold), as before after.
    Holders in several threads at once (an eager matmul, a compiled program, a conv's gemm
    parts) share one hold: the first saves the count, the last restores it (each restoring
    its own would leave OpenBLAS at one thread when the holds overlap)."""
    b = blas() if active else None
    if b is None:
        yield
        return
    with _held_lock:
        if _held[0] == 0:
            _held[1] = b.get()
            if _held[1] != 1:
                b.set(1)
        _held[0] += 1
    try:
        yield
    finally:
        with _held_lock:
            _held[0] -= 1
            if _held[0] == 0 and _held[1] != 1:
                b.set(_held[1])


class Pool:
    """The C pool (c_pool.py) with `threads` threads in all: the caller and threads - 1
    workers. run(kernel, buffers, sizes, parts): part k of parts of a generated kernel (or
    of a gemm job, `gemm`), all at once."""

    def __init__(self, threads):
        from . import c_pool
        self._pid = os.getpid()
        # no more threads than cores (OPENBLAS_NUM_THREADS=64 on 2 cores would only spin);
        # one C pool serves every program of the process
        threads = min(threads, os.cpu_count() or 1)
        self.threads = min(threads, 1 + c_pool.start(threads - 1)) if threads > 1 else 1
        self.run = c_pool.runner()
        self.gemm_part = c_pool.gemm_part_address()

    def gemm(self, dtype):
        """The loaded BLAS's gemm for `dtype` (float32 / float64), as (address, ilp64), or None."""
        b = blas()
        return None if b is None else b.gemm(dtype)


_POOLS = {}
_POOLS_LOCK = threading.Lock()


def pool(threads):
    """The process's pool of `threads` threads (None for one); a forked child makes its own
    (threads do not survive a fork)."""
    if threads <= 1:
        return None
    with _POOLS_LOCK:
        p = _POOLS.get(threads)
        if p is None or p._pid != os.getpid():
            p = _POOLS[threads] = Pool(threads)
        return p
