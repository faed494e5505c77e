"""The MPI backend: mpi4py on NumPy arrays, i.e. CPU tensors."""
from .process_group import INSTALL

_OPS = None


def _import_mpi():
    try:
        # mpi4py is optional: only backend='mpi' needs it
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"init_process_group('mpi'): mpi4py is not installed ({e}); install "
                           f"it and an MPI library with\n    {INSTALL}") from None
    return MPI


class MPIBackend:
    name = "mpi"
    device_type = "cpu"

    def __init__(self):
        global _OPS
        MPI = self.MPI = _import_mpi()
        _OPS = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX}
        # a duplicate, so tinytensor's messages never mix with the user's own MPI traffic
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()

    def allgather_object(self, obj):
        return self.comm.allgather(obj)

    def allreduce(self, a, op):
        self.comm.Allreduce(self.MPI.IN_PLACE, a, op=_OPS[op])

    def iallreduce(self, a, op):
        """Start an all-reduce of `a` in place; returns a request with test() and wait()."""
        return _Request(self.comm.Iallreduce(self.MPI.IN_PLACE, a, op=_OPS[op]))

    def broadcast(self, a, src):
        self.comm.Bcast(a, root=src)

    def all_gather(self, send, recv):
        self.comm.Allgather(send, recv)

    def reduce_scatter(self, send, recv, op):
        self.comm.Reduce_scatter_block(send, recv, op=_OPS[op])

    def barrier(self):
        self.comm.Barrier()

    def abort(self, code):
        self.MPI.COMM_WORLD.Abort(code)

    def close(self):
        self.comm.Free()


class _Request:
    __slots__ = ("req",)

    def __init__(self, req):
        self.req = req

    def test(self):
        """True once complete; calling it also lets MPI progress the transfer."""
        return self.req.Test()

    def wait(self):
        self.req.Wait()
