"""Compile time grows linearly with a program: a long elementwise chain is cut into
kernels of at most fuse.MAX_OPS ops (the C compiler's time grows faster than a function's
size), and the fusion's checks cost at most a kernel's size per op. Counted, or timed
against a smaller chain in the same process, never against a wall-clock bound."""
import time

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


def _fuse_seconds(program, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fuse.run(program)
        best = min(best, time.perf_counter() - t)
    return best


def test_fusing_a_chain_four_times_longer_takes_about_four_times_longer():
    # quadratic fusion (each op's step walking its whole group) took 16x: 8 s at 1,600
    # ops; the bound of 10x leaves room for a busy machine
    x = np.ones(8, np.float32)
    short, _ = program_of(chain(400), x)
    long, _ = program_of(chain(1600), x)
    ratio = _fuse_seconds(long) / _fuse_seconds(short, repeat=5)   # the short one is the noisier
    assert ratio < 10, ratio


@pytest.mark.slow
def test_a_20000_op_chain_compiles_and_replays_eagers_bits():
    # a chain without the reads of x: 178 s of CPU and 709 MB of gcc before kernels were
    # capped, 6 s after (AMD EPYC, 2 cores); with them ~25 s, mostly gcc (80 kernels,
    # each cloned for AVX-512, AVX2 and the baseline)
    f = chain(20000)
    x = np.linspace(-2, 2, 1000).astype(np.float32)
    g = tt.compile(f, backend="c")
    g(tt.tensor(x))
    got = g(tt.tensor(x))
    assert np.array_equal(bits(got.data), bits(eager(f, x)[0]))
