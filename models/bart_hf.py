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


def shapes(c, config):
    """BART's and Marian's state dict, as models/bart.py builds it."""
    d, tied = c.d_model, c.tie_word_embeddings
    shared = getattr(c, "share_encoder_decoder_embeddings", True)
    vocab = {"encoder": c.vocab_size, "decoder": getattr(c, "decoder_vocab_size", None) or c.vocab_size}
    s = {"final_logits_bias": (1, vocab["decoder"])}
    if shared:
        s["shared.weight"] = (c.vocab_size, d)
    for stack, n, ffn in (("encoder", c.encoder_layers, c.encoder_ffn_dim),
                          ("decoder", c.decoder_layers, c.decoder_ffn_dim)):
        if not (shared and tied):
            s[f"{stack}.embed_tokens.weight"] = (vocab[stack], d)
        if c.learned_positions:
            s[f"{stack}.embed_positions.weight"] = (c.max_position_embeddings + 2, d)
            hf.norm(s, f"{stack}.layernorm_embedding", d)
        for i in range(n):
            p = f"{stack}.layers.{i}."
            for attn in ("self_attn", "encoder_attn") if stack == "decoder" else ("self_attn",):
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    hf.linear(s, f"{p}{attn}.{proj}", d, d)
                hf.norm(s, f"{p}{attn}_layer_norm", d)
            hf.linear(s, p + "fc1", d, ffn)
            hf.linear(s, p + "fc2", ffn, d)
            hf.norm(s, p + "final_layer_norm", d)
    if not tied:
        s["lm_head.weight"] = (vocab["decoder"], d)
    return s


LAYERS = (("encoder_layers", "encoder.layers."), ("decoder_layers", "decoder.layers."))
DIVISIBLE = (("d_model", "encoder_attention_heads"), ("d_model", "decoder_attention_heads"))

# fairseq leftovers that HF ignores too
hf.register(hf.Family("bart", "BartForConditionalGeneration", _build, to_ours, to_hf,
                      config_class=BartConfig, shapes=shapes, layers=LAYERS, divisible=DIVISIBLE,
                      ignore=("encoder.version", "decoder.version")))
