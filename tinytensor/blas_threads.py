"""Eager matmuls on a busy machine: OpenBLAS drops to one thread while the cores are contended.

Why. OpenBLAS splits a gemm over its threads and waits for the slowest part; when another
process holds one of the cores, the part scheduled there runs at a fraction of the speed
(and the other threads spin while they wait), so two threads can be several times slower
than one. Measured on a 2-core EPYC with a busy loop on one core: see README ("Threads").

How. Every matmul first calls `adapt()`; at most every INTERVAL seconds it counts the
runnable tasks of other processes (/proc/loadavg's running count, less this process's own
running threads from /proc/self/task) and sets OpenBLAS to one thread when those and its
threads would not fit on the cores, back to the count it started with when they would.
The count it started with is the user's (OPENBLAS_NUM_THREADS, or all cores): a user who
asked for one thread keeps one. TINYTENSOR_BLAS_ADAPT=0 turns this off. Off Linux, or with
a BLAS whose threads cannot be set (MKL, Accelerate), it does nothing.
"""
import os
import time

INTERVAL = 0.25  # seconds between looks at the machine (a look reads /proc)

_state = {"next": 0.0, "blas": None, "base": None, "now": None, "off": None}


def threads_for(base, others, cpus):
    """OpenBLAS threads for `others` runnable tasks of other processes on `cpus` cores."""
    return base if others + base <= cpus else 1


def runnable_elsewhere():
    """Runnable tasks of other processes right now, or None where Linux's /proc is missing."""
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        mine = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    # the state follows the command name in parentheses (which may hold spaces)
                    if f.read().rsplit(")", 1)[1].split()[0] == "R":
                        mine += 1
            except (OSError, IndexError):
                continue
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - mine)


def adapt():
    """Called before an eager matmul; cheap (a clock read) except every INTERVAL seconds."""
    s = _state
    now = time.monotonic()
    if now < s["next"]:
        return
    s["next"] = now + INTERVAL
    if s["off"] is None:
        s["off"] = os.environ.get("TINYTENSOR_BLAS_ADAPT", "1") == "0"
        if not s["off"]:
            from .compiler.codegen.threads import blas  # finds the loaded OpenBLAS
            s["blas"] = blas()
            s["base"] = s["now"] = s["blas"].get() if s["blas"] is not None else 1
    if s["off"] or s["blas"] is None or s["base"] <= 1:
        return
    others = runnable_elsewhere()
    if others is None:
        return
    if s["blas"].get() != s["now"]:
        return  # set by someone else (a compiled program holding it at one, the user): theirs
    want = threads_for(s["base"], others, os.cpu_count() or 1)
    if want != s["now"]:
        s["blas"].set(want)
        s["now"] = want


def current():
    """(threads OpenBLAS runs now, threads it started with), for tests and benchmarks."""
    return _state["now"], _state["base"]
