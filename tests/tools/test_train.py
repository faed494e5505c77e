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


def test_resumed_run_sees_the_same_batches_as_an_uninterrupted_one(tmp_path, monkeypatch):
    import shutil
    save = train.nn.save

    def save_and_keep_step_2(obj, path):
        save(obj, path)
        if obj["step"] == 2:
            shutil.copy(path, tmp_path / "step2.safetensors")

    monkeypatch.setattr(train.nn, "save", save_and_keep_step_2)
    args = ["--steps", "4", "--context", "16", "--dropout", "0.1"] + TINY
    train.main(args + ["--out", str(tmp_path / "a")])
    train.main(args + ["--out", str(tmp_path / "b"), "--resume", str(tmp_path / "step2.safetensors")])
    a, b = (train.nn.load(str(tmp_path / d / "checkpoint.safetensors"))["history"]["train"]
            for d in ("a", "b"))
    assert [s for s, _ in b] == [1, 2, 3, 4]
    assert b == a


@pytest.mark.parametrize("model", ["gpt2", "gpt1", "llama", "bert"])
def test_dropout_flag_reaches_every_text_model(model):
    import numpy as np

    import tinytensor as tt
    from tools import model_zoo
    net = model_zoo.build(model, 20, 16, 8, 1, 2, 0.5)
    ids = tt.tensor(np.arange(16).reshape(2, 8) % 20)
    a, b = (net(ids).logits.detach().numpy() for _ in range(2))
    assert not np.allclose(a, b)  # training mode: dropout changes the output
