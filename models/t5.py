"""T5 (Raffel et al. 2020): an encoder-decoder with relative position biases, and its v1.1
variant, as configurations of one model.

    encoder block:  x = x + SelfAttention(layer_norm(x), + bidirectional position bias)
                    x = x + DenseReluDense(layer_norm(x))
    decoder block:  x = x + SelfAttention(layer_norm(x), causal, + causal position bias)
                    x = x + EncDecAttention(layer_norm(x), encoder states)
                    x = x + DenseReluDense(layer_norm(x))
    each stack:     dropout(embed) -> blocks -> final_layer_norm -> dropout

What sets T5 apart from the 2017 Transformer:
- no absolute positions: the first block of each stack owns a table of learned scalars, one
  per (relative-distance bucket, head), added to the attention scores of EVERY block of that
  stack (computed once, shared); the decoder's buckets only look back (causal);
- Pre-LN with an RMS-style norm: no mean subtraction, no bias (nn.RMSNorm);
- no biases anywhere, and no 1/sqrt(d) scaling of q.k (it is folded into the init);
- v1.0 (feed_forward_proj='relu'): ReLU FFN, LM head tied to the embedding, decoder output
  scaled by d_model**-0.5 before it;
- v1.1 ('gated-gelu'): FFN gelu_new(wi_0 x) * wi_1 x -> wo, separate lm_head, no scaling.

Parameter names are HuggingFace's T5ForConditionalGeneration's (`shared`, `encoder.block.0.
layer.0.SelfAttention.q`, `decoder.block.1.layer.1.EncDecAttention.o`, `...DenseReluDense.wi_0`,
`final_layer_norm`, `lm_head`), except the position-bias table, which lives one level down
inside nn.RelativePositionBias (models/t5_hf.py renames it).

Masks are added to the scores as 0 / -inf. A query that may see no key at all (a decoder
position left of left-padding, an all-padding input row) gets a zero attention output here,
where HF's finite mask gives it a plain average; the positions of real tokens are the same.
"""
from dataclasses import dataclass

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .activations import ACT2FN
from .config import ModelConfig, model_config
from .hf import SaveHF
from .output import ModelOutput
from .seq2seq import Seq2SeqCache, Seq2SeqGenerateMixin, labels_loss, shift_tokens_right


@dataclass
class T5Config(ModelConfig):
    """Field names are those of HuggingFace's T5Config."""
    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64                        # per-head width; num_heads * d_kv need not be d_model
    d_ff: int = 2048
    num_layers: int = 6                   # encoder blocks
    num_decoder_layers: int = None        # None: as many as the encoder
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout_rate: float = 0.1
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    feed_forward_proj: str = "relu"       # 'relu' (v1.0) | 'gated-gelu' (v1.1) | '[gated-]ACT'
    tie_word_embeddings: bool = True      # lm_head is the embedding matrix
    scale_decoder_outputs: bool = None    # multiply by d_model**-0.5 before the head;
                                          # None: when tied (HF 4.x's rule, v1.0 True, v1.1 False)
    decoder_start_token_id: int = 0
    pad_token_id: int = 0
    eos_token_id: int = 1
    model_type: str = "t5"

    _DERIVED = {"num_decoder_layers": lambda c: c.num_layers,
                "scale_decoder_outputs": lambda c: bool(c.tie_word_embeddings)}

    def __post_init__(self):
        super().__post_init__()
        parts = self.feed_forward_proj.split("-")
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or parts[-1] not in ACT2FN:
            raise ValueError(f"T5: feed_forward_proj {self.feed_forward_proj!r} should be 'ACT' or "
                             f"'gated-ACT' with ACT one of {sorted(ACT2FN)}")

    @property
    def is_gated_act(self):
        return self.feed_forward_proj.startswith("gated-")

    @property
    def dense_act_fn(self):
        act = self.feed_forward_proj.split("-")[-1]
        return "gelu_new" if self.feed_forward_proj == "gated-gelu" else act  # HF's legacy rule

    def to_dict(self):
        d = super().to_dict()
        d["dense_act_fn"], d["is_gated_act"] = self.dense_act_fn, self.is_gated_act
        return d


class T5Attention(nn.Module):
    """Multi-head attention without biases or 1/sqrt(d) scaling. The scores get `bias`
    (position bias + mask, (B|1, nh, T, S), 0 / -inf for masked keys) added."""

    def __init__(self, config, has_relative_attention_bias=False, bidirectional=True):
        super().__init__()
        self.n_heads, self.d_kv = config.num_heads, config.d_kv
        inner = config.num_heads * config.d_kv
        self.q = nn.Linear(config.d_model, inner, bias=False)
        self.k = nn.Linear(config.d_model, inner, bias=False)
        self.v = nn.Linear(config.d_model, inner, bias=False)
        self.o = nn.Linear(inner, config.d_model, bias=False)
        self.dropout = config.dropout_rate
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.RelativePositionBias(
                config.num_heads, config.relative_attention_num_buckets,
                config.relative_attention_max_distance, bidirectional=bidirectional)

    def forward(self, x, key_value_states=None, bias=None, cache=None):
        B, T, _ = x.shape
        nh, hs = self.n_heads, self.d_kv
        q = self.q(x).reshape(B, T, nh, hs).transpose(1, 2)                   # (B, nh, T, hs)
        if key_value_states is not None and cache is not None and cache.length:
            k, v = cache.key, cache.value                                      # encoder K/V, once
        else:
            src = x if key_value_states is None else key_value_states          # (B, S_new, d)
            S_new = src.shape[1]
            k = self.k(src).reshape(B, S_new, nh, hs).transpose(1, 2)          # (B, nh, S_new, hs)
            v = self.v(src).reshape(B, S_new, nh, hs).transpose(1, 2)
            if cache is not None:
                k, v = cache.update(k, v)                                      # (B, nh, S, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.o(y.transpose(1, 2).reshape(B, T, nh * hs))               # (B, T, d)


def _norm_and_dropout(config):
    """T5's RMSNorm and dropout: the pre-norm and output dropout of each sublayer, and the
    final norm and dropout of each stack."""
    return nn.RMSNorm(config.d_model, eps=config.layer_norm_epsilon), nn.Dropout(config.dropout_rate)


class T5LayerSelfAttention(nn.Module):
    def __init__(self, config, has_relative_attention_bias, bidirectional):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias, bidirectional)
        self.layer_norm, self.dropout = _norm_and_dropout(config)

    def forward(self, x, bias, cache=None):
        return x + self.dropout(self.SelfAttention(self.layer_norm(x), bias=bias, cache=cache))


class T5LayerCrossAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.EncDecAttention = T5Attention(config)
        self.layer_norm, self.dropout = _norm_and_dropout(config)

    def forward(self, x, encoder_states, bias, cache=None):
        y = self.EncDecAttention(self.layer_norm(x), key_value_states=encoder_states, bias=bias,
                                 cache=cache)
        return x + self.dropout(y)


class T5DenseReluDense(nn.Module):
    """wo(act(wi x)), or v1.1's gated wo(act(wi_0 x) * wi_1 x); HF calls both DenseReluDense."""

    def __init__(self, config):
        super().__init__()
        self.gated = config.is_gated_act
        if self.gated:
            self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
            self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        else:
            self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.act = ACT2FN[config.dense_act_fn]
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, x):
        h = self.act(self.wi_0(x)) * self.wi_1(x) if self.gated else self.act(self.wi(x))  # (B, T, d_ff)
        return self.wo(self.dropout(h))


class T5LayerFF(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.DenseReluDense = T5DenseReluDense(config)
        self.layer_norm, self.dropout = _norm_and_dropout(config)

    def forward(self, x):
        return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


class T5Block(nn.Module):
    def __init__(self, config, is_decoder, has_relative_attention_bias):
        super().__init__()
        self.is_decoder = is_decoder
        layers = [T5LayerSelfAttention(config, has_relative_attention_bias, not is_decoder)]
        if is_decoder:
            layers.append(T5LayerCrossAttention(config))
        layers.append(T5LayerFF(config))
        self.layer = nn.ModuleList(layers)

    def forward(self, x, self_bias, encoder_states=None, cross_bias=None, self_cache=None,
                cross_cache=None):
        x = self.layer[0](x, self_bias, self_cache)
        if self.is_decoder:
            x = self.layer[1](x, encoder_states, cross_bias, cross_cache)
        return self.layer[-1](x)


def _additive(allowed, like):
    """bool mask (True = may attend) -> 0 / -inf in the dtype of `like`."""
    return tt.where(allowed, 0.0, float("-inf")).to(like.dtype)


class T5Stack(nn.Module):
    """The encoder or the decoder: blocks, the first of which owns the position-bias table.
    Takes embeddings (the token embedding `shared` belongs to the model, used by both stacks)."""

    def __init__(self, config, is_decoder):
        super().__init__()
        self.is_decoder = is_decoder
        n = config.num_decoder_layers if is_decoder else config.num_layers
        self.block = nn.ModuleList([T5Block(config, is_decoder, i == 0) for i in range(n)])
        self.final_layer_norm, self.dropout = _norm_and_dropout(config)

    def forward(self, x, attention_mask=None, encoder_states=None, encoder_attention_mask=None,
                cache=None):
        """x (B, T, d) embeddings; attention_mask (B, past + T), 1 = token, 0 = padding;
        encoder_attention_mask (B, S) likewise. -> (B, T, d)."""
        B, T, _ = x.shape
        past = cache.length if cache is not None else 0
        S = past + T
        table = self.block[0].layer[0].SelfAttention.relative_attention_bias
        bias = table(T, S, past_length=past).to(x.dtype)                        # (1, nh, T, S)
        allowed = None
        if self.is_decoder:  # query i sits at past + i and sees keys 0 .. past + i
            xp = x.device.xp
            allowed = tt.as_tensor(xp.tril(xp.ones((T, S), dtype=bool), k=past), device=x.device)
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (B, S):
                raise ValueError(f"T5: attention_mask shape {tuple(attention_mask.shape)} should "
                                 f"be (batch, past + length) = ({B}, {S})")
            pad = attention_mask.to(tt.bool).reshape(B, 1, 1, S)               # (B, 1, 1, S)
            allowed = pad if allowed is None else allowed & pad                 # (B, 1, T, S)
        if allowed is not None:
            bias = bias + _additive(allowed, x)                                 # (B|1, nh, T, S)
        cross_bias = None
        if self.is_decoder and encoder_attention_mask is not None:
            Se = encoder_states.shape[1]
            cross_bias = _additive(encoder_attention_mask.to(tt.bool).reshape(B, 1, 1, Se), x)

        x = self.dropout(x)
        for i, block in enumerate(self.block):
            x = block(x, bias, encoder_states, cross_bias,
                      cache.self_attn[i] if cache is not None else None,
                      cache.cross_attn[i] if cache is not None else None)
        return self.dropout(self.final_layer_norm(x))


class T5(Seq2SeqGenerateMixin, SaveHF, nn.Module):
    """T5ForConditionalGeneration. `forward(input_ids, attention_mask, decoder_input_ids,
    decoder_attention_mask, labels)` -> `.logits` (B, T, vocab), `.loss` with labels
    (cross-entropy, -100 ignored; labels are NOT shifted: without decoder_input_ids the
    decoder reads the labels shifted right behind decoder_start_token_id, as in HF)."""

    def __init__(self, config=None, **overrides):
        super().__init__()
        self.config = config = model_config("T5", T5Config, config, overrides)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Stack(config, is_decoder=False)
        self.decoder = T5Stack(config, is_decoder=True)
        self.lm_head = None if config.tie_word_embeddings else \
            nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        # HF's T5 init (Mesh TensorFlow's): the missing 1/sqrt(d_kv) of attention lives in q's std
        c, f = self.config, self.config.initializer_factor
        std = {"q": (c.d_model * c.d_kv) ** -0.5, "k": c.d_model ** -0.5, "v": c.d_model ** -0.5,
               "o": (c.num_heads * c.d_kv) ** -0.5, "wi": c.d_model ** -0.5,
               "wi_0": c.d_model ** -0.5, "wi_1": c.d_model ** -0.5, "wo": c.d_ff ** -0.5,
               "relative_attention_bias": c.d_model ** -0.5, "shared": 1.0, "lm_head": 1.0}
        with tt.no_grad():
            for name, p in self.named_parameters():
                if "layer_norm" in name:
                    p.fill_(f)
                else:
                    owner = name.split(".")[-2]
                    p.copy_(tt.randn(*p.shape) * (f * std[owner]))

    # --------------------------------------------------------------- the seq2seq interface
    def encode(self, input_ids, attention_mask=None):
        """-> encoder states (B, S, d_model)."""
        return self.encoder(self.shared(input_ids), attention_mask)

    def decode(self, decoder_input_ids, encoder_states, encoder_attention_mask=None, cache=None,
               decoder_attention_mask=None):
        """-> logits (B, T, vocab) of the T decoder positions given (the new ones with a cache)."""
        h = self.decoder(self.shared(decoder_input_ids), decoder_attention_mask, encoder_states,
                         encoder_attention_mask, cache)                         # (B, T, d)
        if self.config.scale_decoder_outputs:
            h = h * self.config.d_model ** -0.5
        head = self.shared.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(h, head)                                                # (B, T, vocab)

    def new_cache(self):
        return Seq2SeqCache(self.config.num_decoder_layers)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None,
                decoder_attention_mask=None, labels=None, encoder_outputs=None, cache=None):
        enc = encoder_outputs if encoder_outputs is not None else self.encode(input_ids, attention_mask)
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("T5: pass decoder_input_ids or labels (which are shifted right "
                                 "to make decoder_input_ids)")
            decoder_input_ids = self.shift_right(labels)
        logits = self.decode(decoder_input_ids, enc, attention_mask, cache, decoder_attention_mask)
        return ModelOutput(logits=logits, loss=labels_loss(logits, labels),
                           encoder_last_hidden_state=enc, cache=cache)

    def shift_right(self, labels):
        """[start, y0, y1, ...] from labels [y0, y1, y2, ...]; -100 (ignored) becomes pad
        (HF's T5 _shift_right, which is shift_tokens_right)."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)
