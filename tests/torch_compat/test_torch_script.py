"""The proof of issue 30: a torch training script of nanoGPT's shape (tests/torch_script:
model.py, train.py, sample.py, configurator.py, written for this test) runs under tinytensor
with only its torch import lines pointed at tinytensor, and matches torch in float64.

Each script runs in this process (runpy), once per library, from its own copy in a temporary
directory; the copies for tinytensor differ from the originals in their import lines only,
which the test checks. Weights are copied: torch writes the untrained model's checkpoint,
and both libraries resume from that one file (tinytensor reads torch's zip through its
restricted reader)."""
import os
import pickle
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tinytensor as tt

SCRIPTS = Path(__file__).resolve().parents[1] / "torch_script"
FILES = ("model.py", "train.py", "sample.py", "configurator.py")
# the torch imports a script has, pointed at tinytensor: the one change a user makes
_IMPORT = re.compile(r"^import torch(\.[\w.]+)?( as \w+)?$")
_FROM = re.compile(r"^from torch(\.[\w.]+)? import ")


def as_tinytensor(line):
    if m := _IMPORT.match(line):
        sub, alias = m.group(1) or "", m.group(2) or ""
        return f"import tinytensor{sub}{alias or (' as torch' if not sub else '')}"
    if m := _FROM.match(line):
        return f"from tinytensor{m.group(1) or ''} import " + line[m.end():]
    return line


def _copy_scripts(dest, lib):
    dest.mkdir()
    changed = 0
    for name in FILES:
        lines = (SCRIPTS / name).read_text().split("\n")
        if lib == "tinytensor":
            new = [as_tinytensor(x) for x in lines]
            diff = [(a, b) for a, b in zip(lines, new) if a != b]
            assert all(a.startswith(("import torch", "from torch")) for a, _ in diff)
            changed += len(diff)
            lines = new
        (dest / name).write_text("\n".join(lines))
    return changed


def _corpus(data_dir):
    """A character-level corpus, nanoGPT's prepare.py shape: train.bin, val.bin, meta.pkl."""
    text = "".join(f"the quick brown fox {i % 7} jumps over the lazy dog {i % 5}\n" for i in range(40))
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = int(0.8 * len(ids))
    data_dir.mkdir()
    ids[:n].tofile(data_dir / "train.bin")
    ids[n:].tofile(data_dir / "val.bin")
    with open(data_dir / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "stoi": stoi, "itos": dict(enumerate(chars))}, f)
    return len(chars)


def _run(code_dir, script, args, monkeypatch):
    """Run `script` as `python script args` from `code_dir`; its globals after the run."""
    with monkeypatch.context() as m:
        m.chdir(code_dir)
        m.setattr(sys, "argv", [script, *args])
        m.syspath_prepend(str(code_dir))
        # torch.testing._internal (the op-table tests, maybe earlier in this process) freezes
        # torch.backends' flags; the scripts set cudnn.allow_tf32 as torch scripts do
        m.setitem(torch.backends.flags_frozen.__globals__, "__allow_nonbracketed_mutation_flag", True)
        sys.modules.pop("model", None)
        try:
            return runpy.run_path(str(code_dir / script), run_name="__main__")
        finally:
            sys.modules.pop("model", None)
            torch.set_default_dtype(torch.float32)
            tt.set_default_dtype(tt.float32)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    """Every run the tests compare, made once: (name -> globals of the run)."""
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("torch_script")
    code = {lib: root / lib for lib in ("torch", "tinytensor")}
    changed = {lib: _copy_scripts(code[lib], lib) for lib in code}
    vocab = _corpus(root / "data")
    common = [f"--data_dir={root / 'data'}", f"--vocab_size={vocab}", "--dtype=float64",
              "--learning_rate=0.1"]

    def out(name, start_from=None):
        d = root / f"out_{name}"
        if start_from is not None:
            shutil.copytree(root / f"out_{start_from}", d)
        return f"--out_dir={d}"

    r = {"changed": changed, "root": root, "code": code, "common": common}
    try:
        # torch: the untrained model's checkpoint, which every later run starts from
        _run(code["torch"], "train.py", [*common, out("init"), "--save_init=True",
                                         "--eval_only=True"], mp)
        resume = [*common, "--init_from=resume", "--max_iters=4"]
        r["torch"] = _run(code["torch"], "train.py", [*resume, out("torch", "init")], mp)
        r["tt"] = _run(code["tinytensor"], "train.py", [*resume, out("tt", "init")], mp)
        # tinytensor stopped after iteration 2, resumed from its own checkpoint
        _run(code["tinytensor"], "train.py", [*common, "--init_from=resume", "--max_iters=2",
                                              out("tt_half", "init")], mp)
        r["tt_resumed"] = _run(code["tinytensor"], "train.py", [*resume, out("tt_half")], mp)
        # the torch.compile branch: tt.compile(model), forward and backward replayed from the
        # captured program. With the "numpy" backend (the interpreter of that program): the
        # C backend runs the same program, but compiling it cold takes minutes on a busy CPU
        with pytest.MonkeyPatch.context() as m:
            compile_ = tt.compile
            m.setattr(tt, "compile", lambda model: compile_(model, backend="numpy"))
            r["tt_compiled"] = _run(code["tinytensor"], "train.py",
                                    [*resume, out("tt_compiled", "init"), "--compile=True"], mp)
        # the AMP branch: autocast to float16 on the CPU, and an enabled GradScaler
        r["tt_amp"] = _run(code["tinytensor"], "train.py",
                           [*resume[:2], "--dtype=float16", *resume[3:], "--max_iters=2",
                            out("tt_amp", "init")], mp)
        sample = [*common[:1], "--dtype=float64", "--top_k=1", "--num_samples=1", "--start=the"]
        for lib, name in (("torch", "torch"), ("tinytensor", "tt")):  # trained: each its own file
            r[f"{name}_sample"] = _run(code[lib], "sample.py", [*sample, out(name)], mp)
        for lib, name in (("torch", "torch"), ("tinytensor", "tt")):  # untrained: torch's file
            r[f"{name}_sample_init"] = _run(code[lib], "sample.py", [*sample, out("init")], mp)
    finally:
        mp.undo()
    return r


def test_only_the_import_lines_change(runs):
    assert runs["changed"] == {"torch": 0, "tinytensor": 8}  # model 3, train 4, sample 1


def test_training_losses_equal_torchs_in_float64(runs):
    ours, theirs = runs["tt"]["loss_history"], runs["torch"]["loss_history"]
    assert len(ours) == len(theirs) == 4
    np.testing.assert_allclose(ours, theirs, rtol=1e-13)
    for (name, p), q in zip(runs["tt"]["raw_model"].named_parameters(),
                            runs["torch"]["raw_model"].parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10,
                                   atol=1e-9, err_msg=name)  # a zero-gradient bias: Adam scales noise


def test_a_resumed_run_is_bitwise_the_uninterrupted_one(runs):
    whole, resumed = runs["tt"], runs["tt_resumed"]
    assert resumed["loss_history"] == whole["loss_history"][2:]
    for p, q in zip(whole["raw_model"].parameters(), resumed["raw_model"].parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    ck = tt.load(runs["root"] / "out_tt" / "ckpt.pt")  # tinytensor's own checkpoint, the full tree
    assert ck["iter_num"] == 4 and ck["config"]["max_iters"] == 4
    assert set(ck["optimizer"]["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


@pytest.mark.parametrize("which", ["sample", "sample_init"])
def test_greedy_samples_equal_torchs(runs, which):
    ours, theirs = runs[f"tt_{which}"]["samples"], runs[f"torch_{which}"]["samples"]
    assert ours == theirs and len(ours[0]) == 23
    # the untrained and the trained model say different things: each read its own checkpoint
    assert runs["tt_sample"]["samples"] != runs["tt_sample_init"]["samples"]


def test_the_compile_branch_trains_as_eager(runs):
    assert type(runs["tt_compiled"]["model"]).__name__ != "GPT"  # the compiled wrapper ran
    np.testing.assert_allclose(runs["tt_compiled"]["loss_history"], runs["torch"]["loss_history"],
                               rtol=1e-13)


def test_the_amp_branch_scales_and_stays_near_float64(runs):
    amp = runs["tt_amp"]
    assert amp["ctx"].__class__ is tt.amp.autocast and amp["scaler"].is_enabled()
    assert amp["scaler"].get_scale() == 65536.0  # no step skipped
    np.testing.assert_allclose(amp["loss_history"], runs["torch"]["loss_history"][:2], rtol=2e-3)


@pytest.mark.slow
def test_the_ddp_branch_under_torchrun_variables(runs):
    """RANK/LOCAL_RANK/WORLD_SIZE as torchrun sets them for one process: init_process_group
    ("gloo", MPI's singleton here), DDP(model, device_ids=None), require_backward_grad_sync,
    destroy_process_group. Averaging over one rank is exact: the weights are bitwise the
    plain run's. A subprocess, so that MPI starts and ends with it."""
    pytest.importorskip("mpi4py")
    root = runs["root"]
    shutil.copytree(root / "out_init", root / "out_ddp")
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run(
        [sys.executable, "train.py", *runs["common"], "--init_from=resume", "--max_iters=4",
         f"--out_dir={root / 'out_ddp'}"], cwd=runs["code"]["tinytensor"], env=env,
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ck = tt.load(root / "out_ddp" / "ckpt.pt")
    assert ck["iter_num"] == 4
    for name, p in runs["tt"]["raw_model"].state_dict().items():
        np.testing.assert_array_equal(ck["model"][name].numpy(), p.numpy(), err_msg=name)
