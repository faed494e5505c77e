"""Ranks that leave early, call different collectives or stall: the job ends, never hangs."""
import time

import pytest

from .mpi import mpiexec, needs_mpi

pytestmark = needs_mpi
WORKER = "tests/tinytensor/distributed/worker_exit.py"


def run(*args, timeout=90):
    """(process, seconds from the last rank's init to the end of the job)."""
    proc = mpiexec([WORKER, *args], timeout=timeout)
    ready = [float(l.split()[2]) for l in proc.stdout.splitlines() if l.startswith("READY ")]
    assert len(ready) == 2, proc.stdout + proc.stderr
    return proc, time.time() - max(ready)


@pytest.mark.parametrize("how", ["exit3", "return", "ddp_exit3"])
def test_a_rank_exiting_with_the_group_open_aborts_the_waiting_ones(how):
    proc, took = run(how)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "passed" not in proc.stdout, out
    assert "exiting without destroy_process_group()" in out, out
    assert took < 15, took


def test_barrier_against_all_reduce_is_an_error_on_both_ranks():
    proc, took = run("barrier")
    assert proc.returncode != 0
    assert "the ranks disagree (rank 0: all_reduce(shape (3,) float32, sum); rank 1: barrier())" \
        in proc.stderr, proc.stderr
    assert took < 15, took


def test_timeout_names_the_collective_and_the_missing_rank():
    proc, took = run("late", "2")
    assert proc.returncode != 0
    assert "GroupTimeout: all_reduce on rank 0: timed out after 2 s; rank(s) [1] did not arrive" \
        in proc.stderr, proc.stderr
    assert took < 15, took


def test_every_rank_returning_without_destroy_is_a_clean_exit():
    proc, _ = run("all_return")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 done" in proc.stdout and "rank 1 done" in proc.stdout


def test_a_non_zero_status_after_destroy_still_fails_the_job():
    proc, took = run("destroyed_exit3")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "rank 0 done" in proc.stdout and "rank 1 done" in proc.stdout
    assert took < 15, took


@pytest.mark.parametrize("bad", [0, -1, "30", True, float("nan")])
def test_a_timeout_that_is_not_a_positive_duration_is_refused(bad):
    import tinytensor.distributed as dist
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        dist.init_process_group("mpi", timeout=bad)


def test_a_timedelta_or_none_is_a_timeout():
    import datetime

    from tinytensor.distributed.process_group import _seconds
    assert _seconds(datetime.timedelta(minutes=2)) == 120.0 and _seconds(None) is None
