"""One rank failing ends the whole job, non-zero, instead of leaving the others waiting."""
import time

import pytest

from .mpi import mpiexec, needs_mpi

pytestmark = needs_mpi


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_one_failing_rank_ends_every_rank(how):
    t0 = time.perf_counter()
    proc = mpiexec(["tests/tinytensor/distributed/worker_fault.py", how], timeout=20)
    took = time.perf_counter() - t0
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "rank 0 passed the all_reduce" not in proc.stdout
    assert took < 15, took
    if how == "raise":
        assert "ValueError: rank 1 fails on purpose" in proc.stderr
        assert "rank 1 raised ValueError; aborting all 2 ranks" in proc.stderr
