"""GPT-1 / GPT-2 <-> HuggingFace GPT2LMHeadModel / OpenAIGPTLMHeadModel weights.

HF stores these layers as Conv1D, whose weight is (in, out): the transpose of our Linear.
The LM head is tied to the token embedding, so `lm_head.weight` is not a separate tensor.
"""
from . import hf
from .gpt import GPT, GPTConfig

_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def _to_ours(name, arr, config):
    if name.startswith("transformer."):
        name = name[len("transformer."):]
    if name == "lm_head.weight":
        return None  # tied to the token embedding
    if name.endswith(_CONV1D):
        arr = arr.T
    return name, arr


def _to_hf(name, arr, config):
    if name.endswith(_CONV1D):
        arr = arr.T
    return "transformer." + name, arr


def _build(config):
    if config.get("tie_word_embeddings", True) is False:
        raise NotImplementedError("from_hf: GPT with an untied lm_head is not supported")
    # attention variants that change the scores; loading them would give wrong logits silently
    for flag, default in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                          ("add_cross_attention", False)):
        if config.get(flag, default) != default:
            raise NotImplementedError(f"from_hf: GPT-2 with {flag}={config[flag]} is not supported")
    return GPT(GPTConfig.from_dict(config))


def _shapes(c, config):
    C, inner = c.n_embd, c.n_inner or 4 * c.n_embd
    tok, pos = ("wte", "wpe") if c.pre_ln else ("tokens_embed", "positions_embed")
    s = {f"{tok}.weight": (c.vocab_size, C), f"{pos}.weight": (c.n_positions, C)}
    for i in range(c.n_layer):
        p = f"h.{i}."
        hf.norm(s, p + "ln_1", C)
        hf.linear(s, p + "attn.c_attn", C, 3 * C)
        hf.linear(s, p + "attn.c_proj", C, C)
        hf.norm(s, p + "ln_2", C)
        hf.linear(s, p + "mlp.c_fc", C, inner)
        hf.linear(s, p + "mlp.c_proj", inner, C)
    if c.pre_ln:
        hf.norm(s, "ln_f", C)
    return s


_BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers in older checkpoints
_SPEC = dict(config_class=GPTConfig, shapes=_shapes, layers=(("n_layer", "h."),),
             divisible=(("n_embd", "n_head"),), ignore=_BUFFERS)

hf.register(hf.Family("gpt2", "GPT2LMHeadModel", _build, _to_ours, _to_hf, **_SPEC))
hf.register(hf.Family("openai-gpt", "OpenAIGPTLMHeadModel", _build, _to_ours, _to_hf, **_SPEC))
