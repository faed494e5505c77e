"""Timing helpers shared by the benchmarks: thread setup and interleaved medians."""
import os


def set_threads(n):
    """Same thread count for NumPy's BLAS, tinytensor's C pool (which runs as many threads
    as OpenBLAS does) and, by the caller, torch. The environment covers child processes and
    a NumPy not yet imported; an OpenBLAS already loaded (importing tinytensor.tools loads
    NumPy) is set directly, else a benchmark "at 1 thread" would run tinytensor on all cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    # and fixed: eager matmuls otherwise drop OpenBLAS to one thread for a quarter second
    # whenever another process is seen running (tinytensor/blas_threads.py), which torch
    # never does; a benchmark of n threads runs n
    os.environ["TINYTENSOR_BLAS_ADAPT"] = "0"
    import sys
    if "numpy" in sys.modules:
        from tinytensor.blas_threads import blas, set_adaptive
        set_adaptive(False)
        b = blas()
        if b is not None:
            b.set(n)


def median_n(fns, repeat, inner=1, settle=0, gap=0.0):
    """Median seconds per call of several functions, timed round-robin so that all see the
    same machine state (another process, turbo, caches). settle: untimed calls at the start
    of each function's turn; gap: seconds slept before them. A library's last call can leave its threads spinning for the next one's (OpenBLAS's
    workers spin ~0.1 s after a matmul, torch's OpenMP workers ~10 ms after a parallel
    region: measured, a 2-thread eager silu 5.1 -> 9.1 ms right after a torch op): a gap lets
    those spinners stop, and settling times every library as a training loop of its own
    back-to-back steps runs, each after itself."""
    import time
    for _ in range(2):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            if gap:
                time.sleep(gap)
            for _ in range(settle):
                fn()
            t = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - t) / inner)
    return [sorted(ts)[len(ts) // 2] for ts in times]
