import os

# Tests run many tiny matmuls; BLAS threads only add synchronisation there (and thrash
# when the machine is busy). Must be set before NumPy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
import pytest

import tinytensor as tt


def _devices():
    devs = ["cpu"]
    if tt.cuda_is_available():
        devs.append("cuda")
    return devs


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
