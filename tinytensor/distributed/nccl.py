"""The NCCL backend (CUDA tensors, one GPU per rank): not written yet.

What it needs, for whoever writes it: a `NCCLBackend` with the methods of `mpi.MPIBackend`
(allgather_object, allreduce, iallreduce, broadcast, all_gather, reduce_scatter, barrier,
abort, close) on CuPy arrays, built on `cupy.cuda.nccl.NcclCommunicator(world, uid, rank)`,
the unique id `nccl.get_unique_id()` sent from rank 0 through mpi4py (which also carries
the metadata checks and the barrier), the device chosen as `local rank % device count`,
and `iallreduce` returning a request that waits on a CUDA event recorded on the
communication stream. Its tests are `gpu`-marked and need a machine with 2 GPUs.
"""


class NCCLBackend:
    def __init__(self):
        raise NotImplementedError(
            "init_process_group('nccl'): the NCCL backend is not implemented yet (it needs "
            "cupy.cuda.nccl, a unique id shared over mpi4py and one GPU per rank; see "
            "tinytensor/distributed/nccl.py); use backend='mpi' with CPU tensors")
