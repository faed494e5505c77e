"""Per-test CPU seconds (this process + waited-for children: gcc, nvcc, python, mpiexec).

Wall time lies on a loaded machine; CPU time does not (much). Opt-in plugin:
    python -m pytest -p tests.cpu_durations -p no:xdist <paths>
prints the 30 costliest tests and every file's total at the end, and with
TT_CPU_DURATIONS=<file> also appends "cpu_s<TAB>nodeid" lines there as each test ends (so an
interrupted run still leaves its numbers).
"""
import os
import resource
from collections import defaultdict

import pytest

_cost = {}


def _cpu():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # setup + call + teardown, so module fixtures are charged to the test that builds them
    start = _cpu()
    yield
    _cost[item.nodeid] = _cpu() - start
    out = os.environ.get("TT_CPU_DURATIONS")
    if out:
        with open(out, "a") as f:
            f.write(f"{_cost[item.nodeid]:.3f}\t{item.nodeid}\n")


def pytest_terminal_summary(terminalreporter):
    if not _cost:
        return
    write = terminalreporter.write_line
    per_file = defaultdict(float)
    for nodeid, s in _cost.items():
        per_file[nodeid.split("::")[0]] += s
    write(f"== CPU seconds: {sum(_cost.values()):.1f} in {len(_cost)} tests ==")
    for nodeid, s in sorted(_cost.items(), key=lambda kv: -kv[1])[:30]:
        write(f"{s:8.2f}  {nodeid}")
    write("== CPU seconds per file ==")
    for path, s in sorted(per_file.items(), key=lambda kv: -kv[1]):
        write(f"{s:8.2f}  {path}")
