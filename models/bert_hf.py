"""BERT <-> HuggingFace BertModel / BertForPreTraining / BertForMaskedLM /
BertForSequenceClassification weights.

config.json's `architectures` picks the head. Our names are HF's without the base model's
`bert.` prefix. The MLM decoder is tied to the word embedding and its bias to
`cls.predictions.bias`, so `cls.predictions.decoder.*` (present in older checkpoints) is
dropped on load and not written on save. Old TF-converted checkpoints name LayerNorm
parameters gamma/beta. Like HF, heads the chosen class does not use (a pre-training
checkpoint's pooler / NSP head loaded for masked LM) are dropped; anything else unknown is
an error.
"""
from . import hf
from .bert import BERT, BertConfig

HEAD_OF_ARCHITECTURE = {
    "BertModel": None,
    "BertForPreTraining": "pretraining",
    "BertForMaskedLM": "mlm",
    "BertForSequenceClassification": "classification",
}
ARCHITECTURE_OF_HEAD = {head: arch for arch, head in HEAD_OF_ARCHITECTURE.items()}

_BASE = ("embeddings.", "encoder.", "pooler.")
_HEADS = ("cls.predictions.", "cls.seq_relationship.", "classifier.")
_TIED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")


def _head(config):
    archs = config.get("architectures") or ["BertModel"]
    for arch in archs:
        if arch in HEAD_OF_ARCHITECTURE:
            return HEAD_OF_ARCHITECTURE[arch]
    raise hf.ConfigError(f"from_hf: config.json: architectures={archs}, a BERT head tinytensor "
                         f"lacks, is not supported; supported: {', '.join(HEAD_OF_ARCHITECTURE)}")


def _uses(head, name):
    """Does a model with this head have a place for the (prefix-free) HF name?"""
    if name.startswith("pooler."):
        return head != "mlm"
    if name.startswith("cls.predictions."):
        return head in ("pretraining", "mlm")
    if name.startswith("cls.seq_relationship."):
        return head == "pretraining"
    if name.startswith("classifier."):
        return head == "classification"
    return True


def _to_ours(name, arr, config):
    if name.startswith("bert."):
        name = name[len("bert."):]
    if name.endswith(".gamma"):
        name = name[:-len("gamma")] + "weight"
    elif name.endswith(".beta"):
        name = name[:-len("beta")] + "bias"
    if not name.startswith(_BASE + _HEADS):
        return False
    if name in _TIED or not _uses(_head(config), name):
        return None
    return name, arr


def _to_hf(name, arr, config):
    base = name.startswith(_BASE)
    prefixed = base and config["architectures"] != ["BertModel"]
    return ("bert." + name if prefixed else name), arr


def _build(config):
    for flag in ("is_decoder", "add_cross_attention"):
        if config.get(flag):
            raise NotImplementedError(f"from_hf: BERT with {flag}=True is not supported")
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise NotImplementedError(f"from_hf: BERT position_embedding_type={kind!r} is not supported")
    return BERT(BertConfig.from_dict(config), head=_head(config))


def _shapes(c, config):
    H, head = c.hidden_size, _head(config)
    s = {"embeddings.word_embeddings.weight": (c.vocab_size, H),
         "embeddings.position_embeddings.weight": (c.max_position_embeddings, H),
         "embeddings.token_type_embeddings.weight": (c.type_vocab_size, H)}
    hf.norm(s, "embeddings.LayerNorm", H)
    for i in range(c.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            hf.linear(s, p + "attention.self." + proj, H, H)
        hf.linear(s, p + "attention.output.dense", H, H)
        hf.norm(s, p + "attention.output.LayerNorm", H)
        hf.linear(s, p + "intermediate.dense", H, c.intermediate_size)
        hf.linear(s, p + "output.dense", c.intermediate_size, H)
        hf.norm(s, p + "output.LayerNorm", H)
    if head != "mlm":
        hf.linear(s, "pooler.dense", H, H)
    if head in ("pretraining", "mlm"):
        s["cls.predictions.bias"] = (c.vocab_size,)
        hf.linear(s, "cls.predictions.transform.dense", H, H)
        hf.norm(s, "cls.predictions.transform.LayerNorm", H)
    if head == "pretraining":
        hf.linear(s, "cls.seq_relationship", H, 2)
    if head == "classification":
        hf.linear(s, "classifier", H, c.num_labels)
    return s


# buffers, not weights: position ids and the all-zero token types
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
# save_hf writes the HF class of the model's head (BertForMaskedLM for head='mlm', ...)
FAMILY = hf.Family("bert", "BertForPreTraining", _build, _to_ours, _to_hf, config_class=BertConfig,
                   shapes=_shapes, layers=(("num_hidden_layers", "encoder.layer."),),
                   divisible=(("hidden_size", "num_attention_heads"),), ignore=_BUFFERS,
                   architecture_of=lambda model: ARCHITECTURE_OF_HEAD[model.head])
hf.register(FAMILY)
