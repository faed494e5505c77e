"""LLaMA: a Pre-RMSNorm decoder-only Transformer with rotary positions, a SwiGLU MLP and
grouped-query attention (Touvron et al. 2023; the layout of HF's LlamaForCausalLM).

    x = embed_tokens(ids)                                    no absolute positions
    per layer:  x = x + o_proj(attn(rope(q), rope(k), v))    on input_layernorm(x)
                x = x + down_proj(silu(gate_proj(h)) * up_proj(h)),  h = post_attention_layernorm(x)
    logits = lm_head(norm(x))                                lm_head tied or not

Grouped-query attention: num_key_value_heads < num_attention_heads; each k/v head serves
num_attention_heads // num_key_value_heads consecutive query heads, and the KV cache keeps
only the k/v heads. RoPE is HF's rotate-half convention (pairs (x[i], x[i + d/2])).
Parameter names are HF's inside `model.` (this module's `model` attribute), plus `lm_head`.
"""
from dataclasses import dataclass

import tinytensor.functional as F
from tinytensor import nn

from .config import ModelConfig, check_pad_token_id, model_config
from .decoder import (DecoderCache, GenerateMixin, GradientCheckpointingMixin, causal_padding_mask,
                      next_token_loss)
from .hf import SaveHF
from .init import normal_init
from .output import ModelOutput


@dataclass
class LlamaConfig(ModelConfig):
    """Field names are those of HuggingFace's LlamaConfig."""
    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = None       # None means num_attention_heads (plain multi-head)
    head_dim: int = None                  # None means hidden_size // num_attention_heads
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    attention_bias: bool = False
    attention_dropout: float = 0.0
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    pad_token_id: int = None              # its embedding row gets no gradient (torch padding_idx)
    bos_token_id: int = 1
    eos_token_id: int = 2
    model_type: str = "llama"

    _DERIVED = {"num_key_value_heads": lambda c: c.num_attention_heads,
                "head_dim": lambda c: c.hidden_size // c.num_attention_heads}

    @property
    def n_positions(self):
        # models.generation slides its window past this length (HF just keeps extrapolating)
        return self.max_position_embeddings

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        field = "rope_parameters" if d.get("rope_parameters") else "rope_scaling"
        rope = d.get(field) or {}
        if not isinstance(rope, dict):
            raise ValueError(f"LlamaConfig: {field} must be a dict (a JSON object) such as "
                             f"{{'rope_type': 'default', 'rope_theta': 10000.0}}, got {rope!r}")
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind != "default":
            raise NotImplementedError(f"Llama: rope_type {kind!r} is not supported (only 'default')")
        if "rope_theta" in rope:  # transformers >= 5 nests it in rope_parameters
            d["rope_theta"] = rope["rope_theta"]
        if d.get("hidden_act", "silu") != "silu":
            raise NotImplementedError(f"Llama: hidden_act {d['hidden_act']!r} is not supported "
                                      "(only 'silu', i.e. SwiGLU)")
        return super().from_dict(d)

    def to_dict(self):
        d = super().to_dict()
        d["rope_parameters"] = {"rope_type": "default", "rope_theta": self.rope_theta}
        return d


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        nh, nkv, hd = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        if nh % nkv:
            raise ValueError(f"Llama: num_attention_heads {nh} is not a multiple of "
                             f"num_key_value_heads {nkv}")
        self.num_heads, self.num_kv_heads, self.head_dim = nh, nkv, hd
        self.rope_theta = config.rope_theta
        self.attention_dropout = config.attention_dropout
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, nh * hd, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, nkv * hd, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, nkv * hd, bias=bias)
        self.o_proj = nn.Linear(nh * hd, config.hidden_size, bias=bias)

    def forward(self, x, cos, sin, mask, cache=None):
        B, T, _ = x.shape
        nh, nkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).reshape(B, T, nh, hd).transpose(1, 2)     # (B, nh, T, hd)
        k = self.k_proj(x).reshape(B, T, nkv, hd).transpose(1, 2)    # (B, nkv, T, hd)
        v = self.v_proj(x).reshape(B, T, nkv, hd).transpose(1, 2)    # (B, nkv, T, hd)
        q, k = nn.apply_rope(q, cos, sin), nn.apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)                                 # (B, nkv, past+T, hd)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=nkv != nh,
            dropout_p=self.attention_dropout if self.training else 0.0)  # (B, nh, T, hd)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, nh * hd))  # (B, T, hidden)


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        h, i, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(h, i, bias=bias)
        self.up_proj = nn.Linear(h, i, bias=bias)
        self.down_proj = nn.Linear(i, h, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = LlamaAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    """The stack without the head: HF's LlamaModel (`model.` in checkpoints)."""

    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size,
                                         padding_idx=config.pad_token_id)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class Llama(GenerateMixin, GradientCheckpointingMixin, SaveHF, nn.Module):
    """Decoder-only LLaMA. `forward(input_ids, attention_mask=None, labels=None,
    position_ids=None, cache=None)` returns `.logits` (B, T, vocab) and, with labels, `.loss`
    (next-token cross-entropy, labels shifted inside, -100 ignored), as LlamaForCausalLM."""

    def __init__(self, config=None, **overrides):
        super().__init__()
        self.config = config = model_config("Llama", LlamaConfig, config, overrides)
        check_pad_token_id("Llama", config, "vocab_size")
        self.model = LlamaModel(config)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        # HF's scheme: N(0, initializer_range) for every matrix, zero biases, unit norms
        normal_init(self, self.config.initializer_range,
                    lambda name: name.endswith("layernorm.weight") or name == "model.norm.weight",
                    [(self.model.embed_tokens.weight, self.config.pad_token_id)])

    @property
    def output_weight(self):
        return self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight

    def forward(self, input_ids, attention_mask=None, labels=None, position_ids=None, cache=None):
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        S = past + T
        dev = input_ids.device
        if position_ids is None:
            # HF's forward: positions past .. past+T-1 whatever the padding. RoPE only sees
            # differences of positions, so a left-padded row's shift does not change its scores.
            position_ids = T
        x = self.model.embed_tokens(input_ids)                                   # (B, T, hidden)
        cos, sin = nn.rope_cos_sin(position_ids, self.config.head_dim, self.config.rope_theta,
                                   past_length=past, dtype=x.dtype, device=dev)  # (T|B,T, hd/2)
        if cos.ndim == 3:
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                         # (B, 1, T, hd/2)
        mask = causal_padding_mask(T, S, attention_mask, dev, "Llama")  # (B|1, 1, T, S)
        for i, layer in enumerate(self.model.layers):
            x = self._run_block(layer, x, cos, sin, mask,
                                cache=cache.self_attn[i] if cache is not None else None)
        x = self.model.norm(x)
        logits = F.linear(x, self.output_weight)                                  # (B, T, vocab)
        loss = None
        if labels is not None:
            loss = next_token_loss(logits, labels)
        return ModelOutput(logits=logits, loss=loss, cache=cache)

    def new_cache(self):
        return DecoderCache(self.config.num_hidden_layers)


