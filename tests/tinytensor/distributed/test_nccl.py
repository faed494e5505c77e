"""The NCCL backend. Without a GPU: a fake `cupy` (with `cupy.cuda.nccl`) and a fake MPI
record what the backend asks of them: device choice, the unique id's journey, the enums,
counts and streams handed to NCCL, and the errors. With 2 GPUs (gpu-marked): the
collectives and DDP for real under `mpiexec -n 2`."""
import sys
import types

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor.distributed import mpi as mpi_mod
from tinytensor.distributed import nccl as nccl_mod

from .mpi import mpiexec, needs_mpi, results

UID = tuple(range(128))


# ---------------------------------------------------------------------- the fakes
class FakeArray:
    """A CUDA array as the backend sees it: memory pointer, size, dtype, device, flags."""

    def __init__(self, a, device=0):
        self.a = a
        self.data = types.SimpleNamespace(ptr=a.ctypes.data)
        self.size, self.dtype, self.shape, self.strides = a.size, a.dtype, a.shape, a.strides
        self.device = types.SimpleNamespace(id=device)
        self.flags = types.SimpleNamespace(c_contiguous=a.flags.c_contiguous)


def fake_cupy(log, gpus=2):
    class Event:
        def __init__(self, stream):
            self.stream, self.done = stream, False

    class Stream:
        def __init__(self, name, ptr):
            self.name, self.ptr = name, ptr

        def record(self):
            ev = Event(self.name)
            log.append(("record", self.name, ev))
            return ev

        def wait_event(self, ev):
            log.append(("wait_event", self.name, ev))

    current = Stream("current", 1111)

    class Device:
        def __init__(self, i):
            self.i = i

        def use(self):
            log.append(("use", self.i))

        def synchronize(self):
            log.append(("synchronize", self.i))

    class Communicator:
        def __init__(self, n, uid, rank):
            log.append(("NcclCommunicator", n, uid, rank))

        def __getattr__(self, name):  # allReduce, bcast, allGather, reduceScatter, abort, destroy
            return lambda *args: log.append((name,) + args)

    nccl = types.ModuleType("cupy.cuda.nccl")
    for i, n in enumerate(["INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16",
                           "FLOAT32", "FLOAT64", "SUM", "MAX"]):
        setattr(nccl, "NCCL_" + n, 100 + i)
    nccl.get_unique_id = lambda: log.append(("get_unique_id",)) or UID
    nccl.NcclCommunicator = Communicator
    cuda = types.ModuleType("cupy.cuda")
    cuda.nccl, cuda.Device = nccl, Device
    cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: gpus)
    cuda.Stream = lambda non_blocking=False: Stream("side", 2222)
    cuda.get_current_stream = lambda: current
    cupy = types.ModuleType("cupy")
    cupy.cuda, cupy.ndarray = cuda, FakeArray
    return cupy, cuda, nccl


class FakeMPI:
    """mpi.MPIBackend for `rank` of 2, the other rank answering with `peer`'s values."""

    def __init__(self, log, rank, peer_local_rank, peer_gpus):
        self.log, self.rank, self.world_size = log, rank, 2
        self.peer = (peer_local_rank, peer_gpus)
        self.comm = types.SimpleNamespace(bcast=self.bcast)

    def bcast(self, obj, root):
        self.log.append(("mpi.bcast", obj, root))
        return UID  # rank 0's id, whoever asks

    def allgather_object(self, obj, what="collective"):
        self.log.append(("mpi.agree", what))
        # the peer agrees with every collective; at init it reports its own GPUs
        peer = self.peer if what.startswith("init_process_group") else obj
        return [obj, peer] if self.rank == 0 else [peer, obj]

    def barrier(self):
        self.log.append(("mpi.barrier",))

    def abort(self, code):
        self.log.append(("mpi.abort", code))

    def close(self):
        self.log.append(("mpi.close",))


@pytest.fixture
def fake(monkeypatch):
    """fake(rank, local_rank, gpus, peer_local_rank, peer_gpus) -> the call log."""
    def make(rank=0, local=None, gpus=2, peer_local=None, peer_gpus=2):
        local = rank if local is None else local
        log = []
        cupy, cuda, nccl = fake_cupy(log, gpus)
        for name, m in (("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.nccl", nccl)):
            monkeypatch.setitem(sys.modules, name, m)
        peer = (1 - rank) if peer_local is None else peer_local
        monkeypatch.setattr(mpi_mod, "MPIBackend", lambda timeout=None: FakeMPI(log, rank, peer, peer_gpus))
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
        monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
        monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", str(local))
        return log
    yield make
    if dist.is_initialized():
        dist.destroy_process_group()


def calls(log, name):
    return [c for c in log if c[0] == name]


# ---------------------------------------------------------------------- setting up
@pytest.mark.parametrize("rank", [0, 1])
def test_init_uses_gpu_of_local_rank_and_rank_0s_unique_id(fake, rank):
    log = fake(rank=rank)
    g = dist.init_process_group("nccl")
    assert dist.get_backend() == "nccl" and (dist.get_rank(), dist.get_world_size()) == (rank, 2)
    assert str(g.device) == f"cuda:{rank}" and calls(log, "use") == [("use", rank)]
    assert len(calls(log, "get_unique_id")) == (1 if rank == 0 else 0)
    assert calls(log, "mpi.bcast") == [("mpi.bcast", UID if rank == 0 else None, 0)]
    assert calls(log, "NcclCommunicator") == [("NcclCommunicator", 2, UID, rank)]
    # the device is chosen before NCCL touches a GPU
    assert log.index(("use", rank)) < log.index(calls(log, "NcclCommunicator")[0])


def test_local_rank_comes_from_the_launcher_or_mpi():
    assert nccl_mod.local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == 1
    assert nccl_mod.local_rank({"MPI_LOCALRANKID": "3"}) == 3
    assert nccl_mod.local_rank({"SLURM_LOCALID": "2"}) == 2
    assert nccl_mod.local_rank({}, fallback=lambda: 5) == 5


@pytest.mark.parametrize("rank", [0, 1])
def test_more_ranks_than_gpus_raises_on_every_rank(fake, rank):
    # one GPU per node, two ranks on it: rank 1 has none, and rank 0 must not wait for it
    log = fake(rank=rank, local=rank, gpus=1, peer_local=1 - rank, peer_gpus=1)
    with pytest.raises(RuntimeError, match=r"more ranks than GPUs \(rank 1 is rank 1 on its node, "
                                           r"which has 1 GPU\(s\)\).*one GPU per rank"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()
    assert not calls(log, "NcclCommunicator") and not calls(log, "use")
    assert calls(log, "mpi.close") == [("mpi.close",)]


def test_missing_cupy_names_the_install_command(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "1")
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails as if not installed
    with pytest.raises(RuntimeError, match=r"(?s)CuPy with NCCL is not installed.*"
                                           r"pip install cupy-cuda12x nvidia-nccl-cu12 mpi4py"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_cupy_without_the_nccl_library_names_the_install_command(fake):
    fake()
    sys.modules["cupy.cuda.nccl"].available = False  # monkeypatched module: undone by the fixture
    with pytest.raises(RuntimeError, match=r"(?s)cannot load the NCCL library.*install_library"):
        dist.init_process_group("nccl")


# ---------------------------------------------------------------------- enums and counts
def test_dtypes_map_to_nccl_types():
    _, _, nccl = fake_cupy([])
    for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                 "float64"):
        assert nccl_mod.nccl_dtype(nccl, np.dtype(name), reduce=True) == (
            getattr(nccl, "NCCL_" + name.upper()), 1)
    # no arithmetic: moved as bytes
    assert nccl_mod.nccl_dtype(nccl, np.dtype("int16"), reduce=False) == (nccl.NCCL_UINT8, 2)
    assert nccl_mod.nccl_dtype(nccl, np.dtype("bool"), reduce=False) == (nccl.NCCL_UINT8, 1)
    with pytest.raises(TypeError, match=r"cannot reduce int16 tensors; NCCL reduces int8, .*float64"):
        nccl_mod.nccl_dtype(nccl, np.dtype("int16"), reduce=True)
    assert [nccl_mod.nccl_op(nccl, op) for op in ("sum", "mean", "max")] == [
        nccl.NCCL_SUM, nccl.NCCL_SUM, nccl.NCCL_MAX]


def test_collectives_pass_pointers_counts_enums_and_the_current_stream(fake):
    log = fake(rank=1)
    g = dist.init_process_group("nccl")
    nccl = sys.modules["cupy.cuda.nccl"]
    a = FakeArray(np.zeros((3, 4), np.float32), device=1)
    g.allreduce(a, "mean")
    g.allreduce(a, "max")
    b = FakeArray(np.zeros(5, np.int16), device=1)
    g.broadcast(b, 0)
    recv = FakeArray(np.zeros((2, 3, 4), np.float64), device=1)
    send = FakeArray(np.zeros((3, 4), np.float64), device=1)
    g.all_gather(send, recv)
    g.reduce_scatter(recv, send, "sum")
    p = a.data.ptr
    assert calls(log, "allReduce") == [("allReduce", p, p, 12, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 1111),
                                       ("allReduce", p, p, 12, nccl.NCCL_FLOAT32, nccl.NCCL_MAX, 1111)]
    assert calls(log, "bcast") == [("bcast", b.data.ptr, 10, nccl.NCCL_UINT8, 0, 1111)]
    assert calls(log, "allGather") == [("allGather", send.data.ptr, recv.data.ptr, 12,
                                        nccl.NCCL_FLOAT64, 1111)]
    assert calls(log, "reduceScatter") == [("reduceScatter", recv.data.ptr, send.data.ptr, 12,
                                            nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 1111)]


def test_iallreduce_runs_on_a_side_stream_behind_the_current_one(fake):
    log = fake(rank=0)
    g = dist.init_process_group("nccl")
    a = FakeArray(np.zeros(6, np.float32), device=0)
    del log[:]
    req = g.iallreduce(a, "sum")
    (_, _, ready), wait_side, reduce, (_, _, done) = log
    assert ready.stream == "current" and wait_side == ("wait_event", "side", ready)
    assert reduce[0] == "allReduce" and reduce[-1] == 2222 and done.stream == "side"
    assert req.test() is False
    done.done = True
    assert req.test() is True
    req.wait()
    assert log[-1] == ("wait_event", "current", done)


def test_cpu_arrays_and_another_ranks_gpu_are_refused(fake):
    fake(rank=1)
    g = dist.init_process_group("nccl")
    with pytest.raises(RuntimeError, match=r"works on CUDA arrays, got numpy.ndarray \(a CPU "
                                           r"tensor\?\); move it with .to\('cuda:1'\)"):
        g.allreduce(np.zeros(3, np.float32), "sum")
    with pytest.raises(RuntimeError, match=r"all_gather: rank 1 communicates on cuda:1, but the "
                                           r"tensor is on cuda:0"):
        g.all_gather(FakeArray(np.zeros(2), 0), FakeArray(np.zeros((2, 2)), 1))
    with pytest.raises(RuntimeError, match=r"needs a contiguous array, got shape \(3, 2\)"):
        g.broadcast(FakeArray(np.zeros((2, 3)).T, 1), 0)


def test_public_collectives_refuse_cpu_tensors(fake):
    log = fake(rank=0)
    dist.init_process_group("nccl")
    with pytest.raises(RuntimeError, match=r"all_reduce: the 'nccl' backend works on cuda tensors, "
                                           r"got a tensor on cpu; move it with .cuda\(\)"):
        dist.all_reduce(tt.ones(2))
    assert not calls(log, "allReduce")


def test_barrier_abort_and_destroy(fake):
    log = fake(rank=1)
    g = dist.init_process_group("nccl")
    del log[:]
    dist.barrier()
    # the ranks agree it is a barrier (not another collective), then the GPU's queue first
    assert log == [("mpi.agree", "barrier"), ("synchronize", 1), ("mpi.barrier",)]
    del log[:]
    g.abort(3)
    assert log == [("abort",), ("mpi.abort", 3)]
    del log[:]
    dist.destroy_process_group()
    assert log == [("mpi.agree", "destroy_process_group"), ("synchronize", 1), ("mpi.barrier",),
                   ("destroy",), ("mpi.close",)]


# ---------------------------------------------------------------------- on 2 GPUs
def _gpus():
    return tt.cuda_is_available() and tt.cupy_module().cuda.runtime.getDeviceCount()


needs_2_gpus = pytest.mark.skipif(not _gpus() or _gpus() < 2, reason="needs 2 CUDA GPUs")


@pytest.fixture(scope="module")
def gpu_ranks():
    return results(mpiexec(["tests/tinytensor/distributed/worker_nccl.py"], timeout=120))


@pytest.mark.gpu
@needs_mpi
@needs_2_gpus
@pytest.mark.parametrize("key", ["all_reduce_sum", "all_reduce_mean", "all_reduce_max",
                                 "broadcast_src1", "all_gather", "reduce_scatter_sum",
                                 "reduce_scatter_mean", "ddp_grads", "ddp_params_agree"])
def test_nccl_on_two_gpus_matches_numpy(gpu_ranks, key):
    for r in (0, 1):
        assert gpu_ranks[r]["device"] == f"cuda:{r}"
        assert gpu_ranks[r][key] < 1e-5, (r, key, gpu_ranks[r][key])


@pytest.mark.gpu
@needs_mpi
@needs_2_gpus
def test_nccl_on_two_gpus_refuses_cpu_tensors(gpu_ranks):
    assert "'nccl' backend works on cuda tensors, got a tensor on cpu" in gpu_ranks[0]["cpu_tensor"]
