"""The eager heap (tinytensor/heap.py): on glibc, an eager training step's arrays are reused
from the heap instead of coming back as fresh pages (page faults) at every step."""
import os
import platform
import subprocess
import sys

import pytest

from tinytensor import heap

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="glibc's malloc only")


# run in a fresh process: a long-lived one (a test worker) has enough freed heap already
# that even glibc's defaults fault little
_SCRIPT = """
import resource
import numpy as np
import tinytensor as tt
from tinytensor import heap, nn

assert heap.applied == {}   # TINYTENSOR_HEAP_TUNE=0
rng = np.random.default_rng(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
x = tt.tensor(rng.standard_normal((256, 256)).astype(np.float32))

def step():
    (model(x) ** 2).mean().backward()
    for p in model.parameters():
        p.grad = None

def faults_per_step(steps=5):
    for _ in range(2):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps

plain = faults_per_step()
heap.tune({})
tuned = faults_per_step()
print(plain, tuned)
"""


@glibc
def test_tinytensor_tunes_the_heap_at_import():
    assert heap.applied == {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 256 << 20}


@glibc
@pytest.mark.slow   # ~2 s: a fresh process importing tinytensor
def test_an_eager_step_reuses_its_memory():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env[heap.ENV] = "0"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    plain, tuned = map(float, out.stdout.split())
    assert tuned < 50 < 4 * 50 < plain, (plain, tuned)   # ~1,260 against ~3 on the dev machine


def test_the_user_keeps_the_last_word():
    assert heap.tune({heap.ENV: "0"}) is heap.applied
    before = dict(heap.applied)
    heap.applied.clear()
    try:
        got = heap.tune({"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "1"})
        assert got == {}   # glibc's own variables set: neither is touched
    finally:
        heap.applied.update(before)
