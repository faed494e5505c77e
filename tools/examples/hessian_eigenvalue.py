"""The top eigenvalue of the Hessian of one Transformer block's loss with respect to the
block's parameters, by power iteration on Hessian-vector products.

    PYTHONPATH=. python tools/examples/hessian_eigenvalue.py            # a GPT-2-small block (7.1M parameters)
    PYTHONPATH=. python tools/examples/hessian_eigenvalue.py --small    # a tiny block, float64

The Hessian of a 7M-parameter block has 5e13 entries; power iteration only ever needs its
product with a vector, which forward-over-reverse AD (jvp of grad) computes for about the
cost of three backward passes, without forming it. Starting from a random direction v,
repeat v <- Hv / |Hv|; <v, Hv> converges to the eigenvalue of largest magnitude (the
"sharpness" the Adam-vs-SGD Hessian studies track). The same iteration from the same start
runs in torch.func (jvp of grad) on a torch twin of the block, and the estimates are compared.
"""
import numpy as np

from tinytensor.tools.examples._common import parse_args, timed, torch_check

GPT2_BLOCK = dict(n_embd=768, n_head=12)
SMALL = dict(n_embd=16, n_head=2)


def _dot(a, b):
    return sum((a[k] * b[k]).sum() for k in a)


def power_iteration(hvp, v, steps):
    """hvp: {name: tensor} -> {name: tensor}, H times its argument; v: the start (any
    library's tensors). Returns the estimates <v, Hv> of each step and the last vector."""
    norm = float(_dot(v, v)) ** 0.5
    v = {k: x / norm for k, x in v.items()}
    estimates = []
    for _ in range(steps):
        hv = hvp(v)
        estimates.append(float(_dot(v, hv)))
        norm = float(_dot(hv, hv)) ** 0.5
        v = {k: x / norm for k, x in hv.items()}
    return estimates, v


def _problem(sizes, batch, seq, dtype, seed):
    import tinytensor as tt
    from tinytensor.models.gpt import Block
    from tinytensor.tools.lib import gpt_twin
    tt.manual_seed(seed)
    config = gpt_twin.gpt_config(n_positions=seq, **sizes)
    block = Block(config).to(getattr(tt, dtype))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, seq, sizes["n_embd"])).astype(dtype)       # (B, T, C)
    y = rng.standard_normal((batch, seq, sizes["n_embd"])).astype(dtype)       # regression target
    v0 = {k: rng.standard_normal(p.shape).astype(dtype) for k, p in block.named_parameters()}
    return block, config, x, y, v0


def tinytensor_hvp(block, x, y):
    """v -> H v at the block's parameters, H the Hessian of mean((block(x) - y)^2)."""
    import tinytensor as tt
    from tinytensor.func import functional_call, hvp
    params = {k: p.detach() for k, p in block.named_parameters()}
    x, y = tt.tensor(x), tt.tensor(y)

    def loss(params):
        return ((functional_call(block, params, (x,)) - y) ** 2).mean()

    return lambda v: hvp(loss, (params,), (v,))[1][0]   # forward-over-reverse: jvp of grad


def torch_hvp(block, x, y):
    """The same with torch.func, which has no hvp of its own: jvp of grad, as tt.func.hvp is."""
    import torch
    from torch.func import functional_call, grad, jvp
    params = {k: p.detach() for k, p in block.named_parameters()}
    x, y = torch.tensor(x), torch.tensor(y)

    def loss(params):
        return ((functional_call(block, params, (x,)) - y) ** 2).mean()

    return lambda v: jvp(grad(loss), (params,), (v,))[1]


def run(sizes=GPT2_BLOCK, batch=2, seq=32, steps=20, dtype="float32", check_torch=True, seed=0):
    """Returns {"estimates": ours per step, "torch": torch.func's per step or None,
    "seconds", "torch_seconds", "params"}."""
    import tinytensor as tt
    from tinytensor.tools.lib import gpt_twin
    block, config, x, y, v0 = _problem(sizes, batch, seq, dtype, seed)
    (ours, _), seconds = timed(lambda: power_iteration(
        tinytensor_hvp(block, x, y), {k: tt.tensor(a) for k, a in v0.items()}, steps))

    def torch_estimates():
        import torch
        twin = gpt_twin.twin_block(block, config)
        return lambda: power_iteration(torch_hvp(twin, x, y),
                                       {k: torch.tensor(a) for k, a in v0.items()}, steps)[0]
    return torch_check({"estimates": ours, "seconds": seconds, "params": gpt_twin.param_count(block)},
                       check_torch, torch_estimates)


def main(argv=None):
    args = parse_args("hessian_eigenvalue.py", __doc__, "a tiny block in float64 instead of GPT-2 small's", [
        ("--steps", dict(type=int, default=20, help="power-iteration steps (default: %(default)s)")),
        ("--batch", dict(type=int, default=2, help="sequences in the loss (default: %(default)s)")),
        ("--seq", dict(type=int, default=32, help="tokens per sequence (default: %(default)s)"))], argv)
    r = run(SMALL if args.small else GPT2_BLOCK, args.batch, args.seq, args.steps,
            "float64" if args.small else "float32", not args.no_torch)
    print(f"one GPT-2 block, {r['params'] / 1e6:.2f}M parameters; loss mean((block(x) - y)^2) over "
          f"{args.batch} x {args.seq} tokens")
    print(f"top Hessian eigenvalue, tt.func.hvp, {args.steps} steps:   {r['estimates'][-1]:.6g}"
          f"   ({r['seconds']:.1f} s; last steps {', '.join(f'{e:.6g}' for e in r['estimates'][-3:])})")
    if r["torch"] is not None:
        rel = abs(r["estimates"][-1] - r["torch"][-1]) / abs(r["torch"][-1])
        print(f"top Hessian eigenvalue, torch.func:                {r['torch'][-1]:.6g}"
              f"   ({r['torch_seconds']:.1f} s; relative difference {rel:.1e})")


if __name__ == "__main__":
    main()
