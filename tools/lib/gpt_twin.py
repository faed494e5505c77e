"""A PyTorch twin of `models.GPT` (the GPT-2 configuration: pre-LayerNorm blocks, learned
positions, causal attention, tied LM head, next-token loss), with the same parameter names,
so that a models.GPT's own weights load into it and torch.func can be run on exactly the
model tinytensor.func runs on. Only what the function-transform examples and benchmarks
need: no dropout (build the tinytensor model with the *_pdrop fields at 0), no cache, no
attention mask."""
import math


def _classes():
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.n_head = n_head
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
            # attention spelled out, not F.scaled_dot_product_attention: torch's fused CPU
            # kernel has no forward-mode rule (jvp, hvp) and no batching rule (vmap loops)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)   # (B, nh, T, T)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            y = att.masked_fill(~causal, float("-inf")).softmax(-1) @ v      # (B, nh, T, hs)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head, n_inner, act, eps):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd, eps=eps)
            self.attn = Attention(n_embd, n_head)
            self.ln_2 = nn.LayerNorm(n_embd, eps=eps)
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(n_embd, n_inner)
            self.mlp.c_proj = nn.Linear(n_inner, n_embd)
            self.act = act

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp.c_proj(self.act(self.mlp.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self, c, act):
            super().__init__()
            self.wte = nn.Embedding(c.vocab_size, c.n_embd)
            self.wpe = nn.Embedding(c.n_positions, c.n_embd)
            self.h = nn.ModuleList([Block(c.n_embd, c.n_head, c.n_inner or 4 * c.n_embd, act,
                                          c.layer_norm_epsilon) for _ in range(c.n_layer)])
            self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)

        def forward(self, input_ids, labels):
            T = input_ids.shape[1]
            x = self.wte(input_ids) + self.wpe(torch.arange(T))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)                 # (B, T, vocab)
            return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                   labels[:, 1:].reshape(-1), ignore_index=-100)

    return Block, GPT


def _activation(name):
    from torch import nn
    if name == "gelu":
        return nn.GELU()
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return nn.GELU(approximate="tanh")
    raise ValueError(f"gpt_twin: activation {name!r} has no twin here")


def _load(theirs, ours):
    """Our state into the torch module (same names, same layouts), at our dtype."""
    import torch
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state, strict=True)
    theirs.to(next(iter(state.values())).dtype)
    return theirs


def twin_gpt(model):
    """A torch GPT holding `model`'s (a pre-LN models.GPT's) weights."""
    c = model.config
    if not c.pre_ln or any((c.resid_pdrop, c.embd_pdrop, c.attn_pdrop)):
        raise ValueError("twin_gpt: a GPT-2 configuration without dropout only")
    _, GPT = _classes()
    return _load(GPT(c, _activation(c.activation_function)), model)


def twin_block(block, config):
    """A torch Block holding `block`'s (a models.gpt.Block's) weights."""
    Block, _ = _classes()
    c = config
    return _load(Block(c.n_embd, c.n_head, c.n_inner or 4 * c.n_embd, _activation(c.activation_function),
                       c.layer_norm_epsilon), block)


def gpt_config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12):
    """A GPT-2 configuration (GPT-2 small's sizes by default) without dropout, for
    function transforms: per-example gradients of a model with dropout would need
    randomness="different" and could not be checked against torch draw for draw."""
    from tinytensor.models.gpt import GPTConfig
    return GPTConfig(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                     n_head=n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def param_count(model):
    return sum(math.prod(p.shape) for p in model.parameters())
