import os

# Tests run many tiny matmuls; BLAS threads only add synchronisation there (and thrash
# when the machine is busy). Must be set before NumPy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
import pytest

import tinytensor as tt

from . import parallel

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
        missing = _missing_oracle(call.excinfo.value if call and call.excinfo else None)
        if missing:
            name, line = missing
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), _line_in(line, str(collector.path)),
                               f"Skipped: needs {name}, the reference oracle of these tests "
                               f"(pip install -e '.[test]')")
    return report


def _missing_oracle(error):
    """(oracle's name, its ModuleNotFoundError) when `error` is, or was caused by, an oracle's absence."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name in ORACLES:
            return error.name, error
        error = error.__cause__ or error.__context__
    return None


def _line_in(error, path):
    """The line of `path` that the import failed from (the test module's, or 0)."""
    line, tb = 0, error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


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
