"""T5 <-> HuggingFace T5ForConditionalGeneration weights.

Names match except the position-bias table, which HF keeps directly in the first block's
attention (`SelfAttention.relative_attention_bias.weight`) and we keep inside an
nn.RelativePositionBias (`SelfAttention.relative_attention_bias.relative_attention_bias.weight`).
`encoder.embed_tokens` / `decoder.embed_tokens` are HF's aliases of `shared`.

Tied or not: transformers 4.x wrote v1.1 checkpoints with tie_word_embeddings=false and a
separate lm_head; transformers 5.x always declares tie_word_embeddings=true, records the
output scaling as `scale_decoder_outputs`, and unties on load when the checkpoint's
lm_head.weight differs from shared.weight. `_configure` applies the same rules.
"""
import numpy as np

from . import hf
from .t5 import T5, T5Config

_HF_REL = ".relative_attention_bias.weight"
_OUR_REL = ".relative_attention_bias.relative_attention_bias.weight"
_ALIASES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


def _configure(config, weights):
    # HF: the decoder output is scaled unless the config says tie_word_embeddings=false
    config.setdefault("scale_decoder_outputs", config.get("tie_word_embeddings", True) is not False)
    head, shared = weights.get("lm_head.weight"), weights.get("shared.weight")
    config["tie_word_embeddings"] = head is None or (
        shared is not None and head.shape == shared.shape and np.array_equal(head, shared))
    return config


def _to_ours(name, arr, config):
    if name in _ALIASES or (name == "lm_head.weight" and config.get("tie_word_embeddings", True)):
        return None
    if name.endswith(_HF_REL):
        name = name[:-len(_HF_REL)] + _OUR_REL
    return name, arr


def _to_hf(name, arr, config):
    if name.endswith(_OUR_REL):
        name = name[:-len(_OUR_REL)] + _HF_REL
    return name, arr


def _build(config):
    return T5(T5Config.from_dict(config))


# older checkpoints carry an unused table in the decoder's first cross-attention
_IGNORE = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)

def _shapes(c, config):
    d, inner, ff = c.d_model, c.num_heads * c.d_kv, c.d_ff
    s = {"shared.weight": (c.vocab_size, d)}
    for stack, n in (("encoder", c.num_layers), ("decoder", c.num_decoder_layers)):
        attention = ("SelfAttention", "EncDecAttention") if stack == "decoder" else ("SelfAttention",)
        for b in range(n):
            p = f"{stack}.block.{b}.layer."
            for i, kind in enumerate(attention):
                for proj in ("q", "k", "v"):
                    hf.linear(s, f"{p}{i}.{kind}.{proj}", d, inner, bias=False)
                hf.linear(s, f"{p}{i}.{kind}.o", inner, d, bias=False)
                if b == 0 and kind == "SelfAttention":
                    s[f"{p}{i}.{kind}{_OUR_REL}"] = (c.relative_attention_num_buckets, c.num_heads)
                hf.norm(s, f"{p}{i}.layer_norm", d, bias=False)
            f = f"{p}{len(attention)}."
            for wi in (("wi_0", "wi_1") if c.is_gated_act else ("wi",)):
                hf.linear(s, f + "DenseReluDense." + wi, d, ff, bias=False)
            hf.linear(s, f + "DenseReluDense.wo", ff, d, bias=False)
            hf.norm(s, f + "layer_norm", d, bias=False)
        hf.norm(s, stack + ".final_layer_norm", d, bias=False)
    if not c.tie_word_embeddings:
        s["lm_head.weight"] = (c.vocab_size, d)
    return s


FAMILY = hf.Family("t5", "T5ForConditionalGeneration", _build, _to_ours, _to_hf, config_class=T5Config,
                   shapes=_shapes, layers=(("num_layers", "encoder.block."),
                                           ("num_decoder_layers", "decoder.block.")),
                   ignore=_IGNORE, configure=_configure)
hf.register(FAMILY)


def hf_name(our_name):
    """The HF parameter name of one of ours (tests compare gradients by it)."""
    return _to_hf(our_name, None, None)[0]
