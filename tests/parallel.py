"""How `python -m pytest` spreads the suite over the cores (pytest-xdist), and which tests
must share a worker. Used by tests/conftest.py; the README's "Tests" section says why.

Default: one worker process per core (`-n auto`, xdist's count), with the groups below,
when xdist is installed, the machine has 2 or more cores, and the run is more than one
file. Otherwise, and whenever the user chose (`-n 0`, `-n 4`, `--dist ...`, `-p no:xdist`,
`--pdb`), pytest runs as the user said.

Groups (one worker runs a group's tests, in collection order):
- each test file is its own group, so a module-scoped fixture (an HF model written to disk,
  a compiled program, nvcc's reports) is built once, as in a serial run, and a file's
  tests keep the order they were written in;
- SPLIT files have no expensive shared fixture and many independent tests: their tests go
  to whichever worker is free, so one long file does not leave the other cores idle at
  the end;
- SHARED groups join files that must not run at the same time as each other: the
  two-rank `mpiexec` runs (each starts 2 ranks; two at once on 2 cores would put 5
  processes on 2 cores under 90-s timeouts)."""
import os

import pytest

# set on the controller when the default below chose the workers (and so our groups)
GROUPED = pytest.StashKey[bool]()

# files (relative to the repository root) whose tests are spread one by one
SPLIT = {
    "tests/tinytensor/compiler/test_compile_op_tables.py",
}

# group name -> files (or folders, ending in /) whose tests run on one worker, one at a time
SHARED = {
    "mpiexec": ["tests/tinytensor/distributed/", "tests/nn/test_parallel.py",
                "tests/tools/test_train_distributed.py"],
}


def cores():
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _one_file(args):
    """Whether the command line names tests in a single file (a file, or node ids in it)."""
    files = {a.split("::", 1)[0] for a in args}
    return len(files) == 1 and next(iter(files)).endswith(".py")


def choose_workers(config):
    """Turn on `-n auto` with our groups unless the user chose otherwise (see the module doc)."""
    opt = config.option
    if not hasattr(opt, "numprocesses"):       # xdist not installed, or -p no:xdist
        return
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return                                 # a worker: its controller already decided
    if opt.numprocesses is not None or opt.dist != "no" or getattr(opt, "tx", None):
        return                                 # the user said -n, --dist or --tx
    if config.getoption("usepdb", False) or config.getoption("trace", False) or cores() < 2:
        return
    if _one_file(config.args):
        return                                 # a single file: workers' startup would dominate
    opt.numprocesses = "auto"
    opt.dist = "loadscope"                     # a scope-based schedule; ours replaces xdist's
    config.stash[GROUPED] = True


def group_of(path):
    """The group of the tests in `path` (relative, '/'-separated), or None to spread them."""
    for name, members in SHARED.items():
        if any(path == m or (m.endswith("/") and path.startswith(m)) for m in members):
            return name
    if path in SPLIT:
        return None
    return path


def scheduler(config, log):
    """xdist's scope scheduler with our groups as its scopes (None when the user chose the
    distribution). xdist's own `--dist loadgroup` reads groups from rewritten node ids,
    which pytest 9.2 no longer lets it rewrite (pytest-xdist issue 1386), so the groups are
    computed here, from the node id's file, in the controller."""
    if not config.stash.get(GROUPED, False):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return scope_of(nodeid)

    return Groups(config, log)


def scope_of(nodeid):
    """The unit of work a test belongs to: its group, or the test itself."""
    return group_of(nodeid.split("::", 1)[0]) or nodeid
