"""The suite's own setup (tests/conftest.py, tests/parallel.py): when `python -m pytest`
spreads tests over worker processes, which tests share a worker, and that a test module
whose reference oracle is not installed is skipped, naming it, rather than stopping the
collection of the whole suite."""
import os
import subprocess
import sys
import types

import pytest

from tests import conftest, parallel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(args=("tests",), **option):
    opts = dict(numprocesses=None, dist="no", tx=[], usepdb=False, trace=False)
    opts.update(option)
    config = types.SimpleNamespace(option=types.SimpleNamespace(**opts), args=list(args),
                                   stash=pytest.Stash())
    config.getoption = lambda name, default=None: getattr(config.option, name, default)
    return config


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


def test_a_whole_run_on_two_cores_gets_a_worker_per_core_and_our_groups(two_cores):
    config = _config()
    parallel.choose_workers(config)
    assert config.option.numprocesses == "auto" and config.option.dist == "loadscope"
    assert config.stash[parallel.GROUPED] is True


@pytest.mark.parametrize("args,option", [
    (["tests"], dict(numprocesses=0)),                        # -n 0
    (["tests"], dict(numprocesses=4)),                        # -n 4
    (["tests"], dict(dist="load")),                           # --dist load
    (["tests"], dict(usepdb=True)),                           # --pdb needs one process
    (["tests/nn/test_optim.py"], {}),                         # one file
    (["tests/nn/test_optim.py::test_a", "tests/nn/test_optim.py::test_b"], {}),
], ids=["n0", "n4", "dist", "pdb", "one-file", "node-ids-of-one-file"])
def test_what_the_user_chose_is_kept(two_cores, args, option):
    config = _config(args, **option)
    before = vars(config.option).copy()
    parallel.choose_workers(config)
    assert vars(config.option) == before and parallel.GROUPED not in config.stash


def test_one_core_a_worker_or_no_xdist_runs_in_this_process(monkeypatch, two_cores):
    config = _config()
    del config.option.numprocesses                            # -p no:xdist, or not installed
    parallel.choose_workers(config)
    assert not hasattr(config.option, "numprocesses")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")          # a worker never starts workers
    parallel.choose_workers(config := _config())
    assert config.option.numprocesses is None
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    parallel.choose_workers(config := _config())
    assert config.option.numprocesses is None


def test_groups_a_file_per_worker_the_mpiexec_tests_together_and_split_files_spread():
    assert parallel.group_of("tests/nn/test_optim.py") == "tests/nn/test_optim.py"
    assert parallel.group_of("tests/nn/test_parallel.py") == "mpiexec"
    assert parallel.group_of("tests/tinytensor/distributed/test_faults.py") == "mpiexec"
    assert parallel.group_of("tests/tools/test_train_distributed.py") == "mpiexec"
    for path in parallel.SPLIT:
        assert parallel.group_of(path) is None
    for path in [*parallel.SPLIT] + [m for ms in parallel.SHARED.values() for m in ms]:
        assert os.path.exists(os.path.join(ROOT, path)), f"{path} was moved: update tests/parallel.py"


def test_the_scheduler_uses_the_groups_only_when_our_default_chose_the_workers():
    pytest.importorskip("xdist")
    config = _config()
    config.getvalue = lambda name: {"tx": ["popen"] * 2, "numprocesses": 2}.get(name)
    assert parallel.scheduler(config, None) is None           # the user's --dist: xdist's own
    config.stash[parallel.GROUPED] = True
    sched = parallel.scheduler(config, None)
    one = next(iter(parallel.SPLIT))
    assert sched._split_scope("tests/nn/test_optim.py::test_sgd[1]") == "tests/nn/test_optim.py"
    assert sched._split_scope("tests/nn/test_parallel.py::test_ddp") == "mpiexec"
    assert sched._split_scope(f"{one}::test_x[a]") == f"{one}::test_x[a]"


def test_a_missing_oracle_imported_by_a_test_is_named_one_imported_by_the_library_is_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)           # as if torch were not installed
    try:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            line = sys.exc_info()[2].tb_lineno
            raise RuntimeError("while importing the test module") from e
    except RuntimeError as wrapped:
        assert conftest._missing_oracle(wrapped) == ("torch", os.path.abspath(__file__), line)
    try:                                                      # the same import, in the library
        exec(compile("import torch", os.path.join(ROOT, "tinytensor", "anywhere.py"), "exec"))
    except ImportError as e:
        assert conftest._missing_oracle(e) is None
    monkeypatch.setitem(sys.modules, "scipy", None)
    try:
        import scipy  # noqa: F401
    except ImportError as e:
        assert conftest._missing_oracle(e) is None            # not an oracle: an error
    assert conftest._missing_oracle(ValueError("torch")) is None


@pytest.mark.slow   # a pytest of its own: ~5 s of CPU, mostly imports
def test_without_torch_its_test_modules_are_skipped_naming_it(tmp_path):
    # torch not installed, the way Python then answers its import
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-p", "no:xdist",
                           "--co", "tests/tinytensor/test_tensor.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out   # no tests collected: the one module is skipped, not an error (2)
    assert "ERROR" not in out and "errors" not in out, out
    assert "tests/tinytensor/test_tensor.py:4: needs torch, the reference oracle" in out, out
