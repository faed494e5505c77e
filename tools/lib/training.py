"""The main job's body (tools/train.py parses the flags): the task, the model and its
optimizer, resuming, the training loop with evaluation and checkpoints, the loss curve
and the summary.

A checkpoint is written only from a finite state: a step whose loss, weights or
validation score is NaN or infinite stops the run there, so the last good checkpoint
on disk is never replaced by a broken one.
"""
import json
import math
import os
import tempfile
import time

import nn
import tinytensor as tt
from tools.lib import model_zoo
from tools.lib.corpus import load_tokens
from tools.lib.plot import write_curves_svg
from tools.lib.progress import progress
from tools.lib.tasks import LanguageModeling, MaskedLM, Reverse

CHECKPOINT_KEYS = ("config", "history", "model", "optimizer", "step")


def check_out_dir(out):
    """Create `out` if needed and prove it writable now rather than at the first checkpoint."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise SystemExit(f"train: --out {out} is a file, not a directory")
    try:
        os.makedirs(out, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-test-")
    except OSError as e:
        raise SystemExit(f"train: cannot write to --out {out}: {e.strerror or e}")
    os.close(fd)
    os.unlink(probe)


def load_resume(path, steps):
    """The state to continue from: a checkpoint this program wrote, behind `steps`."""
    try:
        state = nn.load(path)
    except nn.CheckpointError as e:
        raise SystemExit(f"train: cannot resume from {path}: {e}")
    except OSError as e:
        raise SystemExit(f"train: cannot resume from {path}: {e.strerror or e}")
    if not isinstance(state, dict):
        raise SystemExit(f"train: {path} is not a checkpoint of tools/train.py: it holds a "
                         f"{type(state).__name__}, not the dict train.py saves")
    missing = [k for k in CHECKPOINT_KEYS if k not in state]
    if missing:
        raise SystemExit(f"train: {path} is not a checkpoint of tools/train.py: it lacks "
                         + ", ".join(missing))
    if steps <= state["step"]:
        raise SystemExit(f"train: {path} is already at step {state['step']}; pass --steps above "
                         f"{state['step']} to train further (got --steps {steps})")
    return state


def make_task(args):
    kind = model_zoo.task_kind(args.model)
    if kind == "seq2seq":
        return Reverse(args.batch_size, args.seed)
    tokens = load_tokens(args.data, args.max_bytes)
    cls = LanguageModeling if kind == "lm" else MaskedLM
    return cls(tokens, args.context, args.batch_size, args.seed)


def build(args, task):
    special = (Reverse.PAD, Reverse.START, Reverse.EOS)
    context = max(args.context, 16)
    model = model_zoo.build(args.model, task.vocab_size, context, args.d_model, args.layers,
                            args.heads, args.dropout, special).to(args.device)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]   # norms and biases
    opt = nn.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}],
                         lr=args.lr, betas=(0.9, 0.95))
    return model, opt


def first_non_finite(model):
    """The name of the first parameter holding a NaN or an infinity, else None."""
    for name, p in model.named_parameters():
        if not bool(p.device.xp.isfinite(p.data).all()):
            return name
    return None


def run(args):
    """Train as the parsed flags say; returns the summary (also written to summary.json)."""
    tt.manual_seed(args.seed)
    try:
        tt.device(args.device).xp  # fails early, with an install hint, if cuda is unusable
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"train: {e}")
    check_out_dir(args.out)
    state = load_resume(args.resume, args.steps) if args.resume else None
    task = make_task(args)
    model, opt = build(args, task)
    config = dict(model.config.to_dict(), task=type(task).__name__)
    start, history, good = 0, {"train": [], "val": []}, None
    if state is not None:
        if state["config"] != config:
            raise SystemExit(f"train: {args.resume} was trained with a different model or sizes; "
                             "pass the same --model and size flags")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, history, good = state["step"], state["history"], (args.resume, state["step"])
        if "rng" in state:  # continue the data stream (and dropout) where it stopped
            task.rng.bit_generator.state = state["rng"]["data"]
            if state["rng"].get("cpu") is not None:
                tt.random.generator(tt.device("cpu")).bit_generator.state = state["rng"]["cpu"]
    schedule = nn.schedules.cosine_with_warmup(min(args.warmup, args.steps), args.steps, min_ratio=0.1)
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    what = ("the reverse task" if isinstance(task, Reverse)
            else f"{args.data or 'Python stdlib source'} ({len(task.train_tokens) + len(task.val_tokens):,} bytes)")
    print(f"tinytensor {tt.__version__}: {args.model} ({model.num_parameters():,} parameters, "
          f"{args.layers} layers, d={args.d_model}) on {what}, batch {args.batch_size}, {args.device}")
    if start == 0:
        history["val"].append((0, task.evaluate(model, args.device)))
        print(f"step {0:5d}  {task.metric} {history['val'][-1][1]:.4f}")
    bar = progress(range(start + 1, args.steps + 1), "train")

    def stop(step, reason):
        bar.close()
        kept = (f"the last good checkpoint, {good[0]} (step {good[1]}), is kept" if good
                else "no checkpoint was written")
        raise SystemExit(f"train: stopped at step {step}: {reason}; {kept}")

    t0, seen = time.perf_counter(), 0
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = args.lr * schedule(step)
        batch = task.sample(args.device)
        loss = model(**batch).loss
        value = loss.item()
        if not math.isfinite(value):
            stop(step, f"the training loss is {value}")
        opt.zero_grad()
        loss.backward()
        nn.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += batch["input_ids"].numel()
        history["train"].append((step, value))
        bar.set(loss=value, tok_s=int(seen / (time.perf_counter() - t0)))
        if step % args.eval_every == 0 or step == args.steps:
            bad = first_non_finite(model)
            if bad:
                stop(step, f"the weights are not finite (first: {bad})")
            score = task.evaluate(model, args.device)
            if not math.isfinite(score):
                stop(step, f"the {task.metric} is {score}")
            history["val"].append((step, score))
            bar.write(f"step {step:5d}  train loss {value:.4f}  {task.metric} {score:.4f}")
            rng = {"data": task.rng.bit_generator.state,
                   "cpu": tt.random.generator(tt.device("cpu")).bit_generator.state}
            nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                     "config": config, "history": history, "rng": rng}, ckpt)
            good = (ckpt, step)
    curve = os.path.join(args.out, "loss.svg")
    series = {"train loss": _smooth(history["train"])}
    if task.metric.endswith("loss"):
        series[task.metric] = history["val"]
    write_curves_svg(curve, series, title=f"{args.model}: {what}", ylabel="loss (nats/token)")
    print("sample:\n" + task.show(model, args.device, args.sample_tokens, args.seed))
    val = history["val"]
    summary = {"model": args.model, "metric": task.metric, "start": val[0][1], "end": val[-1][1],
               "steps": args.steps, "seconds": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{task.metric} {summary['start']:.3f} -> {summary['end']:.3f}; checkpoint {ckpt}; "
          f"loss curve {curve}")
    return summary


def _smooth(points, k=20):
    out, acc = [], []
    for s, v in points:
        acc.append(v)
        if len(acc) > k:
            acc.pop(0)
        out.append((s, sum(acc) / len(acc)))
    return out
