"""The MPI backend: mpi4py on NumPy arrays, i.e. CPU tensors.

Waiting with a deadline. A blocking MPI call cannot be interrupted, so a rank that never
arrives would hold the others for ever. The metadata agreement every collective starts
with (`agree`) is therefore made of point-to-point messages the waiting rank polls: it
sees which ranks have not sent theirs when the group's timeout runs out, and it sees a
rank that announced it is leaving the job (`leave`, from the exit handler) while it
waits. Once every rank has agreed, the data transfer itself is blocking: all ranks are
in it together.
"""
import time

from .process_group import INSTALL, register_backend

_OPS = None
# message tags on the group's private communicator: collectives' metadata, "I am exiting"
_AGREE, _LEAVE = 11, 12


def _import_mpi():
    try:
        # mpi4py is optional: only backend='mpi' needs it
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"init_process_group('mpi'): mpi4py is not installed ({e}); install "
                           f"it and an MPI library with\n    {INSTALL}") from None
    return MPI


class GroupTimeout(RuntimeError):
    """A collective waited longer than init_process_group(timeout=...) for some rank."""


class RankLeft(RuntimeError):
    """A rank this one waits for is exiting without destroy_process_group()."""


class MPIBackend:
    name = "mpi"
    device_type = "cpu"

    def __init__(self, timeout=None):
        global _OPS
        MPI = self.MPI = _import_mpi()
        _OPS = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX}
        self.timeout = timeout  # seconds, or None: wait for ever
        # a duplicate, so tinytensor's messages never mix with the user's own MPI traffic
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self.left = set()  # ranks known to be exiting

    # ------------------------------------------------------------------ agreement
    def allgather_object(self, obj, what="collective"):
        """Every rank's `obj`, in rank order. Raises GroupTimeout naming the ranks that sent
        nothing within the timeout, or RankLeft if one of them is exiting instead."""
        comm, me = self.comm, self.rank
        others = [r for r in range(self.world_size) if r != me]
        sends = [comm.isend(obj, dest=r, tag=_AGREE) for r in others]
        got, waiting = {me: obj}, set(others)
        clock = _Clock(self.timeout)
        while True:
            for r in sorted(waiting):
                msg = comm.improbe(source=r, tag=_AGREE)
                if msg is not None:
                    got[r] = msg.recv()
                    waiting.discard(r)
            if not waiting and self.MPI.Request.Testall(sends):
                return [got[r] for r in range(self.world_size)]
            self._check_left(what, waiting)
            if clock.expired():
                late = sorted(waiting) or "none (they have not received this rank's message)"
                raise GroupTimeout(
                    f"{what} on rank {me}: timed out after {clock.limit:g} s; rank(s) {late} did "
                    f"not arrive (a rank is stuck, slower by more than the timeout, or calls "
                    "collectives in another order); raise init_process_group(timeout=...) if the "
                    "work between collectives takes that long")
            clock.nap()

    def _check_left(self, what, ranks):
        for r in sorted(ranks):
            if r in self.left or self.comm.iprobe(source=r, tag=_LEAVE):
                self.left.add(r)
                raise RankLeft(
                    f"{what} on rank {self.rank}: rank {r} is exiting without "
                    "destroy_process_group() while this rank waits for it (it returned or called "
                    "sys.exit() before the other ranks were done); every rank must run the same "
                    "collectives, and call destroy_process_group() before it exits")

    def leave(self):
        """Called at exit with the group still open: tell every rank, then wait (up to the
        timeout) until each is exiting too. Returns None when all are, else a sentence
        saying which rank still waits for this one."""
        comm, me = self.comm, self.rank
        others = [r for r in range(self.world_size) if r != me]
        sends = [comm.isend(None, dest=r, tag=_LEAVE) for r in others]
        clock = _Clock(self.timeout)
        while True:
            for r in others:
                if r not in self.left and comm.iprobe(source=r, tag=_LEAVE):
                    comm.recv(source=r, tag=_LEAVE)
                    self.left.add(r)
                elif r not in self.left and comm.iprobe(source=r, tag=_AGREE):
                    return f"rank {r} waits for it in a collective"
            if self.left.issuperset(others) and self.MPI.Request.Testall(sends):
                return None
            if clock.expired():
                late = sorted(set(others) - self.left)
                return f"rank(s) {late} did not exit within {clock.limit:g} s"
            clock.nap()

    # ------------------------------------------------------------------ data
    def allreduce(self, a, op):
        self.comm.Allreduce(self.MPI.IN_PLACE, a, op=_OPS[op])

    def iallreduce(self, a, op, what="all_reduce"):
        """Start an all-reduce of `a` in place; returns a request with test() and wait()."""
        return _Request(self.comm.Iallreduce(self.MPI.IN_PLACE, a, op=_OPS[op]), self, what)

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


class _Clock:
    """A deadline, and naps that grow from nothing to 1 ms: a quick answer is seen at once,
    a long wait costs little CPU (Open MPI's own blocking calls spin a core)."""
    __slots__ = ("limit", "start", "naps")

    def __init__(self, limit):
        self.limit, self.start, self.naps = limit, time.monotonic(), 0

    def expired(self):
        return self.limit is not None and time.monotonic() - self.start > self.limit

    def nap(self):
        self.naps += 1
        time.sleep(0 if self.naps < 50 else min(1e-3, 2e-5 * (self.naps - 49)))


class _Request:
    __slots__ = ("req", "group", "what")

    def __init__(self, req, group, what):
        self.req, self.group, self.what = req, group, what

    def test(self):
        """True once complete; calling it also lets MPI progress the transfer."""
        return self.req.Test()

    def wait(self):
        """Wait for completion, polling: a rank that exits or never joins is an error."""
        g, clock = self.group, _Clock(self.group.timeout)
        while not self.req.Test():
            g._check_left(self.what, [r for r in range(g.world_size) if r != g.rank])
            if clock.expired():
                raise GroupTimeout(
                    f"{self.what} on rank {g.rank}: timed out after {clock.limit:g} s; some rank "
                    "did not join it (ranks must run the same number of backward passes); raise "
                    "init_process_group(timeout=...) if a step takes that long")
            clock.nap()


register_backend("mpi", MPIBackend)
