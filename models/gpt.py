"""GPT-1 and GPT-2 as two configurations of one decoder-only model.

    GPT-1 (openai-gpt): Post-LN blocks  x = ln_1(x + attn(x)); x = ln_2(x + mlp(x)), no final norm
    GPT-2 (gpt2):       Pre-LN blocks   x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), final ln_f

Both: learned positions, causal multi-head attention with a fused qkv projection
(`c_attn`), a GELU MLP (`c_fc`, `c_proj`), and an LM head tied to the token embedding.
Parameter names follow HuggingFace's GPT2Model/OpenAIGPTModel, so their checkpoints load
by name (their Conv1D weights are stored transposed; models/hf.py handles that).
"""
import math
from dataclasses import dataclass

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .activations import activation
from .config import ModelConfig, model_config
from .decoder import (DecoderCache, GenerateMixin, GradientCheckpointingMixin, causal_padding_mask,
                      next_token_loss)
from .hf import SaveHF
from .init import normal_init
from .output import ModelOutput


@dataclass
class GPTConfig(ModelConfig):
    """Field names are those of HuggingFace's GPT2Config (and OpenAIGPTConfig)."""
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int = None                  # MLP width; None means 4 * n_embd
    activation_function: str = "gelu_new"  # gelu_new = tanh approximation (GPT-2); 'gelu' exact
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    model_type: str = "gpt2"             # 'gpt2' (Pre-LN, final norm) or 'openai-gpt' (Post-LN)
    bos_token_id: int = None
    eos_token_id: int = None
    tie_word_embeddings: bool = True

    @property
    def pre_ln(self):
        return self.model_type == "gpt2"

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        if d.get("model_type") == "openai-gpt" and "afn" in d:
            d["activation_function"] = d["afn"]
        return super().from_dict(d)

    def to_dict(self):
        d = super().to_dict()
        if self.model_type == "openai-gpt":
            d["afn"] = d.pop("activation_function")
        return d


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.n_embd % config.n_head:
            raise ValueError(f"GPT: n_embd {config.n_embd} is not divisible by n_head {config.n_head}")
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = config.attn_pdrop
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x, attention_mask=None, cache=None):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)                       # 3 x (B, T, C)
        q, k, v = (t.reshape(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if cache is not None:
            k, v = cache.update(k, v)                                   # (B, nh, past+T, hs)
        S = k.shape[2]
        mask = causal_padding_mask(T, S, attention_mask, x.device, "GPT")  # (B|1, 1, T, S) bool
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)                           # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        inner = config.n_inner or 4 * config.n_embd
        self.c_fc = nn.Linear(config.n_embd, inner)
        self.c_proj = nn.Linear(inner, config.n_embd)
        self.act = activation(config.activation_function, "GPT", "activation_function")
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.pre_ln = config.pre_ln
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x, attention_mask=None, cache=None):
        if self.pre_ln:                                                  # GPT-2
            x = x + self.attn(self.ln_1(x), attention_mask, cache)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, attention_mask, cache))           # GPT-1
        return self.ln_2(x + self.mlp(x))


class GPT(GenerateMixin, GradientCheckpointingMixin, SaveHF, nn.Module):
    """Decoder-only Transformer. `forward(input_ids, attention_mask=None, labels=None)`
    returns `.logits` (B, T, vocab) and, with labels, `.loss` (next-token cross-entropy,
    labels shifted inside, -100 ignored) — the conventions of HF's *LMHeadModel."""

    def __init__(self, config=None, **overrides):
        super().__init__()
        self.config = config = model_config("GPT", GPTConfig, config, overrides)
        if not config.tie_word_embeddings:  # the head below always reuses the token embedding
            raise NotImplementedError("GPT: an lm_head untied from the token embedding "
                                      "(tie_word_embeddings=False) is not supported")
        if config.pre_ln:
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        else:
            self.tokens_embed = nn.Embedding(config.vocab_size, config.n_embd)
            self.positions_embed = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon) if config.pre_ln else None
        self._init_weights()

    @property
    def token_embedding(self):
        return self.wte if self.config.pre_ln else self.tokens_embed

    @property
    def position_embedding(self):
        return self.wpe if self.config.pre_ln else self.positions_embed

    def _init_weights(self):
        # GPT-2's scheme: N(0, 0.02) everywhere, residual projections scaled by 1/sqrt(2 n_layer)
        std = self.config.initializer_range
        normal_init(self, lambda name: std / math.sqrt(2 * self.config.n_layer)
                    if name.endswith("c_proj.weight") else std, lambda name: "ln_" in name)

    def forward(self, input_ids, attention_mask=None, labels=None, cache=None, position_ids=None):
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        if past + T > self.config.n_positions:
            raise ValueError(f"GPT: sequence length {past + T} exceeds n_positions "
                             f"{self.config.n_positions}")
        # HF's default: past .. past+T-1 whatever the padding; generate passes the positions
        # of a left-padded row counted from its first real token, as HF's generate does
        pos = tt.arange(past, past + T, device=input_ids.device) if position_ids is None \
            else position_ids                                                           # (T,) | (B, T)
        x = self.drop(self.token_embedding(input_ids) + self.position_embedding(pos))  # (B, T, C)
        for i, block in enumerate(self.h):
            x = self._run_block(block, x, attention_mask,
                                cache=cache.self_attn[i] if cache is not None else None)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = F.linear(x, self.token_embedding.weight)                              # (B, T, vocab)
        loss = None
        if labels is not None:
            loss = next_token_loss(logits, labels)
        return ModelOutput(logits=logits, loss=loss, cache=cache)

    def new_cache(self):
        return DecoderCache(self.config.n_layer)
