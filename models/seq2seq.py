"""Generation for encoder-decoder models: greedy, sampling and beam search, with a KV cache.

    out = generate_seq2seq(model, input_ids, attention_mask, max_new_tokens=20, num_beams=4)
    # (B, 1 + n) decoder token ids, starting with decoder_start_token_id

The model interface this relies on (T5, BART, Marian and the 2017 Transformer all provide it):

    model.encode(input_ids, attention_mask) -> encoder_states          (B, S, d) Tensor
    model.decode(decoder_input_ids, encoder_states, encoder_attention_mask, cache=None)
        -> logits (B, T, vocab) for the T decoder positions passed in. With a cache, only the
        new positions are passed; the decoder reads the earlier ones from the cache (and the
        cross-attention keys/values, computed once from encoder_states on the first call).
    model.new_cache() -> an object with `.length` (decoder positions cached so far) and
        `.select(index)` (keep/reorder batch rows; beam search moves beams around with it).
        `Seq2SeqCache` below is such an object: one growing self-attention `nn.KVCache`
        and one static cross-attention `nn.KVCache` per decoder layer.
    model.generate(...) -> generate_seq2seq(model, ...), from Seq2SeqGenerateMixin.
    model.config: eos_token_id, pad_token_id, decoder_start_token_id (or bos_token_id)
        give the defaults of the arguments of the same names.

Greedy decoding and beam search follow HuggingFace transformers 5.x token for token
(`GenerationMixin._sample` / `_beam_search`): a row that produced EOS is padded with
pad_token_id afterwards (greedy); beam search is models.beam.beam_search, whose docstring
lists HF's conventions (candidates per step, length_penalty, early_stopping, padding), with
the start token as the one-token prompt.
"""
import numpy as np

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F

from .beam import beam_search
from .decoder import DecoderCache
from .generation import _choose, check_generation_args, evaluating, vocab_size


class Seq2SeqCache(DecoderCache):
    """Decoder state for incremental decoding: per layer, the self-attention keys/values of
    the positions decoded so far, and (`cross_attn[i]`, a static nn.KVCache) the
    cross-attention keys/values of the encoder states, projected on the first step."""

    def __init__(self, num_layers):
        super().__init__(num_layers)
        self.cross_attn = [nn.KVCache(static=True) for _ in range(num_layers)]

    def caches(self):  # every nn.KVCache held
        return self.self_attn + self.cross_attn


def shift_tokens_right(labels, pad_token_id, decoder_start_token_id):
    """(B, T) labels -> (B, T) decoder inputs [start, labels[:, :-1]] with -100 (ignored
    labels) replaced by pad: HF's shift_tokens_right (teacher forcing: position t sees the
    targets before t)."""
    if pad_token_id is None or decoder_start_token_id is None:
        raise ValueError("shift_tokens_right: pad_token_id and decoder_start_token_id must be set, "
                         f"got {pad_token_id!r} and {decoder_start_token_id!r}")
    start = tt.full((labels.shape[0], 1), decoder_start_token_id, dtype=labels.dtype,
                    device=labels.device)
    shifted = tt.cat([start, labels[:, :-1]], dim=1)                       # (B, T)
    return tt.where(shifted == -100, tt.full_like(shifted, pad_token_id), shifted)


def labels_loss(logits, labels, label_smoothing=0.0):
    """Cross-entropy of each position's logits (B, T, vocab) against the label (B, T) at the
    same position, -100 ignored; None without labels. Unlike decoder.next_token_loss nothing
    is shifted here: the decoder's inputs are the labels shifted right (shift_tokens_right)."""
    if labels is None:
        return None
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100, label_smoothing=label_smoothing)


def key_padding(attention_mask):
    """(B, S) attention mask, 1 = token, 0 = padding -> bool (B, S), True = padding (the
    key_padding_mask of nn.MultiHeadAttention); None stays None."""
    return None if attention_mask is None else attention_mask == 0


class Seq2SeqGenerateMixin:
    def generate(self, input_ids, max_new_tokens=20, attention_mask=None, **kwargs):
        """Decoder ids (B, 1 + up to max_new_tokens), starting with decoder_start_token_id:
        greedy, sampling or beam search (num_beams, length_penalty) with a KV cache; see
        generate_seq2seq for every option."""
        return generate_seq2seq(self, input_ids, attention_mask=attention_mask,
                                max_new_tokens=max_new_tokens, **kwargs)


def generate_seq2seq(model, input_ids, attention_mask=None, max_new_tokens=20, num_beams=1,
                     length_penalty=1.0, eos_token_id=None, decoder_start_token_id=None,
                     do_sample=False, temperature=1.0, top_k=None, top_p=None, seed=None,
                     use_cache=True, early_stopping=False, pad_token_id=None,
                     num_return_sequences=1):
    """Decode up to `max_new_tokens` tokens for each row of `input_ids` (B, S).

    Returns int64 decoder ids (B * num_return_sequences, 1 + n), n <= max_new_tokens, each
    row starting with decoder_start_token_id. Greedy unless do_sample=True (temperature,
    top_k, top_p; `seed` makes it reproducible). num_beams > 1 runs beam search (with
    do_sample: beam sampling). eos_token_id may be an int or a list of ints; None takes
    model.config's, and [] never stops early.
    """
    config = getattr(model, "config", None)
    if not isinstance(input_ids, tt.Tensor):
        input_ids = tt.tensor(np.asarray(input_ids), dtype=tt.int64)
    if input_ids.ndim != 2:
        raise ValueError(f"generate_seq2seq: input_ids must be (batch, length), got shape "
                         f"{tuple(input_ids.shape)}")
    if attention_mask is not None and not isinstance(attention_mask, tt.Tensor):
        attention_mask = tt.tensor(np.asarray(attention_mask), device=input_ids.device)
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"generate_seq2seq: attention_mask shape {tuple(attention_mask.shape)} "
                         f"differs from input_ids shape {tuple(input_ids.shape)}")

    given = {"eos_token_id": eos_token_id, "pad_token_id": pad_token_id,
             "decoder_start_token_id": decoder_start_token_id}
    from_config = {name for name, v in given.items() if v is None}  # named so in errors
    eos = eos_token_id if eos_token_id is not None else getattr(config, "eos_token_id", None)
    pad = pad_token_id if pad_token_id is not None else getattr(config, "pad_token_id", None)
    start = decoder_start_token_id
    for name in ("decoder_start_token_id", "bos_token_id"):
        if start is None:
            start = getattr(config, name, None)
    if start is None:
        raise ValueError("generate_seq2seq: no decoder_start_token_id given and model.config has "
                         "neither decoder_start_token_id nor bos_token_id")
    eos = check_generation_args(
        "generate_seq2seq", vocab_size(model), max_new_tokens=max_new_tokens, do_sample=do_sample,
        temperature=temperature, top_k=top_k, top_p=top_p, use_cache=use_cache,
        eos_token_id=eos, num_beams=num_beams, num_return_sequences=num_return_sequences,
        length_penalty=length_penalty, early_stopping=early_stopping, pad_token_id=pad,
        decoder_start_token_id=start, from_config=from_config)
    if pad is None and eos:
        pad = eos[0]

    rng = np.random.default_rng(seed)
    with evaluating(model):  # dropout off; each layer's own mode comes back afterwards
        with tt.no_grad():
            encoder_states = model.encode(input_ids, attention_mask)  # (B, S, d)
            if num_beams == 1:
                stepper = _Stepper(model, encoder_states, attention_mask, use_cache)
                out = _greedy(stepper, input_ids.shape[0], max_new_tokens, start, eos, pad,
                              do_sample, temperature, top_k, top_p, rng)
            else:
                # each input row becomes num_beams consecutive rows (HF's repeat_interleave)
                B = input_ids.shape[0]
                rows = tt.as_tensor(np.repeat(np.arange(B), num_beams), device=input_ids.device)
                mask = attention_mask[rows] if attention_mask is not None else None
                stepper = _Stepper(model, encoder_states[rows], mask, use_cache)
                out = beam_search(stepper, np.full((B, 1), start, dtype=np.int64), num_beams,
                                  max_new_tokens, eos, pad, length_penalty, early_stopping,
                                  num_return_sequences, do_sample, temperature, top_k, top_p, rng)
    return tt.tensor(out, dtype=tt.int64, device=input_ids.device)


class _Stepper:
    """Runs the decoder on the tokens so far and returns the next-token logits, feeding only
    the new positions when a cache is used."""

    def __init__(self, model, encoder_states, encoder_mask, use_cache):
        self.model, self.encoder_states, self.encoder_mask = model, encoder_states, encoder_mask
        self.cache = model.new_cache() if use_cache else None

    def next_logits(self, seqs):  # seqs (N, t) int64 numpy -> (N, vocab) float32 numpy
        new = seqs[:, self.cache.length:] if self.cache is not None else seqs
        ids = tt.tensor(np.ascontiguousarray(new), dtype=tt.int64, device=self.encoder_states.device)
        logits = self.model.decode(ids, self.encoder_states, self.encoder_mask, cache=self.cache)
        return logits[:, -1].float().numpy().astype(np.float32)

    def select(self, index):  # the rows of the next step are these rows of this one
        if self.cache is not None:
            self.cache.select(index)


def _greedy(stepper, B, max_new_tokens, start, eos, pad, do_sample, temperature, top_k, top_p, rng):
    seqs = np.full((B, 1), start, dtype=np.int64)
    unfinished = np.ones(B, dtype=bool)
    for _ in range(max_new_tokens):
        logits = stepper.next_logits(seqs)  # (B, vocab)
        nxt = _choose(logits, temperature, top_k, top_p, do_sample, rng).astype(np.int64)
        if eos:
            nxt = np.where(unfinished, nxt, pad)
            unfinished &= ~np.isin(nxt, eos)
        seqs = np.concatenate([seqs, nxt[:, None]], axis=1)
        if not unfinished.any():
            break
    return seqs
