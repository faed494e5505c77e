import os

# Tests run many tiny matmuls; BLAS threads only add synchronisation there (and thrash
# when the machine is busy). Must be set before NumPy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
import pytest

import tinytensor as tt

from . import clones, parallel

# generated C kernels compiled for this CPU's clone alone: the two clones no test runs were
# over half of the suite's gcc time (tests/clones.py)
clones.use_machine_clone()

# The reference oracles of the `test` extra. A test module that imports one that is not
# installed is skipped, naming it, instead of failing collection (which stops the run).
ORACLES = ("torch", "transformers")


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    parallel.choose_workers(config)   # before xdist reads -n (a wrapper runs first)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if report.failed and isinstance(collector, pytest.Module):
        call = getattr(report, "call", None)
        _skip_if_oracle_missing(report, call.excinfo.value if call and call.excinfo else None)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.excinfo is not None:   # an import inside a test function
        _skip_if_oracle_missing(report, call.excinfo.value)
    return report


def _skip_if_oracle_missing(report, error):
    missing = _missing_oracle(error)
    if missing:
        name, path, line = missing
        report.outcome = "skipped"
        report.longrepr = (path, line, f"Skipped: needs {name}, the reference oracle of these "
                                       "tests (pip install -e '.[test]')")


TESTS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _missing_oracle(error):
    """(oracle, file, line) when `error` is, or was caused by, an oracle missing from an
    import in a test file. An import of it from the library itself is a bug (the oracles are
    never runtime dependencies), so it stays an error."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name in ORACLES:
            where = _importer(error)
            return (error.name, *where) if where and where[0].startswith(TESTS) else None
        error = error.__cause__ or error.__context__
    return None


def _importer(error):
    """(file, line) of the import statement that raised `error`: its traceback's last frame
    outside Python's import machinery."""
    where, tb = None, error.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<frozen importlib"):
            where = (name, tb.tb_lineno)
        tb = tb.tb_next
    return where


def _devices():
    devs = ["cpu"]
    if tt.cuda_is_available():
        devs.append("cuda")
    return devs


@pytest.hookimpl(tryfirst=True, optionalhook=True)   # optional: xdist may be absent
def pytest_xdist_make_scheduler(config, log):
    return parallel.scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU with CuPy")
    if not tt.cuda_is_available():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """Run a test on cpu, and on cuda under the gpu marker (skipped without a GPU)."""
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    tt.manual_seed(0)
    np.random.seed(0)
    yield
