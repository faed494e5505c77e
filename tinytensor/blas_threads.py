"""Eager matmuls on a busy machine: OpenBLAS drops to one thread while the cores are contended.

Why. OpenBLAS splits a gemm over its threads and waits for the slowest part; when another
process holds one of the cores, the part scheduled there runs at a fraction of the speed
(and the other threads spin while they wait), so two threads can be several times slower
than one. Measured on a 2-core EPYC with a busy loop on one core: see README ("Threads").

How. Every matmul first calls `adapt()`; at most every INTERVAL seconds it counts the
runnable tasks of other processes (/proc/loadavg's running count, less this process's own
running threads from /proc/self/task) and sets OpenBLAS to one thread when those and its
threads would not have fit on the cores at BUSY_LOOKS looks in a row, back to the count it
started with as soon as they fit. One look is a snapshot: a short-lived process (a shell
command, a compiler) caught in it would otherwise drop a whole INTERVAL's matmuls to one
thread on an idle machine (seen: 1 look in 3 on the 2-core dev machine while others ran
`git`); a busy loop is there at every look.
The count it started with is the user's (OPENBLAS_NUM_THREADS, or all cores): a user who
asked for one thread keeps one. TINYTENSOR_BLAS_ADAPT=0 turns this off. Off Linux, or with
a BLAS whose threads cannot be set (MKL, Accelerate), it does nothing.
"""
import ctypes
import os
import time

INTERVAL = 0.25  # seconds between looks at the machine (a look reads /proc)
BUSY_LOOKS = 2   # looks in a row that must find the cores taken before dropping to one thread

_state = {"next": 0.0, "blas": None, "base": None, "now": None, "off": None, "busy": 0}


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
    s["busy"] = s.get("busy", 0) + 1 if want < s["base"] else 0
    if want < s["base"] and s["busy"] < BUSY_LOOKS:
        return   # taken at this look only, so far
    if want != s["now"]:
        s["blas"].set(want)
        s["now"] = want


def current():
    """(threads OpenBLAS runs now, threads it started with), for tests and benchmarks."""
    return _state["now"], _state["base"]


def configured(b):
    """The thread count of OpenBLAS `b` as the user configured it: the count adapt() started
    from while adapt() has it lowered (the machine was busy a moment ago), else its count
    now. What a compiled program is built for (codegen/c.py): a program keeps the count it
    was built with, which must not depend on the machine's load at that moment."""
    n = b.get()
    now, base = _state["now"], _state["base"]
    if base is not None and b is _state["blas"] and n == now:
        return base
    return n


def set_adaptive(on):
    """Turn adapt() on or off for this process. Benchmarks turn it off: they time a fixed
    thread count (tools/lib/timing.py). Off gives OpenBLAS back the count adapt() started
    from if adapt() had lowered it; on looks at the machine again at the next matmul."""
    s = _state
    if on:
        s["off"], s["next"] = None, 0.0
    else:
        b = s["blas"]
        if b is not None and s["now"] is not None and s["now"] != s["base"] and b.get() == s["now"]:
            b.set(s["base"])
        s["off"], s["now"] = True, s["base"]
    s["busy"] = 0


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

    def corename(self):
        """The kernel set OpenBLAS picked for this CPU ("Haswell", "SkylakeX", ...), or None:
        benchmarks print it, since a wheel built for many CPUs (DYNAMIC_ARCH) may pick an
        older set than the CPU could run, or be told to by $OPENBLAS_CORETYPE."""
        fn = getattr(self._lib, f"{self._pre}openblas_get_corename{self._suf}", None)
        if fn is None:
            return None
        fn.argtypes, fn.restype = [], ctypes.c_char_p
        return (fn() or b"").decode(errors="replace") or None

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
