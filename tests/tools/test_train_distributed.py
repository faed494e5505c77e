"""tools/train.py --distributed on two ranks: the same run as one process, rank 0 writes."""
import pytest

from tinytensor import nn
from tests.tinytensor.distributed.mpi import mpiexec, needs_mpi
from tinytensor.tools import train

TINY = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "4", "--context", "16",
        "--eval-every", "3", "--sample-tokens", "5", "--max-bytes", "20000"]


@needs_mpi
def test_two_ranks_train_like_one_process_print_once_and_resume(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    train.main(["--steps", "3", "--out", str(one)] + TINY)
    proc = mpiexec(["tools/train.py", "--distributed", "--steps", "3", "--out", str(two)] + TINY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("tinytensor ") == 1 and ", 2 processes" in proc.stdout  # rank 0 only
    single = nn.load(str(one / "checkpoint.safetensors"))
    double = nn.load(str(two / "checkpoint.safetensors"))
    # the loss each step reports is the global batch's mean, as one process computes it
    for (s1, a), (s2, b) in zip(single["history"]["train"], double["history"]["train"]):
        assert s1 == s2 and abs(a - b) < 1e-5, (a, b)
    worst = max(float(abs(single["model"][k].numpy() - double["model"][k].numpy()).max())
                for k in single["model"])
    assert worst < 1e-5

    proc = mpiexec(["tools/train.py", "--distributed", "--steps", "4", "--out", str(two),
                    "--resume", str(two / "checkpoint.safetensors")] + TINY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert nn.load(str(two / "checkpoint.safetensors"))["step"] == 4


@needs_mpi
def test_an_error_on_the_ranks_ends_the_job_with_the_message(tmp_path):
    proc = mpiexec(["tools/train.py", "--distributed", "--steps", "3", "--out", str(tmp_path)]
                   + TINY + ["--batch-size", "3"], timeout=20)
    assert proc.returncode != 0
    assert "--batch-size 3 must be divisible by the 2 ranks" in proc.stderr


def test_distributed_without_a_launcher_is_a_clear_error(tmp_path, monkeypatch):
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit, match="train --distributed: .*no launcher found"):
        train.main(["--distributed", "--steps", "1", "--out", str(tmp_path)] + TINY)
