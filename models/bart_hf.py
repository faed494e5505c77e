"""BART <-> HuggingFace BartForConditionalGeneration weights.

Our names are HF's without the `model.` prefix of the base model. The token embedding is
one tensor, `model.shared.weight`: HF ties encoder/decoder.embed_tokens and lm_head to it,
and older checkpoints store those copies too, so they are dropped on the way in.
"""
from . import hf
from .bart import BART, BartConfig

_TIED_TO_SHARED = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")


def to_ours(name, arr, config):
    tied = config.get("tie_word_embeddings", True)
    if name in _TIED_TO_SHARED and tied and config.get("share_encoder_decoder_embeddings", True):
        return None
    if name == "lm_head.weight" and tied:
        return None
    if name in ("final_logits_bias", "lm_head.weight"):
        return name, arr
    if name.startswith("model."):
        return name[len("model."):], arr
    return False


def to_hf(name, arr, config):
    if name in ("final_logits_bias", "lm_head.weight"):
        return name, arr
    return "model." + name, arr


def _build(config):
    return BART(BartConfig.from_dict(config))


# fairseq leftovers that HF ignores too
hf.register(hf.Family("bart", "BartForConditionalGeneration", _build, to_ours, to_hf,
                      ignore=("encoder.version", "decoder.version")))


def save_hf(model, directory):
    """Write config.json + model.safetensors that transformers' from_pretrained loads."""
    hf.save_hf(model, directory, hf.FAMILIES[model.config.model_type])


BART.save_hf = save_hf
