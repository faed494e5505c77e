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
import ctypes
import os
import threading

SPLIT_ELEMENTS = 1 << 18   # a kernel over fewer elements runs in one thread (256K)
SPLIT_FLOPS = 1 << 22      # a matmul of fewer multiply-adds (m*n*k) too
TUNE_CALLS = 3             # a kernel's first calls time it whole and split, 3 each (runner.py)
SPLIT_GAIN = 0.9           # and split it from then on if that took <= 0.9 of the whole time

# (prefix, suffix) of OpenBLAS's exported names: NumPy's wheels (scipy-openblas, 64-bit
# ints), a 64-bit-int build, a plain one
_BUILDS = [("scipy_", "64_"), ("", "64_"), ("", "_64"), ("", "")]


class _Blas:
    """get() / set(n) of a loaded OpenBLAS's thread count, and its gemm functions."""

    def __init__(self, lib, pre, suf):
        self._lib, self._pre, self._suf = lib, pre, suf
        self._set = getattr(lib, f"{pre}openblas_set_num_threads{suf}")
        self._get = getattr(lib, f"{pre}openblas_get_num_threads{suf}")
        self._set.argtypes, self._set.restype = [ctypes.c_int], None
        self._get.argtypes, self._get.restype = [], ctypes.c_int

    def gemm(self, dtype):
        """(address of cblas_sgemm / cblas_dgemm, whether its ints are 64-bit) or None."""
        import numpy as np
        name = {"float32": "sgemm", "float64": "dgemm"}.get(np.dtype(dtype).name)
        fn = getattr(self._lib, f"{self._pre}cblas_{name}{self._suf}", None) if name else None
        if fn is None:
            return None
        return ctypes.cast(fn, ctypes.c_void_p).value, self._ilp64()

    def _ilp64(self):
        """Whether the BLAS's ints are 64-bit: its build configuration says USE64BITINT (a
        64-bit build may export plain names); the name's suffix where it cannot tell."""
        config = getattr(self._lib, f"{self._pre}openblas_get_config{self._suf}", None)
        if config is not None:
            config.argtypes, config.restype = [], ctypes.c_char_p
            text = config() or b""
            return b"USE64BITINT" in text
        return "64" in self._suf

    def get(self):
        return int(self._get())

    def set(self, n):
        self._set(int(n))


def _loaded_openblas():
    """Paths of the shared objects with 'openblas' in their name mapped into this process
    (Linux's /proc/self/maps; elsewhere none: the pool then runs without borrowing)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


_BLAS = None
_SEARCHED = False


def blas():
    """The loaded OpenBLAS's thread control, or None. NumPy loads it, so it is searched for
    once NumPy is imported (tinytensor imports NumPy first)."""
    global _BLAS, _SEARCHED
    if not _SEARCHED:
        _SEARCHED = True
        for path in _loaded_openblas():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for pre, suf in _BUILDS:
                if hasattr(lib, f"{pre}openblas_set_num_threads{suf}") and \
                        hasattr(lib, f"{pre}openblas_get_num_threads{suf}"):
                    _BLAS = _Blas(lib, pre, suf)
                    return _BLAS
    return _BLAS


def default_threads():
    """The threads a compiled C program uses unless told (tt.compile(threads=)): as many as
    NumPy's OpenBLAS runs, so a program uses the cores an eager step would; 1 when the BLAS
    is not one whose threads can be borrowed."""
    b = blas()
    return max(1, b.get()) if b is not None else 1


@contextlib.contextmanager
def blas_held_to_one(active=True):
    """OpenBLAS at one thread inside (when `active` and there is one to hold), as before after."""
    b = blas() if active else None
    if b is None:
        yield
        return
    before = b.get()
    if before != 1:
        b.set(1)
    try:
        yield
    finally:
        if before != 1:
            b.set(before)


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
