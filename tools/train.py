"""The main job: train a small Transformer, with no download.

    python tools/train.py                      # GPT-2-style model on Python's stdlib source
    python tools/train.py --model llama --steps 300 --data notes.txt
    python tools/train.py --model transformer  # 2017 encoder-decoder learns to reverse sequences
    python tools/train.py --resume out/train/checkpoint.safetensors --steps 1200

By default it trains a 4-layer, 128-wide GPT-2-style model on byte tokens of the
standard library's source text (present on every machine with Python), with a progress
bar showing loss and tokens/s, a validation score every --eval-every steps, an atomic
checkpoint, a sample at the end, and a loss-curve picture (SVG). Decoder models
(gpt2, gpt1, llama) learn next-byte prediction, bert masked bytes, and the
encoder-decoders (transformer, t5, bart) a synthetic task: reverse the input sequence.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nn  # noqa: E402
import tinytensor as tt  # noqa: E402
from tools import model_zoo  # noqa: E402
from tools.corpus import load_tokens  # noqa: E402
from tools.plot import write_curves_svg  # noqa: E402
from tools.progress import progress  # noqa: E402
from tools.tasks import LanguageModeling, MaskedLM, Reverse  # noqa: E402

# per-kind defaults for flags left unset: text models, and the small seq2seq task
DEFAULTS = {
    "lm": dict(steps=1200, batch_size=16, context=64, layers=4, d_model=128, heads=4, lr=3e-3),
    "mlm": dict(steps=1200, batch_size=16, context=64, layers=4, d_model=128, heads=4, lr=1e-3),
    "seq2seq": dict(steps=500, batch_size=32, context=16, layers=2, d_model=64, heads=4, lr=3e-3),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default="gpt2", choices=model_zoo.NAMES)
    ap.add_argument("--data", default=None, help="a text file; default: Python's stdlib source")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, help="default: 1200 (text), 500 (reverse task)")
    ap.add_argument("--batch-size", type=int, help="default: 16 (text), 32 (reverse task)")
    ap.add_argument("--context", type=int, help="tokens per sequence; default 64 (text)")
    ap.add_argument("--layers", type=int, help="default: 4 (text), 2 per stack (reverse task)")
    ap.add_argument("--d-model", type=int, help="default: 128 (text), 64 (reverse task)")
    ap.add_argument("--heads", type=int, default=None, help="default: 4")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-bytes", type=int, default=2_000_000, help="corpus size cap")
    ap.add_argument("--out", default="out/train", help="directory for checkpoint, curve, summary")
    ap.add_argument("--resume", default=None, help="checkpoint to continue from")
    ap.add_argument("--sample-tokens", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kind = model_zoo.task_kind(args.model)
    for name, value in DEFAULTS[kind].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("steps", "batch_size", "context", "layers", "d_model", "heads", "eval_every"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.d_model % args.heads:
        ap.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    if not 0.0 <= args.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    if args.lr <= 0:
        ap.error("--lr must be positive")
    if kind == "seq2seq" and args.data:
        ap.error(f"--data does not apply to --model {args.model}: it trains on the reverse task")
    return args


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


def main(argv=None):
    args = parse_args(argv)
    tt.manual_seed(args.seed)
    try:
        tt.device(args.device).xp  # fails early, with an install hint, if cuda is unusable
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"train: {e}")
    task = make_task(args)
    model, opt = build(args, task)
    config = dict(model.config.to_dict(), task=type(task).__name__)
    start, history = 0, {"train": [], "val": []}
    if args.resume:
        try:
            state = nn.load(args.resume)
        except (OSError, ValueError) as e:
            raise SystemExit(f"train: cannot resume from {args.resume}: {e}")
        if state.get("config") != config:
            raise SystemExit(f"train: {args.resume} was trained with a different model or sizes; "
                             "pass the same --model and size flags")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, history = state["step"], state["history"]
        if "rng" in state:  # continue the data stream (and dropout) where it stopped
            task.rng.bit_generator.state = state["rng"]["data"]
            if state["rng"].get("cpu") is not None:
                tt.random.generator(tt.device("cpu")).bit_generator.state = state["rng"]["cpu"]
    total = max(args.steps, start + 1)
    schedule = nn.schedules.cosine_with_warmup(min(args.warmup, total), total, min_ratio=0.1)
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    what = ("the reverse task" if isinstance(task, Reverse)
            else f"{args.data or 'Python stdlib source'} ({len(task.train_tokens) + len(task.val_tokens):,} bytes)")
    print(f"tinytensor {tt.__version__}: {args.model} ({model.num_parameters():,} parameters, "
          f"{args.layers} layers, d={args.d_model}) on {what}, batch {args.batch_size}, {args.device}")
    if start == 0:
        history["val"].append((0, task.evaluate(model, args.device)))
        print(f"step {0:5d}  {task.metric} {history['val'][-1][1]:.4f}")
    bar = progress(range(start + 1, args.steps + 1), "train")
    t0, seen = time.perf_counter(), 0
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = args.lr * schedule(step)
        batch = task.sample(args.device)
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        nn.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += batch["input_ids"].numel()
        value = loss.item()
        history["train"].append((step, value))
        bar.set(loss=value, tok_s=int(seen / (time.perf_counter() - t0)))
        if step % args.eval_every == 0 or step == args.steps:
            score = task.evaluate(model, args.device)
            history["val"].append((step, score))
            bar.write(f"step {step:5d}  train loss {value:.4f}  {task.metric} {score:.4f}")
            rng = {"data": task.rng.bit_generator.state,
                   "cpu": tt.random.generator(tt.device("cpu")).bit_generator.state}
            nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                     "config": config, "history": history, "rng": rng}, ckpt)
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


if __name__ == "__main__":
    main()
