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


# rotary inverse-frequency buffers that older checkpoints saved with the weights
_BUFFERS = (".rotary_emb.inv_freq",)

hf.register(hf.Family("llama", "LlamaForCausalLM", _build, _to_ours, _to_hf, _BUFFERS))


def save_hf(model, directory):
    hf.save_hf(model, directory, hf.FAMILIES["llama"])


Llama.save_hf = save_hf
