"""One kernel clone instead of three while testing.

Every generated C kernel carries `target_clones("avx512f", "avx2", "default")`
(compiler/codegen/toolchain.py `CLONES`, which the C kernels and the eager kernels read): gcc compiles
the whole kernel three times and the loader runs one of them, the best this CPU has. Tests
only ever run that one, and compiling the other two was over half of the suite's gcc time
(the GPT training program of test_dynamic: 16.0 CPU-s with the clones, 7.0 with one).

So the suite compiles the clone this machine would pick, alone, with `target(...)`: the
same code the loader would have chosen here, executed by every test. What the suite then
no longer compiles, the unused clones, is covered by one test that builds a program with
the real `target_clones` and checks its bits against the one-clone build
(tests/tinytensor/compiler/test_codegen_c.py). TT_TEST_ALL_CLONES=1 keeps the clones
everywhere (a full check of the attribute, at the old cost)."""
import os
import platform

from tinytensor.compiler.codegen import toolchain

REAL = toolchain.CLONES


def machine_clone():
    """The attribute of the one clone gcc's resolver would pick on this CPU (x86-64 Linux:
    avx512f, else avx2, else the baseline, which needs no attribute); REAL elsewhere."""
    if not REAL or platform.system() != "Linux":
        return REAL
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return REAL
    for isa in ("avx512f", "avx2"):   # the order of the resolver's priority
        if isa in flags:
            return f'__attribute__((target("{isa}")))\n'
    return ""


def use_machine_clone():
    """Switch the suite to the one clone (unless TT_TEST_ALL_CLONES=1); returns what is used."""
    if os.environ.get("TT_TEST_ALL_CLONES") != "1":
        toolchain.CLONES = machine_clone()
    return toolchain.CLONES
