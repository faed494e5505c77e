"""Eager matmuls drop OpenBLAS to one thread while other processes hold the cores, and give
the threads back when the cores are free; a count set by someone else is left alone."""
import pytest

import tinytensor as tt
from tinytensor import blas_threads


class FakeBlas:
    def __init__(self, n):
        self.n, self.sets = n, []

    def get(self):
        return self.n

    def set(self, n):
        self.n = n
        self.sets.append(n)


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine whose OpenBLAS starts at 2 threads; returns (blas, load) where
    load["others"] is the runnable tasks of other processes."""
    blas, load = FakeBlas(2), {"others": 0}
    monkeypatch.setattr(blas_threads, "_state", {"next": 0.0, "blas": blas, "base": 2, "now": 2,
                                                 "off": False})
    monkeypatch.setattr(blas_threads, "runnable_elsewhere", lambda: load["others"])
    monkeypatch.setattr(blas_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(blas_threads, "INTERVAL", 0.0)
    return blas, load


def test_the_policy():
    assert blas_threads.threads_for(2, 0, 2) == 2   # idle: every core
    assert blas_threads.threads_for(2, 1, 2) == 1   # a busy loop on one of 2 cores
    assert blas_threads.threads_for(4, 3, 8) == 4
    assert blas_threads.threads_for(4, 5, 8) == 1


def test_a_matmul_under_load_runs_on_one_thread_and_gets_both_back_after(machine):
    blas, load = machine
    a = tt.randn(8, 8)
    a @ a
    assert blas.n == 2 and blas.sets == []
    load["others"] = 1
    for _ in range(blas_threads.BUSY_LOOKS):
        a @ a
    assert blas.n == 1 and blas_threads.current() == (1, 2)
    load["others"] = 0
    a @ a
    assert blas.n == 2 and blas.sets == [1, 2]


def test_a_count_someone_else_set_is_theirs(machine):
    blas, load = machine
    blas.n = 1  # a compiled program holds OpenBLAS at one thread, or the user set it
    load["others"] = 0
    tt.randn(4, 4) @ tt.randn(4, 4)
    assert blas.n == 1 and blas.sets == []


def test_runnable_elsewhere_reads_this_machine():
    n = blas_threads.runnable_elsewhere()
    assert n is None or n >= 0


def test_one_look_at_a_busy_machine_is_not_enough(machine):
    """A process caught running at one look (a shell command) keeps both threads; the
    cores taken at BUSY_LOOKS looks in a row drop them."""
    blas, load = machine
    a = tt.randn(8, 8)
    for others in (1, 0, 1, 0):
        load["others"] = others
        a @ a
    assert blas.sets == [] and blas.n == 2
    load["others"] = 1
    a @ a
    a @ a
    assert blas.sets == [1]


def test_a_compiled_program_is_built_for_the_configured_count(machine, monkeypatch):
    """While eager matmuls have lowered OpenBLAS to one thread, a program built now still
    gets the user's count (it keeps it for life); eager kernels follow the lowered one."""
    from tinytensor.compiler.codegen import threads
    blas, load = machine
    monkeypatch.setattr(blas_threads, "_BLAS", blas)
    monkeypatch.setattr(blas_threads, "_SEARCHED", True)
    load["others"] = 1
    a = tt.randn(8, 8)
    for _ in range(blas_threads.BUSY_LOOKS):
        a @ a
    assert blas.n == 1
    assert threads.default_threads() == 1 and threads.program_threads() == 2
    blas.set(3)   # the user's own setting wins
    assert threads.program_threads() == 3


def test_adapting_turned_off_gives_the_threads_back_and_stays(machine):
    blas, load = machine
    load["others"] = 1
    a = tt.randn(8, 8)
    for _ in range(blas_threads.BUSY_LOOKS):
        a @ a
    assert blas.n == 1
    blas_threads.set_adaptive(False)
    assert blas.n == 2
    for _ in range(3):
        a @ a
    assert blas.n == 2 and blas.sets == [1, 2]
