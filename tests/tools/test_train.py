"""The main job runs end to end for each kind of model, resumes, and refuses bad input."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tools import train  # noqa: E402

TINY = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "4",
        "--eval-every", "2", "--sample-tokens", "5", "--max-bytes", "20000"]


@pytest.mark.parametrize("model", ["gpt2", "llama", "bert", "transformer"])
def test_each_kind_of_model_trains_and_writes_its_outputs(model, tmp_path):
    summary = train.main(["--model", model, "--steps", "3", "--context", "16",
                          "--out", str(tmp_path)] + TINY)
    assert summary["steps"] == 3
    for name in ("checkpoint.safetensors", "loss.svg", "summary.json"):
        assert (tmp_path / name).exists()
    assert json.loads((tmp_path / "summary.json").read_text())["model"] == model


def test_resume_continues_from_the_checkpoint(tmp_path):
    args = ["--steps", "2", "--context", "16", "--out", str(tmp_path)] + TINY
    train.main(args)
    summary = train.main(["--resume", str(tmp_path / "checkpoint.safetensors"), "--steps", "4",
                          "--context", "16", "--out", str(tmp_path)] + TINY)
    assert summary["steps"] == 4


def test_resume_with_other_sizes_is_refused(tmp_path):
    base = ["--context", "16", "--out", str(tmp_path)] + TINY
    train.main(["--steps", "2"] + base)
    with pytest.raises(SystemExit, match="different model or sizes"):  # the last --d-model wins
        train.main(["--resume", str(tmp_path / "checkpoint.safetensors"), "--steps", "3"]
                   + base + ["--d-model", "32"])


def test_bad_data_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="cannot read --data"):
        train.main(["--data", str(tmp_path / "missing.txt"), "--out", str(tmp_path)])
    small = tmp_path / "small.txt"
    small.write_text("tiny")
    with pytest.raises(SystemExit, match="has only 4 bytes"):
        train.main(["--data", str(small), "--out", str(tmp_path)])
