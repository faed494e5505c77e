"""Function-transform benchmarks (`python tools/bench.py func`): tt.func against torch.func
on the CPU, float32, same weights, measured in the same run.

  per-sample gradients, vmap(grad(loss)) with the parameters shared (in_dims=None):
    a small MLP (784-256-256-10, batch 64) and a 2-layer GPT (models.GPT, C=128, 4 heads,
    vocab 256; batch 32 x 16 tokens) against torch.func on a twin with the same weights;
    and the same per-example gradients by a Python loop of grad calls, stacked (vmap's gain)
  hvp of a Transformer block: tt.func.hvp (forward-over-reverse, jvp of grad) at the
    parameters of one GPT-2 block (C=256, 4 heads; 4 x 32 tokens) against torch.func's jvp(grad)

Each round times every variant round-robin (median of --repeat calls after warm-up); the
ratio tinytensor / torch.func (below 1.0: tinytensor is faster) is reported as the median
over --rounds rounds with its range, so a loaded machine shows as a wide range.
"""
import numpy as np

FULL = dict(mlp=(784, 256, 256, 10), mlp_batch=64,
            gpt=dict(vocab_size=256, n_positions=32, n_embd=128, n_layer=2, n_head=4), gpt_batch=32, gpt_seq=16,
            block=dict(n_embd=256, n_head=4), block_batch=4, block_seq=32)
TINY = dict(mlp=(12, 16, 16, 5), mlp_batch=4,
            gpt=dict(vocab_size=31, n_positions=6, n_embd=8, n_layer=2, n_head=2), gpt_batch=3, gpt_seq=6,
            block=dict(n_embd=8, n_head=2), block_batch=2, block_seq=5)


def _stack_dicts(dicts, lib):
    return {k: lib.stack([d[k] for d in dicts]) for k in dicts[0]}


def _agree(name, ours, theirs, rtol=2e-3, atol=1e-5):
    """A benchmark compares equal work: the two results must agree before any timing."""
    for k in theirs:
        a, b = np.asarray(ours[k].detach().numpy()), theirs[k].detach().numpy()
        if not np.allclose(a, b, rtol=rtol, atol=atol * max(1.0, np.abs(b).max())):
            raise AssertionError(f"bench.py func: {name}: {k} differs from torch.func "
                                 f"(largest difference {np.abs(a - b).max():.3g})")


def mlp_case(sizes, batch, seed=0):
    """(name, {variant: fn}) for per-sample gradients of an MLP's cross-entropy."""
    import torch
    import tinytensor.func as ttf
    import tinytensor.functional as F
    from tinytensor import nn
    ours, theirs = _mlp(nn, sizes), _mlp(torch.nn, sizes)
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch)

    def tt_loss(params, xi, yi):
        return F.cross_entropy(ttf.functional_call(ours, params, (xi[None],)), yi[None])

    def th_loss(params, xi, yi):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(theirs, params, (xi[None],)), yi[None])

    return _per_sample(f"per-sample grads, MLP {'-'.join(map(str, sizes))}, batch {batch}",
                       ours, theirs, tt_loss, th_loss, (x, y))


def _mlp(nn, sizes):
    """Linear layers with tanh between them, in either library (same state-dict names)."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(a, b)] + ([nn.Tanh()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


def gpt_case(config, batch, seq, seed=0):
    import torch
    import tinytensor as tt
    import tinytensor.func as ttf
    from tinytensor import models
    from tinytensor.tools.lib import gpt_twin
    tt.manual_seed(seed)
    ours = models.GPT(gpt_twin.gpt_config(**config))
    theirs = gpt_twin.twin_gpt(ours)
    ids = np.random.default_rng(seed).integers(0, config["vocab_size"], (batch, seq))

    def tt_loss(params, one):
        return ttf.functional_call(ours, params, (one[None],), {"labels": one[None]}).loss

    def th_loss(params, one):
        return torch.func.functional_call(theirs, params, (one[None], one[None]))

    return _per_sample(f"per-sample grads, GPT {config['n_layer']} layers C={config['n_embd']}, "
                       f"batch {batch}x{seq}", ours, theirs, tt_loss, th_loss, (ids,))


def _per_sample(name, ours, theirs, tt_loss, th_loss, data):
    import torch
    import tinytensor as tt
    import tinytensor.func as ttf
    tt_params = {k: p.detach() for k, p in ours.named_parameters()}
    th_params = {k: p.detach() for k, p in theirs.named_parameters()}
    tt_data = [tt.tensor(a) for a in data]
    th_data = [torch.tensor(a) for a in data]
    dims = (None,) + (0,) * len(data)
    tt_vmapped = ttf.vmap(ttf.grad(tt_loss), in_dims=dims)
    th_vmapped = torch.func.vmap(torch.func.grad(th_loss), in_dims=dims)
    tt_grad = ttf.grad(tt_loss)

    def tinytensor():
        return tt_vmapped(tt_params, *tt_data)

    def torch_func():
        return th_vmapped(th_params, *th_data)

    def loop():   # what vmap replaces: one grad call per example, stacked
        n = tt_data[0].shape[0]
        return _stack_dicts([tt_grad(tt_params, *(d[i] for d in tt_data)) for i in range(n)], tt)

    expected = torch_func()
    _agree(name, tinytensor(), expected)
    _agree(name + " (loop)", loop(), expected)
    return name, {"tinytensor": tinytensor, "torch.func": torch_func, "loop": loop}


def block_hvp_case(sizes, batch, seq, seed=0):
    import torch
    import tinytensor as tt
    import tinytensor.func as ttf
    from tinytensor.models.gpt import Block
    from tinytensor.tools.lib import gpt_twin
    tt.manual_seed(seed)
    config = gpt_twin.gpt_config(n_positions=seq, **sizes)
    ours = Block(config)
    theirs = gpt_twin.twin_block(ours, config)
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal((batch, seq, sizes["n_embd"])).astype(np.float32) for _ in range(2))
    v = {k: rng.standard_normal(p.shape).astype(np.float32) for k, p in ours.named_parameters()}
    tt_params = {k: p.detach() for k, p in ours.named_parameters()}
    th_params = {k: p.detach() for k, p in theirs.named_parameters()}
    tt_v = {k: tt.tensor(a) for k, a in v.items()}
    th_v = {k: torch.tensor(a) for k, a in v.items()}
    tx, ty, hx, hy = tt.tensor(x), tt.tensor(y), torch.tensor(x), torch.tensor(y)

    def tt_loss(params):
        return ((ttf.functional_call(ours, params, (tx,)) - ty) ** 2).mean()

    def th_loss(params):
        return ((torch.func.functional_call(theirs, params, (hx,)) - hy) ** 2).mean()

    def tinytensor():
        return ttf.hvp(tt_loss, (tt_params,), (tt_v,))[1][0]

    def torch_func():
        return torch.func.jvp(torch.func.grad(th_loss), (th_params,), (th_v,))[1]

    name = f"hvp, GPT-2 block C={sizes['n_embd']}, {batch}x{seq} tokens"
    _agree(name, tinytensor(), torch_func())
    return name, {"tinytensor": tinytensor, "torch.func": torch_func}


def cases(tiny=False):
    s = TINY if tiny else FULL
    yield mlp_case(s["mlp"], s["mlp_batch"])
    yield gpt_case(s["gpt"], s["gpt_batch"], s["gpt_seq"])
    yield block_hvp_case(s["block"], s["block_batch"], s["block_seq"])


def measure(repeat, rounds, tiny=False, out=print):
    """Times every case; returns rows (name, {variant: [seconds per round]})."""
    import warnings
    from tinytensor.tools.lib.timing import median_n
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch.func's "no batching rule" performance notes
        for name, fns in cases(tiny):
            names = list(fns)
            per_round = {n: [] for n in names}
            for _ in range(rounds):
                for n, t in zip(names, median_n([fns[n] for n in names], repeat)):
                    per_round[n].append(t)
            rows.append((name, per_round))
            out(summary_line(name, per_round))
    return rows


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def ratio_text(num, den):
    """median ratio (min-max) over rounds of num[i] / den[i]."""
    r = [a / b for a, b in zip(num, den)]
    return f"{_median(r):.2f} ({min(r):.2f}-{max(r):.2f})"


def summary_line(name, t):
    line = (f"{name:58s} tinytensor {_median(t['tinytensor']) * 1e3:9.1f} ms   torch.func "
            f"{_median(t['torch.func']) * 1e3:9.1f} ms   ratio {ratio_text(t['tinytensor'], t['torch.func'])}")
    if "loop" in t:
        line += f"   loop {_median(t['loop']) * 1e3:9.1f} ms   loop/vmap {ratio_text(t['loop'], t['tinytensor'])}"
    return line


def markdown(rows):
    lines = ["| benchmark | tinytensor (ms) | torch.func (ms) | tinytensor / torch.func (range) "
             "| Python loop (ms) | loop / vmap (range) |", "|---|---:|---:|---:|---:|---:|"]
    for name, t in rows:
        loop = (f"{_median(t['loop']) * 1e3:.1f} | {ratio_text(t['loop'], t['tinytensor'])}"
                if "loop" in t else "– | –")
        lines.append(f"| {name} | {_median(t['tinytensor']) * 1e3:.1f} | {_median(t['torch.func']) * 1e3:.1f} "
                     f"| {ratio_text(t['tinytensor'], t['torch.func'])} | {loop} |")
    return "\n".join(lines)
