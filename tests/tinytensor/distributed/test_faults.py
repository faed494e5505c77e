"""One rank failing ends the whole job, non-zero, instead of leaving the others waiting."""
import time

import pytest

from .mpi import mpiexec, needs_mpi

pytestmark = needs_mpi


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_one_failing_rank_ends_every_rank(how):
    proc = mpiexec(["tests/tinytensor/distributed/worker_fault.py", how], timeout=90)
    ready = [float(l.split()[2]) for l in proc.stdout.splitlines() if l.startswith("READY ")]
    assert len(ready) == 2, proc.stdout + proc.stderr
    took = time.time() - max(ready)  # from the moment both ranks are up
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "rank 0 passed the all_reduce" not in proc.stdout
    assert took < 15, took
    if how == "raise":
        assert "ValueError: rank 1 fails on purpose" in proc.stderr
        assert "rank 1 raised ValueError; aborting all 2 ranks" in proc.stderr
