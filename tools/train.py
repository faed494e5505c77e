"""The main job: train a small GPT on text, with no download.

    python tools/train.py                      # GPT-2-style model on Python's stdlib source
    python tools/train.py --model gpt1 --steps 300 --data notes.txt
    python tools/train.py --resume out/train/checkpoint.safetensors --steps 1200

By default it trains a 4-layer, 128-wide GPT-2-style model on byte tokens of the
standard library's source text (present on every machine with Python), with a progress
bar showing loss and tokens/s, a validation loss every --eval-every steps, an atomic
checkpoint, a generated sample at the end, and a loss-curve picture (SVG).
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import nn  # noqa: E402
import tinytensor as tt  # noqa: E402
from models.gpt import GPT, GPTConfig  # noqa: E402
from tools.corpus import decode, load_tokens  # noqa: E402
from tools.plot import write_curves_svg  # noqa: E402
from tools.progress import progress  # noqa: E402

MODELS = {"gpt2": "gpt2", "gpt1": "openai-gpt"}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default="gpt2", choices=sorted(MODELS),
                    help="architecture (more arrive with the models issue)")
    ap.add_argument("--data", default=None, help="a text file; default: Python's stdlib source")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--context", type=int, default=64, help="tokens per training sequence")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=2_000_000, help="corpus size cap")
    ap.add_argument("--out", default="out/train", help="directory for checkpoint, curve, log")
    ap.add_argument("--resume", default=None, help="checkpoint to continue from")
    ap.add_argument("--sample-tokens", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name in ("steps", "batch_size", "context", "layers", "d_model", "heads", "eval_every",
                 "eval_batches"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.d_model % args.heads:
        ap.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    if not 0.0 <= args.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    if args.lr <= 0:
        ap.error("--lr must be positive")
    return args


class Batches:
    """Random windows of a token stream: inputs and the same window as labels (the
    model shifts labels itself)."""

    def __init__(self, tokens, context, batch_size, seed):
        self.tokens, self.context, self.batch_size = tokens, context, batch_size
        self.rng = np.random.default_rng(seed)
        if len(tokens) <= context + 1:
            raise SystemExit(f"train: the data has {len(tokens)} tokens, fewer than --context {context}")

    def sample(self, device):
        starts = self.rng.integers(0, len(self.tokens) - self.context, self.batch_size)
        window = np.stack([self.tokens[s:s + self.context] for s in starts])
        return tt.tensor(window, device=device)


def evaluate(model, batches, n, device):
    model.eval()
    with tt.no_grad():
        losses = [model(x, labels=x).loss.item() for x in (batches.sample(device) for _ in range(n))]
    model.train()
    return float(np.mean(losses))


def build(args):
    config = GPTConfig(vocab_size=256, n_positions=args.context, n_embd=args.d_model,
                       n_layer=args.layers, n_head=args.heads, model_type=MODELS[args.model],
                       resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout)
    model = GPT(config).to(args.device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]   # norms and biases
    opt = nn.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}],
                         lr=args.lr, betas=(0.9, 0.95))
    return config, model, opt


def main(argv=None):
    args = parse_args(argv)
    tt.manual_seed(args.seed)
    try:
        tt.device(args.device).xp  # fails early, with an install hint, if cuda is unusable
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"train: {e}")
    tokens = load_tokens(args.data, args.max_bytes)
    split = int(len(tokens) * 0.9)
    train = Batches(tokens[:split], args.context, args.batch_size, args.seed)
    val = Batches(tokens[split:], args.context, args.batch_size, args.seed + 1)
    config, model, opt = build(args)
    start, history = 0, {"train": [], "val": []}
    if args.resume:
        state = nn.load(args.resume)
        if state.get("config") != config.to_dict():
            raise SystemExit(f"train: {args.resume} was trained with a different configuration "
                             f"({state.get('config')}); pass the same sizes")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, history = state["step"], state["history"]
    total = max(args.steps, start + 1)
    schedule = nn.schedules.cosine_with_warmup(min(args.warmup, total), total, min_ratio=0.1)
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    source = args.data or "Python stdlib source"
    print(f"tinytensor {tt.__version__}: {args.model} ({model.num_parameters():,} parameters, "
          f"{args.layers} layers, d={args.d_model}) on {source}: {len(tokens):,} byte tokens, "
          f"{args.batch_size}x{args.context} per step, {args.device}")
    if start == 0:
        first_val = evaluate(model, val, args.eval_batches, args.device)
        history["val"].append((0, first_val))
        print(f"step {0:5d}  val loss {first_val:.4f}")
    bar = progress(range(start + 1, args.steps + 1), "train")
    t0, seen = time.perf_counter(), 0
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = args.lr * schedule(step)
        x = train.sample(args.device)
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        nn.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += x.numel()
        value = loss.item()
        history["train"].append((step, value))
        bar.set(loss=value, tok_s=int(seen / (time.perf_counter() - t0)))
        if step % args.eval_every == 0 or step == args.steps:
            v = evaluate(model, val, args.eval_batches, args.device)
            history["val"].append((step, v))
            bar.write(f"step {step:5d}  train loss {value:.4f}  val loss {v:.4f}")
            nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                     "config": config.to_dict(), "history": history}, ckpt)
    curve = os.path.join(args.out, "loss.svg")
    write_curves_svg(curve, {"train": _smooth(history["train"]), "val": history["val"]},
                     title=f"{args.model} on {os.path.basename(source)}", ylabel="loss (nats/byte)")
    prompt = tt.tensor([list(b"def ")], device=args.device)
    sample = model.generate(prompt, args.sample_tokens, do_sample=True, temperature=0.8, top_k=40,
                            seed=args.seed)
    print("sample:\n" + decode(sample[0].tolist()))
    val_hist = history["val"]
    summary = {"val_loss_start": val_hist[0][1], "val_loss_end": val_hist[-1][1],
               "steps": args.steps, "seconds": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"val loss {summary['val_loss_start']:.3f} -> {summary['val_loss_end']:.3f}; "
          f"checkpoint {ckpt}; loss curve {curve}")
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
