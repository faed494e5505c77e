"""Training-step benchmark (`python tools/bench.py train`): a GPT-2-style model, 4 layers,
d=256, 4 heads, context 128, batch 8, vocabulary 1024. tinytensor's models.GPT against
transformers' GPT2LMHeadModel in PyTorch eager mode with identical weights, both on the
same number of threads: forward + backward + AdamW, and forward only."""

CONFIG = dict(vocab_size=1024, n_positions=128, n_embd=256, n_layer=4, n_head=4,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
BATCH, CONTEXT = 8, 128


def build_pair():
    import numpy as np
    import torch
    import transformers
    from tinytensor import nn
    import tinytensor as tt
    from tinytensor import models
    from tinytensor.models.gpt_hf import _to_ours

    torch.manual_seed(0)
    # GPT2Config's special tokens default to GPT-2's 50256, outside this vocabulary; the last id
    # plays their part here (the benchmark never generates, so which id it is does not matter)
    last = CONFIG["vocab_size"] - 1
    ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(  # torch eager (sdpa attention)
        **CONFIG, bos_token_id=last, eos_token_id=last))
    # the class name does not tell transformers which loss it computes; name it, as
    # GPT2LMHeadModel would have defaulted to after a warning
    ref.loss_type = "ForCausalLM"
    ours = models.GPT(models.GPTConfig(**CONFIG))
    state = {}
    for name, v in ref.state_dict().items():
        mapped = _to_ours(name, v.detach().numpy(), CONFIG)
        if mapped and not name.endswith((".attn.bias", ".attn.masked_bias")):
            state[mapped[0]] = tt.tensor(np.ascontiguousarray(mapped[1]))
    ours.load_state_dict(state)
    ids = np.random.default_rng(0).integers(0, CONFIG["vocab_size"], (BATCH, CONTEXT))
    return ours, ref, tt.tensor(ids), torch.tensor(ids), nn, torch, tt


def lm_step(model, opt, ids):
    """One forward + backward + optimizer step of a causal LM; tinytensor's and torch's
    models and optimizers read alike here, so both libraries run this same function."""
    loss = model(ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def train_cases():
    ours, ref, ids_tt, ids_th, nn, torch, tt = build_pair()
    opt_tt = nn.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_th = torch.optim.AdamW(ref.parameters(), lr=1e-4)

    def step_tt():
        lm_step(ours, opt_tt, ids_tt)

    def step_th():
        lm_step(ref, opt_th, ids_th)

    def fwd_tt():
        with tt.no_grad():
            ours(ids_tt)

    def fwd_th():
        with torch.no_grad():
            ref(ids_th)

    yield "GPT-2-style 4x256, B=8 T=128: fwd+bwd+AdamW", step_tt, step_th
    yield "GPT-2-style 4x256, B=8 T=128: forward only", fwd_tt, fwd_th
