"""LLaMA <-> HuggingFace LlamaForCausalLM weights.

The names are the same on both sides (`model.` + LlamaModel's names, and `lm_head.weight`),
and nn.Linear stores (out, in) like torch, so nothing is transposed. With
tie_word_embeddings the head is the token embedding and checkpoints carry no lm_head.
"""
from . import hf
from .llama import Llama, LlamaConfig


def _to_ours(name, arr, config):
    if name == "lm_head.weight":
        return None if config.get("tie_word_embeddings", False) else (name, arr)
    if not name.startswith("model."):
        return False
    return name, arr


def _to_hf(name, arr, config):
    return name, arr


def _build(config):
    return Llama(LlamaConfig.from_dict(config))


def _shapes(c, config):
    h, nh, nkv, hd, i = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                         c.intermediate_size)
    s = {"model.embed_tokens.weight": (c.vocab_size, h)}
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}."
        hf.linear(s, p + "self_attn.q_proj", h, nh * hd, c.attention_bias)
        hf.linear(s, p + "self_attn.k_proj", h, nkv * hd, c.attention_bias)
        hf.linear(s, p + "self_attn.v_proj", h, nkv * hd, c.attention_bias)
        hf.linear(s, p + "self_attn.o_proj", nh * hd, h, c.attention_bias)
        hf.linear(s, p + "mlp.gate_proj", h, i, c.mlp_bias)
        hf.linear(s, p + "mlp.up_proj", h, i, c.mlp_bias)
        hf.linear(s, p + "mlp.down_proj", i, h, c.mlp_bias)
        hf.norm(s, p + "input_layernorm", h, bias=False)
        hf.norm(s, p + "post_attention_layernorm", h, bias=False)
    hf.norm(s, "model.norm", h, bias=False)
    if not c.tie_word_embeddings:
        s["lm_head.weight"] = (c.vocab_size, h)
    return s


# rotary inverse-frequency buffers that older checkpoints saved with the weights
_BUFFERS = (".rotary_emb.inv_freq",)

hf.register(hf.Family("llama", "LlamaForCausalLM", _build, _to_ours, _to_hf, config_class=LlamaConfig,
                      shapes=_shapes, layers=(("num_hidden_layers", "model.layers."),),
                      divisible=(("num_attention_heads", "num_key_value_heads"),), ignore=_BUFFERS))
