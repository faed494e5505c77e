"""The main job runs end to end for each kind of model, resumes, and refuses bad input."""
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.tools import train

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


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_decoders_leave_a_huggingface_directory_that_generate_reads(model, tmp_path, capsys):
    pytest.importorskip("tokenizers")
    from tinytensor import models
    from tinytensor.tools import generate
    train.main(["--model", model, "--steps", "2", "--context", "16", "--out", str(tmp_path)] + TINY)
    hf = tmp_path / "hf"
    assert "HuggingFace directory" in capsys.readouterr().out
    tok = models.Tokenizer.from_dir(str(hf))
    text = "def f(x):\n    return x  # \u00e9"
    assert tok(text, padding=False)["input_ids"][0].tolist() == list(text.encode())  # ids are the bytes
    trained = nn.load(str(tmp_path / "checkpoint.safetensors"))["model"]
    loaded = models.from_hf(str(hf))
    for name, t in loaded.state_dict().items():
        np.testing.assert_array_equal(t.numpy(), trained[name].numpy(), err_msg=name)
    generate.main([str(hf), "def ", "--max-new-tokens", "5"])
    ids = loaded.generate(tt.tensor([list(b"def ")]), 5)[0].tolist()
    assert capsys.readouterr().out == bytes(ids).decode("utf-8", "replace") + "\n"


def test_masked_and_seq2seq_models_leave_no_huggingface_directory(tmp_path):
    for model in ("bert", "transformer"):
        train.main(["--model", model, "--steps", "2", "--context", "16", "--out", str(tmp_path / model)] + TINY)
        assert not (tmp_path / model / "hf").exists()


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
    save = nn.save

    def save_and_keep_step_2(obj, path):
        save(obj, path)
        if obj.get("step") == 2:   # a training checkpoint (the HF export at the end has no step)
            shutil.copy(path, tmp_path / "step2.safetensors")

    monkeypatch.setattr(nn, "save", save_and_keep_step_2)
    args = ["--steps", "4", "--context", "16", "--dropout", "0.1"] + TINY
    train.main(args + ["--out", str(tmp_path / "a")])
    train.main(args + ["--out", str(tmp_path / "b"), "--resume", str(tmp_path / "step2.safetensors")])
    a, b = (nn.load(str(tmp_path / d / "checkpoint.safetensors"))["history"]["train"]
            for d in ("a", "b"))
    assert [s for s, _ in b] == [1, 2, 3, 4]
    assert b == a


@pytest.mark.parametrize("model", ["gpt2", "gpt1", "llama", "bert"])
def test_dropout_flag_reaches_every_text_model(model):
    import tinytensor as tt
    from tinytensor.tools.lib import model_zoo
    net = model_zoo.build(model, 20, 16, 8, 1, 2, 0.5)
    ids = tt.tensor(np.arange(16).reshape(2, 8) % 20)
    a, b = (net(ids).logits.detach().numpy() for _ in range(2))
    assert not np.allclose(a, b)  # training mode: dropout changes the output


# ---- refusals: each one before any training, with a message naming the flag and value
def _parse_error(capsys, argv):
    """argparse's exit (code 2) and the message it printed."""
    with pytest.raises(SystemExit) as e:
        train.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--lr", "nan"), ("--lr", "inf"), ("--lr", "-inf"),
                                         ("--weight-decay", "nan"), ("--weight-decay", "inf"),
                                         ("--weight-decay", "-0.1"), ("--dropout", "nan")])
def test_non_finite_or_negative_hyperparameters_are_refused(flag, value, capsys, tmp_path):
    # tiny sizes: without the check this would train (on NaN) instead of hanging the suite
    err = _parse_error(capsys, ["--steps", "2", "--context", "16", "--out", str(tmp_path),
                                f"{flag}={value}"] + TINY)
    assert f"{flag} must be" in err and f"got {value}" in err
    assert not (tmp_path / "checkpoint.safetensors").exists()


@pytest.mark.parametrize("value", ["-5", "0", "999"])
def test_max_bytes_below_the_smallest_corpus_is_refused(value, capsys, tmp_path):
    err = _parse_error(capsys, ["--steps", "2", "--context", "16", "--out", str(tmp_path)]
                       + TINY + ["--max-bytes", value])
    assert f"--max-bytes must be at least 1000, got {value}" in err


@pytest.mark.parametrize("flag, value, least", [("--sample-tokens", "0", 1), ("--eval-every", "0", 1),
                                               ("--warmup", "-1", 0), ("--seed", "-1", 0)])
def test_counts_below_their_least_are_refused(flag, value, least, capsys, tmp_path):
    err = _parse_error(capsys, ["--steps", "2", "--context", "16", "--out", str(tmp_path)]
                       + TINY + [f"{flag}={value}"])
    assert f"{flag} must be at least {least}, got {value}" in err


def test_out_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "afile"
    target.write_text("keep me")
    with pytest.raises(SystemExit, match=re.escape(f"--out {target} is a file, not a directory")):
        train.main(["--steps", "2", "--context", "16", "--out", str(target)] + TINY)
    assert target.read_text() == "keep me"


def _unwritable_dir(tmp_path):
    """A directory this process cannot create files in: a read-only one, or for root
    (whom permissions do not stop) sysfs; skip if there is none."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    for d in (ro, Path("/sys")):
        try:
            fd, probe = tempfile.mkstemp(dir=d)
        except OSError:
            return d
        os.close(fd)
        os.unlink(probe)
    pytest.skip("no unwritable directory on this machine")


def test_unwritable_out_is_refused_before_training(tmp_path, capsys):
    out = _unwritable_dir(tmp_path)
    with pytest.raises(SystemExit) as e:
        train.main(["--steps", "2", "--context", "16", "--out", str(out)] + TINY)
    message = str(e.value)
    assert message.startswith(f"train: cannot write to --out {out}: ")
    assert ".tmp" not in message  # the directory, not nn.save's temporary file
    assert "step" not in capsys.readouterr().out  # refused at start, not at the first checkpoint


def test_default_output_directory_is_per_model():
    outs = {m: train.parse_args(["--model", m]).out for m in ("gpt2", "transformer", "bert")}
    assert outs == {m: os.path.join("out", "train", m) for m in outs}
    assert train.parse_args(["--model", "bert", "--out", "x"]).out == "x"


@pytest.mark.parametrize("content, what", [([1, 2, 3], "a list"),
                                           ({"weight": np.zeros(3, np.float32)}, "no step")])
def test_resume_from_a_file_that_is_not_a_training_checkpoint_is_refused(content, what, tmp_path):
    bogus = tmp_path / "bogus.safetensors"
    nn.save(content, bogus)
    expected = {"a list": "it holds a list, not the dict train.py saves",
                "no step": "it lacks config, history, model, optimizer, step"}[what]
    with pytest.raises(SystemExit, match=re.escape(
            f"train: {bogus} is not a checkpoint of tools/train.py: {expected}")):
        train.main(["--resume", str(bogus), "--steps", "3", "--context", "16",
                    "--out", str(tmp_path)] + TINY)


def test_resume_of_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="cannot resume from .*missing.safetensors: No such file"):
        train.main(["--resume", str(tmp_path / "missing.safetensors"), "--steps", "3",
                    "--context", "16", "--out", str(tmp_path)] + TINY)


@pytest.mark.parametrize("steps", ["2", "4"])
def test_resume_with_steps_not_above_the_saved_step_is_refused(steps, tmp_path):
    base = ["--context", "16", "--out", str(tmp_path)] + TINY
    train.main(["--steps", "4"] + base)
    ckpt = tmp_path / "checkpoint.safetensors"
    before = ckpt.read_bytes()
    with pytest.raises(SystemExit, match=re.escape(
            f"{ckpt} is already at step 4; pass --steps above 4 to train further "
            f"(got --steps {steps})")):
        train.main(["--resume", str(ckpt), "--steps", steps] + base)
    assert ckpt.read_bytes() == before


def test_help_shows_each_default_once(capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    steps = re.search(r"--steps STEPS\s+(.*?)\n  --", text, re.S).group(1)
    assert " ".join(steps.split()) == ("training steps (default: 1200 for gpt2, gpt1, llama, "
                                      "bert; 500 for transformer, t5, bart)")


# ---- a run that goes non-finite stops there and keeps the last good checkpoint
def _record_saves(monkeypatch):
    """nn.save, keeping (step, bytes written) of every checkpoint."""
    saved, save = [], nn.save

    def recording(obj, path):
        save(obj, path)
        saved.append((obj["step"], Path(path).read_bytes()))
    monkeypatch.setattr(nn, "save", recording)
    return saved


@pytest.mark.parametrize("poison_step, reason", [(3, re.escape("the training loss is nan")),
                                                 (4, r"the weights are not finite \(first: [\w.]+\)")])
def test_non_finite_step_stops_and_keeps_the_last_good_checkpoint(poison_step, reason,
                                                                  tmp_path, monkeypatch):
    step, calls = nn.optim.AdamW.step, []

    def poisoning_step(self, closure=None):  # as if the update at poison_step overflowed
        out = step(self, closure)
        calls.append(1)
        if len(calls) == poison_step:
            self.param_groups[0]["params"][0].data[...] = np.nan
        return out
    monkeypatch.setattr(nn.optim.AdamW, "step", poisoning_step)
    saved = _record_saves(monkeypatch)
    ckpt = tmp_path / "checkpoint.safetensors"
    with pytest.raises(SystemExit) as e:
        train.main(["--steps", "6", "--context", "16", "--out", str(tmp_path)] + TINY)
    assert re.fullmatch(f"train: stopped at step 4: {reason}; "
                        + re.escape(f"the last good checkpoint, {ckpt} (step 2), is kept"), str(e.value))
    assert [s for s, _ in saved] == [2]
    assert ckpt.read_bytes() == saved[0][1]


def test_diverging_lr_on_resume_keeps_the_good_checkpoint_byte_identical(tmp_path):
    base = ["--context", "16", "--out", str(tmp_path)] + TINY
    train.main(["--steps", "2"] + base)
    ckpt = tmp_path / "checkpoint.safetensors"
    good = ckpt.read_bytes()
    with pytest.raises(SystemExit, match=r"train: stopped at step [3-8]: .* "
                                         + re.escape(f"the last good checkpoint, {ckpt} (step 2), is kept")):
        train.main(["--resume", str(ckpt), "--steps", "8", "--lr", "1e30", "--warmup", "0"] + base)
    assert ckpt.read_bytes() == good
    state = nn.load(ckpt)
    assert all(math.isfinite(float(np.abs(p.numpy()).max())) for p in state["model"].values())
