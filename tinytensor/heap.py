"""The C heap of an eager step: glibc's malloc kept from giving big arrays back to the
kernel after every op.

Why. An eager step allocates fresh arrays for every op's result and frees them a few ops
later. glibc serves an allocation of 128 KiB or more (its starting mmap threshold, which
it raises only for sizes it has seen freed) with mmap and trims the top of its heap once
128 KiB of it is free, so such arrays come back as fresh pages: a page fault per 4 KiB
at first touch, and munmap's TLB flush on every core the process runs threads on. Measured
on the 2-core dev machine, nanoGPT's eager iteration (tools/bench.py train --model
nanogpt, 2 threads) took 3,686 page faults per iteration; with the settings below 6, and
its attention backward ran in 1.05 ms instead of 2.0 ms.

What. At import, on glibc only, `tune()` sets M_MMAP_THRESHOLD to 32 MiB (glibc's largest:
smaller arrays come from the heap and are reused) and M_TRIM_THRESHOLD to 256 MiB (freed
memory up to that much is kept for the next step instead of being returned). The cost: a
process keeps up to that much freed memory; arrays of 32 MiB and more are mmapped as
before. A setting the user made through glibc's own environment variables
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) is left alone; TINYTENSOR_HEAP_TUNE=0 (also
false/off/no) leaves glibc's defaults.
"""
import ctypes
import os
import platform

ENV = "TINYTENSOR_HEAP_TUNE"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3    # glibc's malloc.h
SETTINGS = ((M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", 32 << 20),
            (M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", 256 << 20))

applied = {}   # glibc's environment variable name -> the value set (tests read it)


def tune(environ=os.environ):
    """Set the heap's thresholds (module docstring); returns `applied`."""
    if (environ.get(ENV) or "1").strip().lower() in ("0", "false", "off", "no"):
        return applied
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return applied
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return applied
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for param, var, value in SETTINGS:
        if var not in environ and mallopt(param, value) == 1:
            applied[var] = value
    return applied
