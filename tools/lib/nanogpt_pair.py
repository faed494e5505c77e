"""A nanoGPT-style model (Karpathy's nanoGPT `model.py` and its training iteration), written
once per library with the same module names, so that one state (torch's initialisation)
loads into both: token and position embeddings, pre-LayerNorm blocks of causal
scaled_dot_product_attention (one c_attn Linear for q, k and v) and an MLP with the exact
GELU (nn.GELU()), a final LayerNorm and an lm_head tied to the token embedding. The
iteration is nanoGPT's: micro-batches with the loss divided by their count (gradient
accumulation), clip_grad_norm_(1.0), AdamW over two groups (weight decay on the matrices
and embeddings, none on biases and LayerNorm weights), zero_grad(set_to_none=True)."""
import math

CONFIG = dict(vocab=256, block=64, n_layer=4, n_head=4, n_embd=128)
MICRO, ACCUM = 8, 2          # batch of each micro-batch, micro-batches per iteration
LR, WEIGHT_DECAY, BETAS, CLIP = 6e-4, 0.1, (0.9, 0.95), 1.0


def _define(nn, F):
    """The model classes for one library (`nn` and `F` are torch.nn / torch.nn.functional, or
    tinytensor's nn / tinytensor.functional): their APIs read alike here."""

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n_head = c["n_head"]
            self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
            self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(c["n_embd"]), Attention(c)
            self.ln_2, self.mlp = nn.LayerNorm(c["n_embd"]), MLP(c)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["n_embd"])
            self.wpe = nn.Embedding(c["block"], c["n_embd"])
            self.h = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
            self.ln_f = nn.LayerNorm(c["n_embd"])
            self.lm_head = nn.Linear(c["n_embd"], c["vocab"], bias=False)
            self.lm_head.weight = self.wte.weight          # weight tying, as nanoGPT

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)

    return GPT


def optimizer(model, AdamW):
    """nanoGPT's configure_optimizers: decay on parameters of 2 or more dims."""
    params = [p for _, p in model.named_parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return AdamW(groups, lr=LR, betas=BETAS)


def iteration(model, opt, xs, ys, clip):
    """One training iteration over the micro-batches xs, ys; the last micro-batch's loss."""
    for x, y in zip(xs, ys):
        loss = model(x, y)
        (loss / len(xs)).backward()
    clip(model.parameters(), CLIP)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def build_pair(config=None, micro=MICRO, accum=ACCUM, batches=4, seed=0):
    """(ours, theirs, batches): ours/theirs = (model, optimizer, clip, to_tensor) per library,
    the same weights (torch's nanoGPT initialisation, copied); batches: `batches` lists of
    `accum` (x, y) micro-batches of random tokens, y = x shifted by one."""
    import numpy as np
    import torch
    from tinytensor import nn as tt_nn
    import tinytensor as tt
    import tinytensor.functional as tt_F

    c = dict(CONFIG, **(config or {}))
    torch.manual_seed(seed)
    theirs = _define(torch.nn, torch.nn.functional)(c)
    for name, p in theirs.named_parameters():   # nanoGPT's _init_weights and c_proj scaling
        with torch.no_grad():
            if name.endswith("bias"):
                p.zero_()
            elif "ln" in name:
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * c["n_layer"]) if name.endswith("c_proj.weight") else 0.02
                p.normal_(0.0, std)
    ours = _define(tt_nn, tt_F)(c)
    mine = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        mine[name].data[...] = p.detach().numpy()
    assert set(mine) == {n for n, _ in theirs.named_parameters()}
    rng = np.random.default_rng(seed)
    data = []
    for _ in range(batches):
        tokens = rng.integers(0, c["vocab"], (accum, micro, c["block"] + 1))
        data.append([(t[:, :-1], t[:, 1:]) for t in tokens])
    lib_tt = (ours, optimizer(ours, tt_nn.optim.AdamW), tt_nn.clip_grad_norm_, tt.tensor)
    lib_th = (theirs, optimizer(theirs, torch.optim.AdamW), torch.nn.utils.clip_grad_norm_, torch.tensor)
    return lib_tt, lib_th, data


def stepper(lib, data, compiled=False, backend=None):
    """A function running the next iteration (cycling through `data`), returning its loss as
    a float; compiled=True wraps the iteration in tt.compile (`backend`: its default, else
    the one named)."""
    model, opt, clip, tensor = lib
    batches = [([tensor(x) for x, _ in b], [tensor(y) for _, y in b]) for b in data]
    run = lambda model, opt, xs, ys: iteration(model, opt, xs, ys, clip)   # noqa: E731
    if compiled:
        import tinytensor as tt
        run = tt.compile(run, backend=backend)
    state = {"k": 0}

    def step():
        xs, ys = batches[state["k"] % len(batches)]
        state["k"] += 1
        return float(run(model, opt, xs, ys).detach())
    return step
