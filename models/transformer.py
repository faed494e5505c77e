"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017): an encoder-decoder.

    src, tgt embeddings:  shared(ids) * sqrt(d_model) + PE(pos)       then dropout
        PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))
    encoder layer (Post-LN):  x = LN(x + Dropout(SelfAttn(x)));  x = LN(x + Dropout(FFN(x)))
    decoder layer (Post-LN):  masked self-attention, cross-attention over the encoder
                              states, FFN; each followed by Add & LN
    FFN(x) = max(0, x W1 + b1) W2 + b2
    logits = h @ shared.weight^T        one matrix for source, target and output (section 3.4)
    loss:    cross-entropy with label smoothing 0.1 (section 5.4)
    optimizer: Adam(0.9, 0.98, 1e-9), lr = d^-0.5 * min(n^-0.5, n * warmup^-1.5)  (section 5.3)

The layers are nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (as torch.nn's);
there are no final stack norms (Post-LN layers already end in one; torch.nn.Transformer
adds them anyway). There is no HuggingFace reference for this model, so there is no
from_hf; tests check it against torch.nn.Transformer (final norms removed) with the same weights.
Config field names are those of HF's BART/Marian configs where such a field exists.
"""
import math
from dataclasses import dataclass

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .config import ModelConfig, check_pad_token_id, model_config
from .output import ModelOutput
from .seq2seq import Seq2SeqCache, Seq2SeqGenerateMixin, key_padding, labels_loss, shift_tokens_right


@dataclass
class TransformerConfig(ModelConfig):
    """The paper's base model by default (Table 3); BART/Marian field names."""
    vocab_size: int = 37000               # the shared source/target BPE vocabulary (EN-DE)
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    max_position_embeddings: int = 1024   # longest source or target sequence accepted
    dropout: float = 0.1                  # P_drop: sublayer outputs and embedding sums
    attention_dropout: float = 0.0        # on attention weights (not in the paper)
    activation_dropout: float = 0.0       # inside the FFN, after ReLU (not in the paper)
    label_smoothing: float = 0.1          # epsilon_ls
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True          # multiply embeddings by sqrt(d_model)
    pad_token_id: int = 0
    bos_token_id: int = 1
    eos_token_id: int = 2
    decoder_start_token_id: int = 1
    model_type: str = "transformer"


class Transformer(Seq2SeqGenerateMixin, nn.Module):
    """forward(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, labels)
    -> .logits (B, T, vocab) and, with labels, .loss (label-smoothed cross-entropy over
    labels that are not -100; labels are NOT shifted, decoder_input_ids default to
    shift_tokens_right(labels)), as HF's *ForConditionalGeneration."""

    def __init__(self, config=None, **overrides):
        super().__init__()
        c = self.config = model_config("Transformer", TransformerConfig, config, overrides)
        check_pad_token_id("Transformer", c, "vocab_size")
        if c.d_model % c.encoder_attention_heads or c.d_model % c.decoder_attention_heads:
            raise ValueError(f"Transformer: d_model {c.d_model} is not divisible by the number of "
                             f"heads ({c.encoder_attention_heads}, {c.decoder_attention_heads})")
        self.shared = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_token_id)
        self.positions = nn.SinusoidalPositionalEmbedding(c.max_position_embeddings, c.d_model,
                                                          interleaved=True)
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        self.dropout = nn.Dropout(c.dropout)
        common = dict(dropout=c.dropout, activation="relu", layer_norm_eps=c.layer_norm_eps,
                      norm_first=False, batch_first=True)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(
            c.d_model, c.encoder_attention_heads, c.encoder_ffn_dim, **common), c.encoder_layers)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(
            c.d_model, c.decoder_attention_heads, c.decoder_ffn_dim, **common), c.decoder_layers)
        for layer in list(self.encoder.layers) + list(self.decoder.layers):
            # the nn layers use one rate everywhere (as torch's); the paper drops only sublayer outputs
            for attn in (layer.self_attn, getattr(layer, "cross_attn", None)):
                if attn is not None:
                    attn.dropout = c.attention_dropout
            layer.ffn.dropout = c.activation_dropout
        self._init_weights()

    def _init_weights(self):
        # Glorot-uniform matrices (as torch.nn.Transformer), zero biases; embeddings
        # N(0, d^-0.5), so that after the sqrt(d) scaling they have unit variance
        with tt.no_grad():
            for name, p in self.named_parameters():
                if name == "shared.weight":
                    p.copy_(tt.randn(*p.shape) * self.config.d_model ** -0.5)
                    if self.shared.padding_idx is not None:
                        p[self.shared.padding_idx] = 0.0
                elif ".norm" in name:
                    continue  # LayerNorm: weight 1, bias 0
                elif p.ndim > 1:
                    nn.init.xavier_uniform_(p)
                else:
                    p.zero_()

    # ------------------------------------------------------------------ the model
    def embed(self, ids, past=0):
        """(B, T) ids at positions past .. past+T-1 -> (B, T, d_model)."""
        T = ids.shape[1]
        if past + T > self.config.max_position_embeddings:
            raise ValueError(f"Transformer: sequence length {past + T} exceeds "
                             f"max_position_embeddings {self.config.max_position_embeddings}")
        x = self.shared(ids) * self.embed_scale                                   # (B, T, d)
        pe = self.positions(T, past_length=past, dtype=x.dtype, device=ids.device)  # (T, d)
        return self.dropout(x + pe)

    def encode(self, input_ids, attention_mask=None):
        """(B, S) source ids -> encoder states (B, S, d_model)."""
        return self.encoder(self.embed(input_ids), src_key_padding_mask=key_padding(attention_mask))

    def decode(self, decoder_input_ids, encoder_states, encoder_attention_mask=None, cache=None,
               decoder_attention_mask=None):
        """(B, T) decoder ids (just the new ones when `cache` holds the earlier ones) ->
        logits (B, T, vocab). decoder_attention_mask, if given, covers past + new positions."""
        past = cache.length if cache is not None else 0
        # nn.TransformerDecoder takes one (self, cross) KVCache pair per layer
        layer_caches = None if cache is None else list(zip(cache.self_attn, cache.cross_attn))
        h = self.decoder(self.embed(decoder_input_ids, past), encoder_states,
                         tgt_key_padding_mask=key_padding(decoder_attention_mask),
                         memory_key_padding_mask=key_padding(encoder_attention_mask),
                         tgt_is_causal=True, cache=layer_caches)                  # (B, T, d)
        return F.linear(h, self.shared.weight)                                     # (B, T, vocab)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None,
                decoder_attention_mask=None, labels=None, encoder_states=None, cache=None):
        c = self.config
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("Transformer: pass decoder_input_ids or labels")
            decoder_input_ids = shift_tokens_right(labels, c.pad_token_id, c.decoder_start_token_id)
        if encoder_states is None:
            if input_ids is None:
                raise ValueError("Transformer: pass input_ids or encoder_states")
            encoder_states = self.encode(input_ids, attention_mask)                 # (B, S, d)
        logits = self.decode(decoder_input_ids, encoder_states, attention_mask, cache,
                             decoder_attention_mask)                                # (B, T, vocab)
        loss = labels_loss(logits, labels, c.label_smoothing)
        return ModelOutput(logits=logits, loss=loss, encoder_states=encoder_states, cache=cache)

    def new_cache(self):
        return Seq2SeqCache(self.config.decoder_layers)


def paper_optimizer(model, warmup_steps=4000, lr_scale=1.0):
    """Adam(beta1=0.9, beta2=0.98, eps=1e-9) with the paper's schedule (section 5.3):
    lr = lr_scale * d_model^-0.5 * min(n^-0.5, n * warmup_steps^-1.5). Returns
    (optimizer, scheduler); call scheduler.step() after each optimizer.step()."""
    opt = nn.optim.Adam(model.parameters(), lr=lr_scale, betas=(0.9, 0.98), eps=1e-9)
    sched = nn.schedules.LambdaLR(opt, nn.schedules.transformer_schedule(model.config.d_model,
                                                                         warmup_steps))
    return opt, sched
