"""The fast slice of the fuzzing of every reader of untrusted bytes (issue 26): seeded
mutations of real files (truncation, bit flips, nesting, huge numbers, values of the wrong
kind) fed to the torch pickle reader, the safetensors reader and the HF-directory JSON
reader, each in a child process under CPU and memory limits. Every case must end in a clean
result or the reader's own error; a crash, a hang, a slow case or another exception fails
the test with the command that replays the case. The long run: README, "Fuzzing".

TT_FUZZ_SEED picks another seed (default 0)."""
import json
import os
import subprocess
import sys

import pytest

from tests.fuzz import targets
from tests.limits import ROOT

SEED = int(os.environ.get("TT_FUZZ_SEED", "0"))
CASES = {"pickle": 600, "safetensors": 400, "hfjson": 400}  # about a second of CPU each


def _seeds(target, tmp_path_factory):
    if target == "pickle":
        pytest.importorskip("torch")
    if target == "hfjson":
        pytest.importorskip("tokenizers")
    directory = tmp_path_factory.mktemp(f"seeds-{target}")
    getattr(targets, f"{target}_seeds")(str(directory))
    return str(directory)


@pytest.mark.parametrize("target", sorted(CASES))
def test_mutated_files_end_in_a_result_or_the_readers_own_error(target, tmp_path_factory):
    seeds = _seeds(target, tmp_path_factory)
    cmd = [sys.executable, "-m", "tests.fuzz.run", target, "--seed", str(SEED), "--cases",
           str(CASES[target]), "--seeds", seeds, "--case-cpu", "2", "--cpu-limit", "60",
           "--mem-limit", "3072"]
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"hung: no end after 300 s, in {_last_case(out)}")
    lines = proc.stdout.splitlines()
    summary = [json.loads(line[8:]) for line in lines if line.startswith("SUMMARY ")]
    if proc.returncode < 0 or not summary:
        pytest.fail(f"the reader died ({_how(proc.returncode)}) in {_last_case(proc.stdout)} of seed "
                    f"{SEED}: replay with python -m tests.fuzz.run {target} --seed {SEED} --case N"
                    f"\n{proc.stderr[-3000:]}")
    bugs = "\n".join(line for line in lines if not line.startswith(("CASE ", "SUMMARY ")))
    assert proc.returncode == 0 and summary[0]["bugs"] == 0, bugs[-6000:]
    assert summary[0]["cases"] == CASES[target]
    assert summary[0]["ok"] > 0 and summary[0]["own error"] > 0  # the mutations reach both ends


def _last_case(out):
    cases = [line for line in out.splitlines() if line.startswith("CASE ")]
    return cases[-1].lower() if cases else "no case (while starting)"


def _how(rc):
    import signal
    return signal.Signals(-rc).name if rc < 0 else f"exit status {rc}"
