"""Compile time grows linearly with a program: a long elementwise chain is cut into
kernels of at most fuse.MAX_OPS ops (the C compiler's time grows faster than a function's
size), and the fusion's checks cost at most a kernel's size per op. Counted (kernels, and
the function calls the fusion makes), never timed."""
import sys

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler.passes import fuse

from ._programs import bits, eager, fused_instrs, interpreted, program_of


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def chain(n):
    """n elementwise ops, each reading the last one's result (and a sibling read of x
    every 100 ops, so that sibling merging has work)."""
    def f(x):
        y = x
        for i in range(n // 2):
            y = y * 1.0001 + 0.5 if i % 2 else (y - 0.25) * 0.999
            if i % 50 == 49:
                y = y + x
        return y
    return f


def test_a_long_chain_is_cut_into_kernels_of_at_most_max_ops():
    x = np.linspace(-2, 2, 37).astype(np.float32)
    program, inputs = program_of(chain(2000), x)
    fused = fuse.run(program).verify()
    sizes = [len(k.attrs["body"].instrs) for k in fused_instrs(fused)]
    assert max(sizes) <= fuse.MAX_OPS
    assert sum(sizes) >= len(program.instrs) - 2 and len(sizes) <= 2 * len(program.instrs) // fuse.MAX_OPS + 2
    assert np.array_equal(bits(interpreted(fused, inputs)[0]), bits(interpreted(program, inputs)[0]))


def _fuse_calls(program):
    """How many Python and C function calls fusing `program` makes: a count of its work
    that, unlike a time, does not depend on the machine or on what else runs on it."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
    sys.setprofile(count)
    try:
        fuse.run(program)
    finally:
        sys.setprofile(None)
    return calls


def test_fusing_a_chain_four_times_longer_does_about_four_times_the_work():
    # quadratic fusion (each op's step walking its whole group) did 16x the work (8 s at
    # 1,600 ops); linear is 4x, plus the kernels' fixed costs
    x = np.ones(8, np.float32)
    short, _ = program_of(chain(400), x)
    long, _ = program_of(chain(1600), x)
    ratio = _fuse_calls(long) / _fuse_calls(short)
    assert ratio < 6, ratio


@pytest.mark.slow
def test_a_20000_op_chain_compiles_and_replays_eagers_bits():
    # a chain without the reads of x: 178 s of CPU and 709 MB of gcc before kernels were
    # capped, 6 s after (AMD EPYC, 2 cores); with them ~25 s, mostly gcc (80 kernels,
    # each cloned for AVX-512, AVX2 and the baseline;
    # 20.4 -> 8.0 CPU-s with the suite's one clone, tests/clones.py)
    f = chain(20000)
    x = np.linspace(-2, 2, 1000).astype(np.float32)
    g = tt.compile(f, backend="c")
    g(tt.tensor(x))
    got = g(tt.tensor(x))
    assert np.array_equal(bits(got.data), bits(eager(f, x)[0]))
