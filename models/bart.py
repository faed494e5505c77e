"""BART and Marian: two configurations of one Post-LN encoder-decoder.

    encoder:  x = embed_tokens(ids) * embed_scale + positions  [-> layernorm_embedding]
              each layer:  x = self_attn_layer_norm(x + self_attn(x))
                           x = final_layer_norm(x + fc2(act(fc1(x))))
    decoder:  the same, plus between the two blocks
                           x = encoder_attn_layer_norm(x + encoder_attn(x, encoder_states))
    logits:   x @ embed_tokens.weight^T + final_logits_bias      (LM head tied to the embedding)

                 BART (facebook/bart-*)                Marian (Helsinki-NLP/opus-mt-*)
    positions    learned table, row p + 2 (offset)     fixed sinusoids, [sin | cos] halves
    embeddings   LayerNorm after adding positions      no layernorm_embedding
    scale        scale_embedding (usually False)       scale_embedding (usually True: sqrt(d))
    activation   gelu                                   swish (silu) in the released models

The token embedding `shared` is used by the encoder, the decoder and the LM head (Marian can
instead keep separate encoder/decoder vocabularies: share_encoder_decoder_embeddings=False,
the head then tied to the decoder's; tie_word_embeddings=False unties all, as HF v5 does).
`final_logits_bias` is a buffer (not trained), as in HF. Parameter names are those of HF's
BartModel / MarianModel, so `model.` is all that separates them from a checkpoint's names.
"""
import math
from dataclasses import dataclass

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .activations import activation
from .config import ModelConfig, check_pad_token_id, model_config
from .hf import SaveHF
from .init import normal_init
from .output import ModelOutput
from .seq2seq import Seq2SeqCache, Seq2SeqGenerateMixin, key_padding, labels_loss, shift_tokens_right


@dataclass
class BartConfig(ModelConfig):
    """Field names and defaults are those of HuggingFace's BartConfig."""
    vocab_size: int = 50265
    max_position_embeddings: int = 1024
    d_model: int = 1024
    encoder_layers: int = 12
    decoder_layers: int = 12
    encoder_attention_heads: int = 16
    decoder_attention_heads: int = 16
    encoder_ffn_dim: int = 4096
    decoder_ffn_dim: int = 4096
    encoder_layerdrop: float = 0.0
    decoder_layerdrop: float = 0.0
    activation_function: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    init_std: float = 0.02
    scale_embedding: bool = False
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    forced_eos_token_id: int = 2
    tie_word_embeddings: bool = True
    is_encoder_decoder: bool = True
    model_type: str = "bart"

    @property
    def learned_positions(self):
        return self.model_type == "bart"


@dataclass
class MarianConfig(BartConfig):
    """Field names and defaults are those of HuggingFace's MarianConfig."""
    vocab_size: int = 58101
    decoder_vocab_size: int = None        # None: same as vocab_size
    pad_token_id: int = 58100
    bos_token_id: int = None
    eos_token_id: int = 0
    decoder_start_token_id: int = 58100   # Marian starts decoding from the pad token
    forced_eos_token_id: int = 0
    share_encoder_decoder_embeddings: bool = True
    model_type: str = "marian"

    _DERIVED = {"decoder_vocab_size": lambda c: c.vocab_size}


class _FeedForward:
    """What encoder and decoder layers share: final_layer_norm(x + fc2(act(fc1(x))))."""

    def _add_feed_forward(self, config, ffn_dim):
        d = config.d_model
        self.fc1 = nn.Linear(d, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)
        self.act = activation(config.activation_function, "BART/Marian", "activation_function")
        self.dropout, self.activation_dropout = config.dropout, config.activation_dropout

    def _drop(self, x):
        return F.dropout(x, self.dropout, self.training)

    def _feed_forward(self, x):
        h = F.dropout(self.act(self.fc1(x)), self.activation_dropout, self.training)  # (B, T, ffn)
        return self.final_layer_norm(x + self._drop(self.fc2(h)))


class EncoderLayer(_FeedForward, nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.d_model
        self.self_attn = nn.MultiHeadAttention(d, config.encoder_attention_heads,
                                               dropout=config.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self._add_feed_forward(config, config.encoder_ffn_dim)

    def forward(self, x, padding):  # x (B, S, d), padding (B, S) bool
        h = self.self_attn(x, key_padding_mask=padding)
        x = self.self_attn_layer_norm(x + self._drop(h))
        return self._feed_forward(x)


class DecoderLayer(_FeedForward, nn.Module):
    def __init__(self, config):
        super().__init__()
        d, nh = config.d_model, config.decoder_attention_heads
        self.self_attn = nn.MultiHeadAttention(d, nh, dropout=config.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = nn.MultiHeadAttention(d, nh, dropout=config.attention_dropout)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self._add_feed_forward(config, config.decoder_ffn_dim)

    def forward(self, x, padding, encoder_states, encoder_padding, self_cache=None, cross_cache=None):
        # x (B, T, d); padding (B, past + T); encoder_states (B, S, d); encoder_padding (B, S)
        h = self.self_attn(x, key_padding_mask=padding, is_causal=True, cache=self_cache)
        x = self.self_attn_layer_norm(x + self._drop(h))
        h = self.encoder_attn(x, encoder_states, key_padding_mask=encoder_padding, cache=cross_cache)
        x = self.encoder_attn_layer_norm(x + self._drop(h))
        return self._feed_forward(x)


class _Stack(nn.Module):
    """What encoder and decoder share: token + position embeddings and a layer list."""

    def __init__(self, config, embed_tokens, layers):
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens  # the model's `shared` unless Marian unshares them
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        if config.learned_positions:
            self.embed_positions = nn.LearnedPositionalEmbedding(
                config.max_position_embeddings, config.d_model, offset=2)
            self.layernorm_embedding = nn.LayerNorm(config.d_model)
        else:  # fixed, so not in the state dict (HF Marian does not save them either)
            self.embed_positions = nn.SinusoidalPositionalEmbedding(
                config.max_position_embeddings, config.d_model, interleaved=False)
            self.layernorm_embedding = None
        self.layers = nn.ModuleList(layers)

    def embed(self, ids, past=0):  # ids (B, T) -> (B, T, d)
        T = ids.shape[1]
        if past + T > self.config.max_position_embeddings:
            raise ValueError(f"{type(self).__name__}: positions up to {past + T} exceed "
                             f"max_position_embeddings {self.config.max_position_embeddings}")
        x = self.embed_tokens(ids)                                          # (B, T, d)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        if self.config.learned_positions:
            pos = self.embed_positions(T, past_length=past)                 # (T, d)
        else:
            pos = self.embed_positions(T, past_length=past, dtype=x.dtype, device=x.device)
        x = x + pos
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        return F.dropout(x, self.config.dropout, self.training)

    def _skip(self, layerdrop):
        # LayerDrop (Fan et al. 2019): in training, skip each layer with this probability
        return self.training and layerdrop > 0 and tt.rand(1).item() < layerdrop


class Encoder(_Stack):
    def __init__(self, config, embed_tokens):
        super().__init__(config, embed_tokens,
                         [EncoderLayer(config) for _ in range(config.encoder_layers)])

    def forward(self, input_ids, attention_mask=None):  # (B, S) -> (B, S, d)
        x = self.embed(input_ids)
        padding = key_padding(attention_mask)
        for layer in self.layers:
            if not self._skip(self.config.encoder_layerdrop):
                x = layer(x, padding)
        return x


class Decoder(_Stack):
    def __init__(self, config, embed_tokens):
        super().__init__(config, embed_tokens,
                         [DecoderLayer(config) for _ in range(config.decoder_layers)])

    def forward(self, input_ids, encoder_states, encoder_attention_mask=None, attention_mask=None,
                cache=None):  # (B, T) -> (B, T, d)
        x = self.embed(input_ids, cache.length if cache is not None else 0)
        padding, encoder_padding = key_padding(attention_mask), key_padding(encoder_attention_mask)
        for i, layer in enumerate(self.layers):
            if cache is None and self._skip(self.config.decoder_layerdrop):
                continue
            caches = (cache.self_attn[i], cache.cross_attn[i]) if cache is not None else ()
            x = layer(x, padding, encoder_states, encoder_padding, *caches)
        return x


class EncoderDecoder(Seq2SeqGenerateMixin, SaveHF, nn.Module):
    """The common model; use BART or Marian. forward(input_ids, attention_mask,
    decoder_input_ids, decoder_attention_mask, labels) -> .logits (B, T, vocab) and, with
    labels, .loss (cross-entropy over every label that is not -100; labels are NOT shifted:
    decoder_input_ids default to shift_tokens_right(labels)), as HF's *ForConditionalGeneration."""

    config_class = BartConfig

    def __init__(self, config=None, **overrides):
        super().__init__()
        name = type(self).__name__
        self.config = config = model_config(name, self.config_class, config, overrides)
        d, pad = config.d_model, config.pad_token_id
        shared = getattr(config, "share_encoder_decoder_embeddings", True)
        decoder_vocab = getattr(config, "decoder_vocab_size", None) or config.vocab_size
        if shared and decoder_vocab != config.vocab_size:
            raise ValueError(f"{name}: shared embeddings need decoder_vocab_size "
                             f"({decoder_vocab}) == vocab_size ({config.vocab_size})")
        check_pad_token_id(name, config, *(("vocab_size",) if shared else
                                           ("vocab_size", "decoder_vocab_size")))
        if shared:
            # registered first, so the state dict names it `shared` (not encoder.embed_tokens)
            self.shared = nn.Embedding(config.vocab_size, d, padding_idx=pad)
        if shared and config.tie_word_embeddings:
            enc_embed = dec_embed = self.shared
        else:
            # HF (v5) ties nothing when tie_word_embeddings=False: `shared` is then left unused
            enc_embed = nn.Embedding(config.vocab_size, d, padding_idx=pad)
            dec_embed = nn.Embedding(decoder_vocab, d, padding_idx=pad)
        self.encoder = Encoder(config, enc_embed)
        self.decoder = Decoder(config, dec_embed)
        # the LM head reads the decoder's embedding unless untied
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(d, decoder_vocab, bias=False)
        self.register_buffer("final_logits_bias", tt.zeros(1, decoder_vocab))
        self._init_weights()

    def _init_weights(self):
        # HF's scheme: N(0, init_std) for Linear and Embedding weights (pad row zero), zero biases,
        # LayerNorm weight 1; the learned BART positions too
        normal_init(self, self.config.init_std, lambda name: "layer_norm" in name or "layernorm" in name,
                    [(m.weight, m.padding_idx) for m in self.modules() if isinstance(m, nn.Embedding)])

    # ------------------------------------------------------------------ the model
    def encode(self, input_ids, attention_mask=None):
        """(B, S) ids -> encoder states (B, S, d_model)."""
        return self.encoder(input_ids, attention_mask)

    def decode(self, decoder_input_ids, encoder_states, encoder_attention_mask=None, cache=None,
               decoder_attention_mask=None):
        """(B, T) decoder ids (just the new ones when `cache` holds the earlier ones) ->
        logits (B, T, vocab). decoder_attention_mask, if given, covers past + new positions."""
        h = self.decoder(decoder_input_ids, encoder_states, encoder_attention_mask,
                         decoder_attention_mask, cache)                      # (B, T, d)
        weight = self.lm_head.weight if self.lm_head is not None else self.decoder.embed_tokens.weight
        return F.linear(h, weight) + self.final_logits_bias                 # (B, T, vocab)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None,
                decoder_attention_mask=None, labels=None, encoder_outputs=None, cache=None):
        """encoder_outputs: encoder states (B, S, d) from `encode`, to skip the encoder;
        cache: from `new_cache()`, then decoder_input_ids are just the new positions."""
        c = self.config
        if decoder_input_ids is None:
            if labels is not None:
                decoder_input_ids = shift_tokens_right(labels, c.pad_token_id, c.decoder_start_token_id)
            elif c.model_type == "bart" and input_ids is not None:  # BART's denoising default
                decoder_input_ids = shift_tokens_right(input_ids, c.pad_token_id,
                                                       c.decoder_start_token_id)
            else:
                raise ValueError(f"{type(self).__name__}: pass decoder_input_ids or labels")
        encoder_states = encoder_outputs
        if encoder_states is None:
            if input_ids is None:
                raise ValueError(f"{type(self).__name__}: pass input_ids or encoder_outputs")
            encoder_states = self.encode(input_ids, attention_mask)         # (B, S, d)
        logits = self.decode(decoder_input_ids, encoder_states, attention_mask, cache,
                             decoder_attention_mask)                         # (B, T, vocab)
        return ModelOutput(logits=logits, loss=labels_loss(logits, labels),
                           encoder_last_hidden_state=encoder_states, cache=cache)

    def new_cache(self):
        """Per decoder layer, self- and cross-attention keys/values (models.seq2seq)."""
        return Seq2SeqCache(self.config.decoder_layers)


class BART(EncoderDecoder):
    """BART (Lewis et al. 2019): learned positions (offset 2), layernorm_embedding, GELU."""
    config_class = BartConfig


class Marian(EncoderDecoder):
    """Marian NMT (opus-mt): sinusoidal positions, scaled embeddings, no layernorm_embedding."""
    config_class = MarianConfig
