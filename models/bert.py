"""BERT: a bidirectional Post-LN Transformer encoder with task heads.

    embeddings  x = LayerNorm(word[ids] + position[0..T-1] + token_type[segment ids])
    each layer  x = LayerNorm(x + attention(x));  x = LayerNorm(x + output(act(intermediate(x))))
    pooler      tanh(dense(x[:, 0]))           the [CLS] vector, input of NSP and classification

One class, four heads (`head=`), each the counterpart of a HuggingFace class:

    head           HF class                       outputs
    None           BertModel                      last_hidden_state, pooler_output
    "pretraining"  BertForPreTraining             logits (MLM), seq_relationship_logits (NSP)
    "mlm"          BertForMaskedLM (no pooler)    logits
    "classification" BertForSequenceClassification logits (B, num_labels)

The MLM decoder is tied to the word embedding and adds its own bias (`cls.predictions.bias`).
Parameter names equal HF's without the `bert.` prefix of the base model (`embeddings.*`,
`encoder.layer.{i}.*`, `pooler.*`; heads keep `cls.*` / `classifier.*`), so checkpoints map
by name (models/bert_hf.py). `mask_tokens` is the pre-training corruption: 15% of the tokens
selected, of those 80% -> [MASK], 10% -> a random token, 10% kept.
"""
from dataclasses import dataclass

import numpy as np

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .activations import activation
from .config import ModelConfig, check_pad_token_id, model_config
from .hf import SaveHF
from .init import normal_init
from .output import ModelOutput


@dataclass
class BertConfig(ModelConfig):
    """Field names are those of HuggingFace's BertConfig."""
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"              # exact (erf) GELU; 'gelu_new' is the tanh approximation
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    classifier_dropout: float = None      # None means hidden_dropout_prob
    num_labels: int = 2                   # HF derives it from id2label; so does from_dict
    id2label: dict = None
    problem_type: str = None              # None: inferred from num_labels and the labels' dtype
    tie_word_embeddings: bool = True
    model_type: str = "bert"

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        if d.get("id2label"):
            d["id2label"] = _label_ids(d["id2label"])
            d.setdefault("num_labels", len(d["id2label"]))
        return super().from_dict(d)

    def to_dict(self):
        d = super().to_dict()
        # HF's config keeps the label count as id2label/label2id, not as num_labels
        id2label = d.pop("id2label") or {i: f"LABEL_{i}" for i in range(d.pop("num_labels"))}
        d.pop("num_labels", None)
        d["id2label"] = {str(i): name for i, name in id2label.items()}
        d["label2id"] = {name: int(i) for i, name in id2label.items()}
        return d


def _label_ids(id2label):
    """config.json's id2label ({"0": "NEGATIVE", ...}: JSON keys are strings) with int keys."""
    if not isinstance(id2label, dict):
        raise ValueError(f"BertConfig: id2label must be a dict of label id -> name, got {id2label!r}")
    out = {}
    for key, name in id2label.items():
        try:
            out[int(key)] = name
        except (TypeError, ValueError):
            raise ValueError(f"BertConfig: id2label keys must be label ids (integers, such as "
                             f"\"0\"), got {key!r}") from None
    return out


HEADS = (None, "pretraining", "mlm", "classification")


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None):
        B, T = input_ids.shape
        pos = tt.arange(T, device=input_ids.device)                              # (T,)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)      # (B, T, H)
        if token_type_ids is None:  # every token in segment A
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"BERT: hidden_size {config.hidden_size} is not divisible by "
                             f"num_attention_heads {config.num_attention_heads}")
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x, mask=None):
        B, T, H = x.shape
        hs = H // self.num_heads
        q, k, v = (lin(x).reshape(B, T, self.num_heads, hs).transpose(1, 2)      # (B, nh, T, hs)
                   for lin in (self.query, self.key, self.value))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.dropout_p if self.training else 0.0)
        return y.transpose(1, 2).reshape(B, T, H)                                # (B, T, H)


class BertAddNorm(nn.Module):
    """LayerNorm(residual + dropout(dense(x))): HF's BertSelfOutput and BertOutput."""

    def __init__(self, d_in, config):
        super().__init__()
        self.dense = nn.Linear(d_in, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(residual + self.dropout(self.dense(x)))


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertAddNorm(config.hidden_size, config)

    def forward(self, x, mask=None):
        return self.output(self.self(x, mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act, "BERT", "hidden_act")

    def forward(self, x):
        return self.act(self.dense(x))                                           # (B, T, I)


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertAddNorm(config.intermediate_size, config)

    def forward(self, x, mask=None):
        x = self.attention(x, mask)                                              # (B, T, H)
        return self.output(self.intermediate(x), x)                              # (B, T, H)


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, x, mask=None):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        return F.tanh(self.dense(x[:, 0]))                                       # (B, H)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act, "BERT", "hidden_act")
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """transform, then the decoder: the word-embedding matrix (tied) plus a bias per token."""

    def __init__(self, config):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(tt.zeros(config.vocab_size))

    def forward(self, x, word_embeddings):
        return F.linear(self.transform(x), word_embeddings, self.bias)           # (B, T, vocab)


class BertHeads(nn.Module):
    """HF's `cls`: MLM predictions, plus seq_relationship (NSP) for pre-training."""

    def __init__(self, config, nsp):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2) if nsp else None


class BERT(SaveHF, nn.Module):
    """`forward(input_ids, attention_mask=None, token_type_ids=None, labels=None,
    next_sentence_label=None)`; attention_mask (B, T) has 1 = token, 0 = padding.

    Losses (as HF): MLM cross-entropy over `labels` (-100 ignored) plus, for pre-training,
    NSP cross-entropy over `next_sentence_label` (0 = B follows A); either may be given
    alone (HF needs both). Classification: MSE when num_labels == 1, cross-entropy for
    integer labels, BCE-with-logits for float multi-label targets (or config.problem_type)."""

    def __init__(self, config=None, head=None, **overrides):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"BERT: head must be one of {HEADS}, got {head!r}")
        config = model_config("BERT", BertConfig, config, overrides)
        check_pad_token_id("BERT", config, "vocab_size")
        if head in ("pretraining", "mlm") and not config.tie_word_embeddings:
            raise NotImplementedError("BERT: an MLM decoder untied from the word embeddings is not supported")
        self.config, self.head = config, head
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if head != "mlm" else None
        self.cls = BertHeads(config, nsp=head == "pretraining") if head in ("pretraining", "mlm") else None
        if head == "classification":
            p = config.classifier_dropout
            self.dropout = nn.Dropout(config.hidden_dropout_prob if p is None else p)
            self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self._init_weights()

    def _init_weights(self):
        # BERT's scheme: N(0, initializer_range) for matrices and tables, zero biases, LN = identity
        words = self.embeddings.word_embeddings
        normal_init(self, self.config.initializer_range, lambda name: "LayerNorm" in name,
                    [(words.weight, words.padding_idx)])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                next_sentence_label=None):
        B, T = input_ids.shape
        if T > self.config.max_position_embeddings:
            raise ValueError(f"BERT: sequence length {T} exceeds max_position_embeddings "
                             f"{self.config.max_position_embeddings}")
        mask = None
        if attention_mask is not None:  # keys only: padded queries still get (ignored) outputs
            mask = attention_mask.to(tt.bool).reshape(B, 1, 1, T)                # (B, 1, 1, T)
        x = self.encoder(self.embeddings(input_ids, token_type_ids), mask)       # (B, T, H)
        pooled = self.pooler(x) if self.pooler is not None else None             # (B, H)
        out = ModelOutput(last_hidden_state=x, pooler_output=pooled)
        loss = None
        if self.head in ("pretraining", "mlm"):
            logits = self.cls.predictions(x, self.embeddings.word_embeddings.weight)  # (B, T, V)
            if labels is not None:
                loss = F.cross_entropy(logits.reshape(-1, self.config.vocab_size),
                                       labels.reshape(-1), ignore_index=-100)
            if self.head == "pretraining":
                out["seq_relationship_logits"] = nsp = self.cls.seq_relationship(pooled)  # (B, 2)
                if next_sentence_label is not None:
                    nsp_loss = F.cross_entropy(nsp, next_sentence_label.reshape(-1))
                    loss = nsp_loss if loss is None else loss + nsp_loss
            elif next_sentence_label is not None:
                raise ValueError("BERT: next_sentence_label needs head='pretraining'")
        elif self.head == "classification":
            logits = self.classifier(self.dropout(pooled))                       # (B, num_labels)
            if labels is not None:
                loss = self._classification_loss(logits, labels)
        else:
            logits = None
        out["logits"], out["loss"] = logits, loss
        return out

    def _classification_loss(self, logits, labels):
        n = self.config.num_labels
        kind = self.config.problem_type
        if kind is None:
            if n == 1:
                kind = "regression"
            elif labels.dtype in (tt.int64, tt.int32):
                kind = "single_label_classification"
            else:
                kind = "multi_label_classification"
        if kind == "regression":
            target = labels.to(logits.dtype)
            if n == 1:
                return F.mse_loss(logits.reshape(-1), target.reshape(-1))
            return F.mse_loss(logits, target)
        if kind == "single_label_classification":
            return F.cross_entropy(logits.reshape(-1, n), labels.reshape(-1))
        if kind == "multi_label_classification":
            return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        raise ValueError(f"BERT: unknown problem_type {kind!r}; expected regression, "
                         "single_label_classification or multi_label_classification")


def mask_tokens(input_ids, mask_token_id, vocab_size, special_ids=(), mlm_probability=0.15, seed=None):
    """BERT's masked-LM corruption -> (inputs, labels).

    Each token not in `special_ids` is selected with probability `mlm_probability`; a
    selected token becomes `mask_token_id` with probability 0.8, a uniformly random id in
    [0, vocab_size) with 0.1, and stays itself with 0.1. `labels` holds the original id
    where selected and -100 elsewhere (cross_entropy ignores those). Accepts and returns
    tinytensor tensors (same device) or NumPy arrays."""
    is_tensor = isinstance(input_ids, tt.Tensor)
    ids = input_ids.numpy() if is_tensor else np.asarray(input_ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"mask_tokens: input_ids must be integers, got {ids.dtype}")
    if ids.dtype.kind == "u":  # uint8/uint16 token arrays cannot hold -100 (or a larger mask id)
        ids = ids.astype(np.int64)
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mask_tokens: mlm_probability must be in [0, 1], got {mlm_probability}")
    rng = np.random.default_rng(seed)
    selected = (rng.random(ids.shape) < mlm_probability) & ~np.isin(ids, list(special_ids))
    labels = np.where(selected, ids, -100).astype(ids.dtype)
    u = rng.random(ids.shape)
    inputs = ids.copy()
    inputs[selected & (u < 0.8)] = mask_token_id
    randomized = selected & (u >= 0.8) & (u < 0.9)
    inputs[randomized] = rng.integers(0, vocab_size, size=int(randomized.sum()))
    if is_tensor:
        device = input_ids.device
        return tt.tensor(inputs, device=device), tt.tensor(labels, device=device)
    return inputs, labels
