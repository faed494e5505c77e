"""Will a tools/train.py configuration fit in memory? An estimate made before anything is built.

One training step of the small models holds, besides the interpreter (~150 MB):
  - the weights, their gradients and AdamW's two moments: 4 x 4 bytes per parameter;
  - per layer, about 12 activations of batch x context x d_model floats kept for backward;
  - the attention scores and the causal mask of one layer: about batch x heads x context^2.
The coefficients were fitted on the GPT-2 default (batch 16, d 128, 4 layers, 4 heads):
peak RSS of one step 274 MB at --context 256 and 883 MB at 1024 (2026-12-01, 2-core EPYC).
The encoder-decoders train on short reversed sequences, so --context only sizes their
position table there.
"""

BASE = 150e6        # bytes: Python, NumPy, tinytensor
ACT_PER_LAYER = 12  # batch x context x d_model floats per layer
SCORES = 1.2        # batch x heads x context^2 floats, over all layers at the peak
FLOAT = 4


def parameters(vocab, context, d, layers):
    """About the parameter count of the small decoder/encoder models train.py builds."""
    return 12 * layers * d * d + (vocab + context) * d


def estimate(kind, vocab, context, batch, d, layers, heads):
    """{part: bytes} of one training step."""
    seq = context if kind != "seq2seq" else 16  # the reverse task's sequences are short
    return {"weights, gradients and AdamW state": 4 * FLOAT * parameters(vocab, context, d, layers),
            "activations": ACT_PER_LAYER * layers * batch * seq * d * FLOAT,
            "attention scores": SCORES * batch * heads * seq * seq * FLOAT,
            "interpreter": BASE}


def available():
    """Bytes this process may still allocate (Linux's MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def refusal(args, kind, vocab, avail=None):
    """None if the configuration fits, else one sentence naming the flag to lower."""
    avail = available() if avail is None else avail
    if avail is None:
        return None
    sizes = dict(vocab=vocab, context=args.context, batch=args.batch_size, d=args.d_model,
                 layers=args.layers, heads=args.heads)
    parts = estimate(kind, **sizes)
    need = sum(parts.values())
    if need <= avail:
        return None
    biggest = max(parts, key=parts.get)
    flag = {"attention scores": "context", "activations": "batch_size"}.get(biggest, "d_model")
    if kind == "seq2seq" and flag != "d_model":
        flag = "batch_size"
    if flag == "d_model" and args.context > 12 * args.layers * args.d_model:
        flag = "context"  # the position table dominates the weights
    best = _largest(kind, sizes, flag, avail)
    hint = (f"use --{flag.replace('_', '-')} {best} or less" if best
            else f"lower --{flag.replace('_', '-')}")
    others = ", ".join(f"--{k.replace('_', '-')} {getattr(args, k)}" for k in
                       ("context", "batch_size", "d_model", "layers", "heads") if k != flag)
    return (f"--{flag.replace('_', '-')} {getattr(args, flag)} (with {others}) needs about "
            f"{_gb(need)} for one training step ({biggest} {_gb(parts[biggest])}), but this "
            f"machine has {_gb(avail)} available; {hint}")


def _largest(kind, sizes, flag, avail):
    """The largest value of `flag` (the others fixed) whose estimate fits, or 0."""
    key = {"batch_size": "batch", "d_model": "d"}.get(flag, flag)
    lo, hi = 0, sizes[key]
    while lo < hi:  # bisection: the estimate grows with every size
        mid = (lo + hi + 1) // 2
        if sum(estimate(kind, **dict(sizes, **{key: mid})).values()) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _gb(n):
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.0f} MB"
