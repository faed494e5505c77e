"""Eager matmuls on the C pool: a big float matmul runs as the compiled runner runs it, a
gemm job of the pool's threads (codegen/c_pool.py: blocks of rows, or whole matrices of a
batch, each part one 1-thread BLAS call) with OpenBLAS held to one thread meanwhile.

Why: an eager step mixes matmuls with C kernels that the same pool splits
(kernels/c_eager.py). With OpenBLAS's own threads doing the matmuls, its worker spins
after each one and shares a core with the pool's next kernel half; NumPy's batched matmul
also threads each small matrix of attention's (B, H, T, T) products on its own. One pool
for both keeps one worker per core. Measured on the 2-core dev machine, nanoGPT's eager
iteration (tools/bench.py train --model nanogpt): see README.

`matmul(a, b)` returns None where NumPy's matmul runs instead: one thread configured (or
adapt() lowered OpenBLAS to one on a busy machine, blas_threads.py), fewer than
threads.SPLIT_FLOPS multiply-adds, not float32/float64, a layout BLAS cannot read without a
copy, more than 4 batch dims, not OpenBLAS, or another Python thread's matmul running here.
"""
import ctypes
import math
import threading

import numpy as np

from .codegen import threads as _threads
from .codegen.runner import GemmJob

_jobs = {}                  # (a shape, b shape, out shape, dtype char, parts) -> GemmJob
_lock = threading.Lock()    # a job's arguments are set per call: one caller at a time
MAX_JOBS = 256              # shapes remembered (a job is a small ctypes struct)


def matmul(a, b):
    """a @ b of two float NumPy arrays of at least 2 dims and one dtype, or None."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype is not b.dtype and a.dtype != b.dtype or a.dtype.char not in "fd" \
            or not a.dtype.isnative:
        return None
    count = _threads.default_threads()
    if count <= 1:
        return None
    try:
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    shape = lead + (a.shape[-2], b.shape[-1])
    if len(lead) > 4 or math.prod(shape) * a.shape[-1] < _threads.SPLIT_FLOPS:
        return None
    if not _lock.acquire(blocking=False):
        return None
    try:
        pool = _threads.pool(count)
        key = (a.shape, b.shape, shape, a.dtype.char, pool.threads)
        job = _jobs.get(key)
        if job is None:
            gemm = pool.gemm(a.dtype)
            if gemm is None:
                return None
            if len(_jobs) >= MAX_JOBS:
                _jobs.clear()
            job = _jobs[key] = GemmJob(gemm, a.shape, b.shape, shape, a.dtype, pool.threads)
        out = np.empty(shape, a.dtype)
        if not job.set(a, b, out):
            return None
        with _threads.blas_held_to_one():
            pool.run(pool.gemm_part, ctypes.addressof(job.args), None, pool.threads)
        return out
    finally:
        _lock.release()
