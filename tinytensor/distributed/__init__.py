"""Data-parallel training on existing engines: MPI (mpi4py) for CPU processes, NCCL (CuPy)
for GPUs. tinytensor grows no transport of its own.

    import tinytensor.distributed as dist
    dist.init_process_group("mpi")          # under: mpiexec -n 2 python train.py
    dist.all_reduce(t, op="mean")           # in place, like torch.distributed

`nn.parallel.DistributedDataParallel` builds on these; `DistributedSampler` and
`shard_rows` split the data between ranks.
"""
from . import mpi, nccl  # noqa: F401  (the backends register themselves by name)
from .process_group import (ReduceOp, abort, get_backend, get_rank, get_world_size,
                            init_process_group, is_initialized, is_available, is_mpi_available,
                            is_nccl_available, is_gloo_available)
from .collectives import (all_gather, all_reduce, barrier, broadcast, destroy_process_group,
                          reduce_scatter)
from .sampler import DistributedSampler, shard_rows

__all__ = ["ReduceOp", "abort", "all_gather", "all_reduce", "barrier", "broadcast",
           "destroy_process_group", "get_backend", "get_rank", "get_world_size",
           "init_process_group", "is_initialized", "reduce_scatter", "DistributedSampler",
           "shard_rows", "is_available", "is_mpi_available", "is_nccl_available",
           "is_gloo_available"]
