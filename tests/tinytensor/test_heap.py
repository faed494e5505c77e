"""The eager heap (tinytensor/heap.py): on glibc, an eager training step's arrays are reused
from the heap instead of coming back as fresh pages (page faults) at every step."""
import ctypes
import platform
import resource

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import heap, nn

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="glibc's malloc only")


def _faults_per_step(steps=5):
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    x = tt.tensor(rng.standard_normal((256, 256)).astype(np.float32))

    def step():
        (model(x) ** 2).mean().backward()
        for p in model.parameters():
            p.grad = None
    for _ in range(2):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


@glibc
def test_an_eager_step_reuses_its_memory():
    assert heap.applied == {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 256 << 20}
    tuned = _faults_per_step()
    mallopt = ctypes.CDLL(None).mallopt
    try:   # glibc's starting thresholds: each step's MiB-sized arrays are fresh pages again
        for param, _, _ in heap.SETTINGS:
            mallopt(param, 128 << 10)
        plain = _faults_per_step()
    finally:
        heap.applied.clear()
        heap.tune()
    assert tuned < 50 < 4 * 50 < plain, (tuned, plain)   # ~3 against ~1,300 on the dev machine


def test_the_user_keeps_the_last_word():
    assert heap.tune({heap.ENV: "0"}) is heap.applied
    before = dict(heap.applied)
    heap.applied.clear()
    try:
        got = heap.tune({"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "1"})
        assert got == {}   # glibc's own variables set: neither is touched
    finally:
        heap.applied.update(before)
