"""The Jacobian of one attention head's output with respect to its input tokens, drawn as
a token-by-token picture.

    PYTHONPATH=. python tools/examples/attention_jacobian.py                 # a GPT-2-small block's head 0
    PYTHONPATH=. python tools/examples/attention_jacobian.py --small --out j.svg

Head h of a causal self-attention layer maps the T input vectors x (T, C) to T output
vectors y (T, hs). jacrev gives all of dy/dx at once, a (T, hs, T, C) tensor: one
vector-Jacobian product per output number, batched by vmap. Cell (t, s) of the picture is
the size |dy_t / dx_s| (a Frobenius norm over hs x C): how much output token t moves when
input token s does. Causality shows as the empty upper triangle (t never reads s > t);
the diagonal and the first tokens stand out where the head attends. torch.func.jacrev on
a torch twin with the same weights gives the same Jacobian.
"""
import math

import numpy as np

from tinytensor.tools.examples._common import parse_args, timed, torch_check

GPT2_BLOCK = dict(n_embd=768, n_head=12)
SMALL = dict(n_embd=16, n_head=2)


def head_fn(block, head, lib):
    """x (T, C) -> head `head`'s output (T, hs) of `block`'s attention, after ln_1, as a
    function of `lib` (tinytensor or torch) on the block's own weights."""
    ln, c_attn = block.ln_1, block.attn.c_attn
    C = c_attn.weight.shape[1]
    n_head = block.attn.n_head
    hs = C // n_head

    def f(x):                                                   # (T, C)
        T = x.shape[0]
        h = ln(x)
        rows = [slice(j * C + head * hs, j * C + (head + 1) * hs) for j in range(3)]
        q, k, v = (h @ c_attn.weight[r].T + c_attn.bias[r] for r in rows)    # 3 x (T, hs)
        att = (q @ k.T) / math.sqrt(hs)                                       # (T, T)
        causal = lib.ones(T, T, dtype=lib.bool).tril()
        return att.masked_fill(~causal, float("-inf")).softmax(-1) @ v       # (T, hs)
    return f


def token_map(jac):
    """(T, hs, T, C) Jacobian -> (T, T) array of |dy_t / dx_s|."""
    j = np.asarray(jac)
    return np.sqrt((j ** 2).sum(axis=(1, 3)))


def _problem(sizes, seq, dtype, seed):
    import tinytensor as tt
    from tinytensor.models.gpt import Block
    from tinytensor.tools.lib import gpt_twin
    tt.manual_seed(seed)
    config = gpt_twin.gpt_config(n_positions=seq, **sizes)
    block = Block(config).to(getattr(tt, dtype))
    x = np.random.default_rng(seed).standard_normal((seq, sizes["n_embd"])).astype(dtype)   # (T, C)
    return block, config, x


def run(sizes=GPT2_BLOCK, seq=16, head=0, dtype="float32", check_torch=True, out=None, seed=0):
    """Returns {"map": ours (T, T), "jacobian": ours (T, hs, T, C), "torch": torch.func's
    (T, hs, T, C) or None, "seconds", "torch_seconds"}; with `out`, draws the map there (SVG)."""
    import tinytensor as tt
    from tinytensor.func import jacrev
    from tinytensor.tools.lib import gpt_twin
    from tinytensor.tools.lib.plot import write_heatmap_svg
    block, config, x = _problem(sizes, seq, dtype, seed)
    jac, seconds = timed(lambda: jacrev(head_fn(block, head, tt))(tt.tensor(x)).detach().numpy())

    def torch_jacobian():
        import torch
        from torch.func import jacrev as torch_jacrev
        twin = gpt_twin.twin_block(block, config)
        return lambda: torch_jacrev(head_fn(twin, head, torch))(torch.tensor(x)).detach().numpy()
    result = torch_check({"jacobian": jac, "map": token_map(jac), "seconds": seconds},
                         check_torch, torch_jacobian)
    if out:
        write_heatmap_svg(out, result["map"], title=f"|d head {head} output_t / d input_s|, GPT-2 block",
                          xlabel="input token s", ylabel="output token t", legend="Frobenius norm")
    return result


def main(argv=None):
    args = parse_args("attention_jacobian.py", __doc__, "a tiny block in float64 instead of GPT-2 small's", [
        ("--seq", dict(type=int, default=16, help="input tokens (default: %(default)s)")),
        ("--head", dict(type=int, default=0, help="which head (default: %(default)s)")),
        ("--out", dict(default="attention_jacobian.svg", help="the picture (default: %(default)s)"))], argv)
    r = run(SMALL if args.small else GPT2_BLOCK, args.seq, args.head, "float64" if args.small else "float32",
            not args.no_torch, args.out)
    T, hs, _, C = r["jacobian"].shape
    print(f"Jacobian of head {args.head}'s output ({T}, {hs}) w.r.t. its input ({T}, {C}): "
          f"{r['jacobian'].size:,} numbers, tt.func.jacrev {r['seconds']:.1f} s; picture: {args.out}")
    upper = r["map"][np.triu_indices(T, 1)]
    print(f"largest |dy_t/dx_s| above the diagonal (s > t, causally masked): {upper.max() if upper.size else 0:.3g}")
    if r["torch"] is not None:
        err = np.abs(r["jacobian"] - r["torch"]).max() / np.abs(r["torch"]).max()
        print(f"torch.func.jacrev: {r['torch_seconds']:.1f} s; largest relative difference {err:.1e}")


if __name__ == "__main__":
    main()
