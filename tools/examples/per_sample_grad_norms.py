"""Per-example gradient norms of a GPT-2-small-shaped models.GPT, by vmap(grad(loss)).

    PYTHONPATH=. python tools/examples/per_sample_grad_norms.py            # GPT-2 small's sizes
    PYTHONPATH=. python tools/examples/per_sample_grad_norms.py --small    # a tiny GPT, float64

The loss of ONE example is written as a function of the parameters (functional_call makes
the model stateless); grad differentiates it, and vmap runs that over the batch, sharing
the parameters (in_dims=None) and splitting the tokens (in_dims=0). The result holds one
gradient per example per parameter, the input of DP-SGD's clipping and of data attribution.
The same is computed by torch.func on a torch twin holding the same weights, and the norms
are compared.
"""
import numpy as np

from tinytensor.tools.examples._common import parse_args, timed, torch_check

GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
SMALL = dict(vocab_size=61, n_positions=12, n_embd=16, n_layer=2, n_head=2)


def norms_of(grads, lib):
    """Per-example Euclidean norm over every parameter's gradient: {name: (B, ...)} -> (B,)."""
    total = None
    for g in grads.values():
        s = (g.reshape(g.shape[0], -1) ** 2).sum(1)
        total = s if total is None else total + s
    return lib.sqrt(total)


def tinytensor_norms(model, ids):
    import tinytensor as tt
    from tinytensor.func import functional_call, grad, vmap
    params = {k: p.detach() for k, p in model.named_parameters()}

    def loss(params, one):                                   # one example: (T,) token ids
        return functional_call(model, params, (one[None],), {"labels": one[None]}).loss

    grads = vmap(grad(loss), in_dims=(None, 0))(params, tt.tensor(ids))   # {name: (B, *shape)}
    return norms_of(grads, tt).detach().numpy(), grads


def torch_norms(model, ids):
    import torch
    from torch.func import functional_call, grad, vmap
    params = {k: p.detach() for k, p in model.named_parameters()}

    def loss(params, one):
        return functional_call(model, params, (one[None], one[None]))

    grads = vmap(grad(loss), in_dims=(None, 0))(params, torch.tensor(ids))
    return norms_of(grads, torch).detach().numpy(), grads


def run(sizes=GPT2_SMALL, batch=4, seq=32, dtype="float32", check_torch=True, seed=0):
    """Returns {"norms": ours (B,), "torch": torch.func's (B,) or None, "seconds": ours,
    "torch_seconds", "params": parameter count}."""
    import tinytensor as tt
    from tinytensor import models
    from tinytensor.tools.lib import gpt_twin
    tt.manual_seed(seed)
    model = models.GPT(gpt_twin.gpt_config(**sizes)).to(getattr(tt, dtype))
    ids = np.random.default_rng(seed).integers(0, sizes["vocab_size"], (batch, seq))
    (ours, _), seconds = timed(lambda: tinytensor_norms(model, ids))

    def torch_norms_of_twin():
        twin = gpt_twin.twin_gpt(model)
        return lambda: torch_norms(twin, ids)[0]
    return torch_check({"norms": ours, "seconds": seconds, "params": gpt_twin.param_count(model)},
                       check_torch, torch_norms_of_twin)


def main(argv=None):
    args = parse_args("per_sample_grad_norms.py", __doc__, "a tiny GPT in float64 instead of GPT-2 small's sizes", [
        ("--batch", dict(type=int, default=4, help="examples (default: %(default)s)")),
        ("--seq", dict(type=int, default=32, help="tokens per example (default: %(default)s)"))], argv)
    r = run(SMALL if args.small else GPT2_SMALL, args.batch, args.seq,
            "float64" if args.small else "float32", not args.no_torch)
    print(f"models.GPT, {r['params'] / 1e6:.1f}M parameters, {args.batch} examples x {args.seq} tokens")
    print(f"per-example gradient norms (tt.func.vmap(grad)):  {np.array2string(r['norms'], precision=5)}"
          f"   {r['seconds']:.1f} s")
    if r["torch"] is not None:
        rel = np.abs(r["norms"] - r["torch"]).max() / np.abs(r["torch"]).max()
        print(f"per-example gradient norms (torch.func):          {np.array2string(r['torch'], precision=5)}"
              f"   {r['torch_seconds']:.1f} s   (largest relative difference {rel:.1e})")


if __name__ == "__main__":
    main()
