"""The main job's body (tools/train.py parses the flags): the task, the model and its
optimizer, resuming, the training loop with evaluation and checkpoints, the loss curve
and the summary.

A checkpoint is written only from a finite state: a step whose loss, weights or
validation score is NaN or infinite stops the run there, so the last good checkpoint
on disk is never replaced by a broken one.

With args.compile the whole step (forward, backward, gradient clipping, AdamW) runs as
one program from tt.compile(backend="c"): captured on the first step, replayed after.
The loss is read after the step there (the compiled function cannot read it into Python
midway), so a non-finite loss stops the run one update later, still before a checkpoint.

With args.precision bf16 or fp16 the forward and the loss run under tt.autocast (matrix
products in the low precision, losses in float32, as torch's autocast lists say); the weights,
gradients and AdamW stay float32. fp16 also scales the loss (nn.GradScaler): a step whose
gradients overflowed is skipped and the scale lowered, and the scaler's state is checkpointed.
"""
import contextlib
import json
import math
import os
import sys
import tempfile
import time

from tinytensor import nn
import tinytensor as tt
from tinytensor.tools.lib import model_zoo
from tinytensor.tools.lib.corpus import load_tokens
from tinytensor.tools.lib.plot import write_curves_svg
from tinytensor.tools.lib.progress import progress
from tinytensor.tools.lib.tasks import LanguageModeling, MaskedLM, Reverse

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


def training_step(model, opt, batch):
    """One step as the compiled run does it: loss, backward, clipping, AdamW."""
    loss = model(**batch).loss
    opt.zero_grad()
    loss.backward()
    nn.clip_grad_norm_(model.parameters(), 1.0)   # recorded ops: the compiled step clips too
    opt.step()
    return loss


def classifier_step(model, opt, x, y):
    """One step of an image classifier on labels y: cross-entropy, backward, opt.step()
    (the ResNet-18 benchmark's step and its test's, eager or under tt.compile)."""
    opt.zero_grad()
    loss = tt.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def first_non_finite(model):
    """The name of the first parameter holding a NaN or an infinity, else None."""
    for name, p in model.named_parameters():
        if not bool(p.device.xp.isfinite(p.data).all()):
            return name
    return None


def run(args):
    """Train as the parsed flags say; returns the summary (also written to summary.json).

    With args.distributed (under `mpiexec -n N`) every rank draws the same global batch and
    trains on its slice of the rows through DistributedDataParallel; rank 0 alone prints,
    writes checkpoints and the summary. A rank that stops with an error aborts the job."""
    if not getattr(args, "distributed", False):
        return _run(args, None)
    import tinytensor.distributed as dist
    try:
        dist.init_process_group("mpi")
    except RuntimeError as e:
        raise SystemExit(f"train --distributed: {e}")
    try:
        summary = _run(args, dist)
    except SystemExit as e:
        if e.code not in (0, None):  # exiting alone would leave the other ranks waiting
            print(e.code, file=sys.stderr, flush=True)
            dist.abort(1)
        raise
    dist.destroy_process_group()
    return summary


class _Silent:
    """The progress bar of ranks other than 0: iterates, shows nothing."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def set(self, **info):
        pass

    def write(self, line):
        pass

    def close(self):
        pass


def _run(args, dist):
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)
    lead = rank == 0
    say = print if lead else (lambda *a, **k: None)
    tt.manual_seed(args.seed)
    try:
        tt.device(args.device).xp  # fails early, with an install hint, if cuda is unusable
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"train: {e}")
    if dist and tt.device(args.device).type != "cpu":
        raise SystemExit(f"train --distributed: runs CPU processes over MPI; got --device "
                         f"{args.device} (NCCL training is not wired into train.py yet)")
    if dist and getattr(args, "compile", False):
        raise SystemExit("train: --compile and --distributed do not combine yet (the gradient "
                         "all-reduce of DistributedDataParallel runs outside the tape)")
    if getattr(args, "compile", False) and tt.device(args.device).type != "cpu":
        raise SystemExit(f"train --compile: compiles for the CPU (C backend); got --device "
                         f"{args.device}")
    precision = getattr(args, "precision", "fp32")
    if precision != "fp32" and getattr(args, "compile", False):
        raise SystemExit(f"train: --precision {precision} and --compile do not combine yet (the "
                         "compiled step is captured in float32)")
    if dist and args.batch_size % world:
        raise SystemExit(f"train --distributed: --batch-size {args.batch_size} must be divisible "
                         f"by the {world} ranks (each trains on an equal slice of every batch)")
    if lead:
        check_out_dir(args.out)
    state = load_resume(args.resume, args.steps) if args.resume else None
    task = make_task(args)
    model, opt = build(args, task)
    low = {"bf16": "bfloat16", "fp16": "float16"}.get(precision)
    if low is not None and getattr(tt, low, None) is None:
        raise SystemExit(f"train: --precision {precision} needs tt.{low}, which this tinytensor lacks")

    def autocast():
        if low is None:
            return contextlib.nullcontext()
        return tt.autocast(tt.device(args.device).type, dtype=getattr(tt, low))
    scaler = nn.GradScaler(tt.device(args.device).type, enabled=precision == "fp16")
    config = dict(model.config.to_dict(), task=type(task).__name__)
    start, history, good = 0, {"train": [], "val": []}, None
    if state is not None:
        if state["config"] != config:
            raise SystemExit(f"train: {args.resume} was trained with a different model or sizes; "
                             "pass the same --model and size flags")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        start, history, good = state["step"], state["history"], (args.resume, state["step"])
        if "rng" in state:  # continue the data stream (and dropout) where it stopped
            task.rng.bit_generator.state = state["rng"]["data"]
            if state["rng"].get("cpu") is not None:
                tt.random.generator(tt.device("cpu")).bit_generator.state = state["rng"]["cpu"]
    schedule = nn.schedules.cosine_with_warmup(min(args.warmup, args.steps), args.steps, min_ratio=0.1)
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    what = ("the reverse task" if isinstance(task, Reverse)
            else f"{args.data or 'Python stdlib source'} ({len(task.train_tokens) + len(task.val_tokens):,} bytes)")
    say(f"tinytensor {tt.__version__}: {args.model} ({model.num_parameters():,} parameters, "
        f"{args.layers} layers, d={args.d_model}) on {what}, batch {args.batch_size}, {args.device}"
        + (f", {world} processes" if dist else ""))
    # every rank evaluates the same (identical) weights, so all of them agree on stopping
    if start == 0:
        history["val"].append((0, task.evaluate(model, args.device)))
        say(f"step {0:5d}  {task.metric} {history['val'][-1][1]:.4f}")
    trained = nn.parallel.DistributedDataParallel(model) if dist else model
    steps = range(start + 1, args.steps + 1)
    bar = progress(steps, "train") if lead else _Silent(steps)

    def stop(step, reason):
        bar.close()
        kept = (f"the last good checkpoint, {good[0]} (step {good[1]}), is kept" if good
                else "no checkpoint was written")
        raise SystemExit(f"train: stopped at step {step}: {reason}; {kept}")

    # the learning rate is a program input of the compiled step: the schedule does not recompile
    compiled = tt.compile(training_step, backend="c") if getattr(args, "compile", False) else None
    t0, seen = time.perf_counter(), 0
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = args.lr * schedule(step)
        batch = task.sample(args.device)   # under dist: the same global batch on every rank
        if compiled is not None:
            value = compiled(model, opt, batch).item()
            if not math.isfinite(value):
                stop(step, f"the training loss is {value}")
        else:
            mine = {k: dist.shard_rows(v) for k, v in batch.items()} if dist else batch
            with autocast():
                loss = trained(**mine).loss
            value = loss.item()
            if dist:  # equal slices: the mean of the ranks' means is the global batch's mean
                value = dist.all_reduce(tt.tensor([value], dtype=tt.float64), op="mean").item()
            if not math.isfinite(value):
                stop(step, f"the training loss is {value}")
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)   # clip the true gradients (a no-op unless fp16)
            nn.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)       # under fp16: skipped when a gradient overflowed
            scaler.update()
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
            if lead:
                nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                         "config": config, "history": history, "rng": rng,
                         "scaler": scaler.state_dict()}, ckpt)
            good = (ckpt, step)
    bar.close()
    if not lead:
        return {"model": args.model, "rank": rank}
    curve = os.path.join(args.out, "loss.svg")
    series = {"train loss": _smooth(history["train"])}
    if task.metric.endswith("loss"):
        series[task.metric] = history["val"]
    write_curves_svg(curve, series, title=f"{args.model}: {what}", ylabel="loss (nats/token)")
    print("sample:\n" + task.show(model, args.device, args.sample_tokens, args.seed))
    hf_dir = None
    if getattr(task, "export", None):
        hf_dir = os.path.join(args.out, "hf")
        task.export(model, hf_dir)
    val = history["val"]
    summary = {"model": args.model, "metric": task.metric, "start": val[0][1], "end": val[-1][1],
               "steps": args.steps, "seconds": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{task.metric} {summary['start']:.3f} -> {summary['end']:.3f}; checkpoint {ckpt}; "
          f"loss curve {curve}" + (f"; HuggingFace directory {hf_dir} (tools/generate.py reads it, after "
                                   "pip install -e '.[text]')"
                                   if hf_dir else ""))
    return summary


def _smooth(points, k=20):
    out, acc = [], []
    for s, v in points:
        acc.append(v)
        if len(acc) > k:
            acc.pop(0)
        out.append((s, sum(acc) / len(acc)))
    return out
