"""Fit a small MLP to a noisy 2-D spiral with tinytensor's autograd and watch the loss fall.

    python tools/train_mlp.py [--steps 400] [--hidden 64] [--lr 0.01] [--device cpu]

Everything here is written against the engine directly (no nn/ yet): parameters are
leaf tensors, the loss is cross-entropy, and Adam updates the arrays in place under
no_grad. It prints the loss every 50 steps and the final training accuracy.
"""
import argparse
import math

import numpy as np

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.tools.lib import options
from tinytensor.tools.lib.progress import progress


def spiral(n_per_class, classes, rng):
    """Points on `classes` interleaved spiral arms, with noise."""
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        theta = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], 1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


def init_mlp(sizes, device):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        w = (tt.rand(fan_in, fan_out, device=device) * 2 - 1) * bound
        b = tt.zeros(fan_out, device=device)
        params += [w.requires_grad_(), b.requires_grad_()]
    return params


def mlp(params, x):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = F.gelu(h)
    return h


def adam_step(params, state, lr, t, b1=0.9, b2=0.999, eps=1e-8):
    with tt.no_grad():
        for p, (m, v) in zip(params, state):
            g = p.grad.data
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            step = lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
            p.data -= step.astype(p.data.dtype)
            p._version[0] += 1
            p.grad = None


def parser():
    ap = argparse.ArgumentParser(prog="train_mlp.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400, help="Adam steps (default: %(default)s)")
    ap.add_argument("--hidden", type=int, default=64,
                    help="width of the two hidden layers (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=0.01, help="learning rate (default: %(default)s)")
    ap.add_argument("--classes", type=int, default=3,
                    help="spiral arms, one class each (default: %(default)s)")
    options.add_device(ap)
    options.add_seed(ap, "the points and the initial weights")
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    if args.steps < 1 or args.hidden < 1 or args.classes < 2:
        ap.error("--steps and --hidden must be positive and --classes at least 2")

    tt.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    xs, ys = spiral(200, args.classes, rng)
    x = tt.tensor(xs, device=args.device)
    y = tt.tensor(ys, device=args.device)
    params = init_mlp([2, args.hidden, args.hidden, args.classes], args.device)
    state = [(p.device.xp.zeros_like(p.data), p.device.xp.zeros_like(p.data)) for p in params]

    print(f"tinytensor {tt.__version__}: MLP 2-{args.hidden}-{args.hidden}-{args.classes} on "
          f"{len(xs)} spiral points, {args.steps} Adam steps on {args.device}")
    first = None
    bar = progress(range(1, args.steps + 1), "train")
    for step in bar:
        loss = F.cross_entropy(mlp(params, x), y)
        loss.backward()
        adam_step(params, state, args.lr, step)
        value = loss.item()
        first = value if first is None else first
        bar.set(loss=value)
        if step % 50 == 0 or step == 1:
            bar.write(f"step {step:4d}  loss {value:.4f}")
    with tt.no_grad():
        acc = (mlp(params, x).argmax(-1) == y).float().mean().item()
    print(f"loss {first:.4f} -> {value:.4f}   training accuracy {acc * 100:.1f}%")
    return first, value, acc


if __name__ == "__main__":
    main()
