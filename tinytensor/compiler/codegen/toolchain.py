"""The C toolchain every C kernel of tinytensor is built with: the generated kernels
(codegen/c.py), the thread pool and index_add loop (c_pool.py, c_index.py) and the eager C
kernels (kernels/c_rows.py). The compiler itself is found, and the shared objects cached by
source hash, in compiler/cache_disk.py.

Flags: -O3 (vectorization on) -ffp-contract=off (no fused multiply-add: a*b+c rounds
twice, as in NumPy), no -ffast-math (IEEE semantics: no reassociation, signed zeros,
inf and nan kept), -fno-math-errno (sqrt becomes the instruction; errno is the only
thing it changes), -fno-trapping-math (lets both sides of a select be computed; values
are unaffected), no -march=native (a cached object must run on any x86-64/arm64 machine
that shares the cache directory). On x86-64 Linux each kernel is instead cloned for
AVX-512 and AVX2 with `target_clones`, the clone picked at load time by the CPU: the same
IEEE operations on wider vectors (and no FMA, contraction being off), so every clone gives
the same bits. Measured on the dev machine: GELU at 1M elements 1.6 ms with SSE2 only,
1.0 ms with the AVX-512 clone.
"""
import os
import platform

from .. import cache_disk

FLAGS = ["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
         "-fPIC", "-shared"]
HERE = os.path.dirname(__file__)
HEADER = os.path.join(HERE, "tt_math.h")
# by absolute path: a quoted name is looked up next to the source first (cache_disk.py)
INCLUDE = '#include "%s"' % HEADER.replace("\\", "\\\\").replace('"', '\\"')
CLONES = ('__attribute__((target_clones("avx512f", "avx2", "default")))\n'
          if platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux" else "")


def source_file(name):
    """The text of a C file kept beside this module (pairwise.h, c_pool.c, c_index.c)."""
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def load_with_math(source, flags=FLAGS):
    """The loaded shared object of `source`, which includes tt_math.h (INCLUDE): the header's
    text is part of the cache key, so an edited header rebuilds every kernel."""
    return cache_disk.load(source, flags, extra=source_file("tt_math.h"))
