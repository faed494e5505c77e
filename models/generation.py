"""Text generation for decoder-only models: greedy, temperature, top-k and top-p sampling,
and beam search (models.beam, as HF's generate(num_beams=...)), with a KV cache so each new
token costs one position, not a re-run of the prefix.
`check_generation_args` validates the arguments of this and of models.seq2seq's generation."""
import contextlib
import inspect
import math
import numbers

import numpy as np

import tinytensor as tt

from .beam import beam_search


def generate(model, input_ids, max_new_tokens=20, temperature=1.0, top_k=None, top_p=None,
             do_sample=False, eos_token_id=None, seed=None, use_cache=True, attention_mask=None,
             num_beams=1, length_penalty=1.0, early_stopping=False, num_return_sequences=1,
             pad_token_id=None):
    """Append up to `max_new_tokens` tokens to `input_ids` (B, T); returns (B, T + new).

    Greedy unless do_sample=True. A row that produced `eos_token_id` (an int or a list of
    ints) is filled with pad_token_id afterwards, or without one keeps emitting the id it
    produced. Bad arguments raise ValueError (see check_generation_args for the allowed values).
    `seed` makes sampling reproducible without touching the global generator.

    num_beams > 1 runs beam search token for token as HF's generate(num_beams=...) (with
    do_sample: beam sampling), and returns (B * num_return_sequences, T + n), n <= max_new_tokens:
    each row's best finished hypotheses, best first, the shorter ones filled with pad_token_id
    (0 or None: the first EOS id). length_penalty and early_stopping are HF's; see models.beam.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"generate: input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
    if input_ids.shape[1] == 0:  # no last token to continue from
        raise ValueError(f"generate: input_ids of shape {tuple(input_ids.shape)} holds no tokens; "
                         "start from the model's bos_token_id (as transformers' generate does "
                         "without input_ids)")
    eos = check_generation_args("generate", vocab_size(model), max_new_tokens=max_new_tokens,
                                do_sample=do_sample, temperature=temperature, top_k=top_k,
                                top_p=top_p, use_cache=use_cache, eos_token_id=eos_token_id,
                                num_beams=num_beams, num_return_sequences=num_return_sequences,
                                length_penalty=length_penalty, early_stopping=early_stopping,
                                pad_token_id=pad_token_id)
    rng = np.random.default_rng(seed)
    B = input_ids.shape[0]
    with evaluating(model):  # dropout off; each layer's own mode comes back afterwards
        with tt.no_grad():
            if num_beams > 1:
                # each input row becomes num_beams consecutive rows (HF's repeat_interleave)
                rows = tt.as_tensor(np.repeat(np.arange(B), num_beams), device=input_ids.device)
                mask = attention_mask[rows] if attention_mask is not None else None
                out = beam_search(_Stepper(model, mask, use_cache, input_ids.device),
                                  input_ids.numpy().astype(np.int64), num_beams, max_new_tokens,
                                  eos, pad_token_id, length_penalty, early_stopping,
                                  num_return_sequences, do_sample, temperature, top_k, top_p, rng)
                return tt.tensor(out, dtype=tt.int64, device=input_ids.device)
            stepper = _Stepper(model, attention_mask, use_cache, input_ids.device)
            ids = input_ids
            done = np.zeros(B, dtype=bool)
            ended = np.zeros(B, dtype=np.int64)  # the eos id each finished row keeps emitting
            for _ in range(max_new_tokens):
                logits = stepper.next_logits(ids).astype(np.float64)  # (B, vocab)
                nxt = _choose(logits, temperature, top_k, top_p, do_sample, rng)
                if eos:
                    nxt = np.where(done, ended if pad_token_id is None else pad_token_id, nxt)
                    ended = np.where(done, ended, nxt)
                    done |= np.isin(nxt, eos)
                new = tt.tensor(nxt.reshape(B, 1), dtype=tt.int64, device=ids.device)
                ids = tt.cat([ids, new], dim=1)
                if eos and done.all():
                    break
    return ids


class _Stepper:
    """Runs the model on the tokens so far and returns the next-token logits. With a cache
    only the positions it lacks are fed; past the context (config.n_positions) the window
    slides, re-reading its second half afresh (without a cache: the last n_positions)."""

    def __init__(self, model, attention_mask, use_cache, device):
        self.model, self.mask, self.device = model, attention_mask, device
        self.cache = model.new_cache() if use_cache else None
        self.start = 0  # the sequence position of the first token the cache holds
        self.max_len = getattr(getattr(model, "config", None), "n_positions", None)
        self.takes_positions = "position_ids" in inspect.signature(model.forward).parameters

    def next_logits(self, ids):  # ids (N, t) Tensor or int64 numpy -> (N, vocab) float32 numpy
        t = ids.shape[1]
        if self.cache is None:
            past, first = 0, max(0, t - self.max_len) if self.max_len is not None else 0
        else:
            if self.max_len is not None and t - self.start > self.max_len:
                # past the context: slide the window, re-reading its second half afresh
                self.cache = self.model.new_cache()
                self.start = t - max(1, self.max_len // 2)
            past = self.cache.length
            first = self.start + past
        step_input = ids[:, first:]
        if not isinstance(step_input, tt.Tensor):
            step_input = tt.tensor(np.ascontiguousarray(step_input), dtype=tt.int64, device=self.device)
        kw = {}
        if self.mask is not None:
            if self.mask.shape[1] < t:  # the generated tokens are real ones
                grow = tt.ones(self.mask.shape[0], t - self.mask.shape[1], dtype=self.mask.dtype,
                               device=self.mask.device)
                self.mask = tt.cat([self.mask, grow], dim=1)
            kw["attention_mask"] = step_mask = self.mask[:, first - past:t]
            if self.takes_positions:
                # a left-padded row's positions start at its first real token (as HF's generate)
                m = step_mask.to(tt.int64)
                pos = m.cumsum(-1) - 1
                pos = tt.where(m > 0, pos, tt.ones_like(pos))
                kw["position_ids"] = pos[:, -step_input.shape[1]:]   # (N, T_step)
        out = self.model(step_input, cache=self.cache, **kw)
        return out.logits[:, -1].float().numpy()

    def select(self, index):  # the rows of the next step are these rows of this one
        if self.cache is not None:
            self.cache.select(index)


def vocab_size(model):
    """The number of token ids the model's (decoder's) head scores, or None if unknown."""
    config = getattr(model, "config", None)
    return getattr(config, "decoder_vocab_size", None) or getattr(config, "vocab_size", None)


def check_generation_args(fn, vocab_size=None, *, max_new_tokens, do_sample, temperature, top_k,
                          top_p, use_cache, eos_token_id=None, num_beams=1, num_return_sequences=1,
                          length_penalty=1.0, early_stopping=False, pad_token_id=None,
                          decoder_start_token_id=None, from_config=()):
    """Raise ValueError("fn: arg must be <allowed>, got <value>") for the first bad argument;
    returns eos_token_id as a list of ints. `from_config` names the arguments whose value is
    model.config's default, so the message says where a bad value came from.

    The ranges are transformers' (GenerationConfig.validate, the logits warpers), as errors:
    max_new_tokens >= 1 (HF rejects 0 too), top_k 0 and top_p 1 switch the filter off,
    temperature only matters (and is only checked) when sampling, token ids lie in the vocabulary.
    """
    def bad(name, allowed, value, context=""):
        where = f"{name} (from model.config)" if name in from_config else name
        raise ValueError(f"{fn}: {where} must be {allowed}, got {_plain(value)!r}{context}")

    if not _is_int(max_new_tokens) or max_new_tokens < 1:
        bad("max_new_tokens", "an int >= 1 (as in transformers)", max_new_tokens)
    for name, flag in (("do_sample", do_sample), ("use_cache", use_cache)):
        if not isinstance(flag, (bool, np.bool_)):
            bad(name, "True or False", flag)
    if do_sample and not (_is_real(temperature) and math.isfinite(temperature) and temperature > 0):
        bad("temperature", "a finite number > 0 when do_sample=True", temperature)
    if top_k is not None and not (_is_int(top_k) and top_k >= 0):
        bad("top_k", "None or an int >= 0 (0 keeps every token)", top_k)
    if top_p is not None and not (_is_real(top_p) and 0 < top_p <= 1):
        bad("top_p", "None or a number in (0, 1] (1 keeps every token)", top_p)
    if not _is_int(num_beams) or num_beams < 1:
        bad("num_beams", "an int >= 1", num_beams)
    if not _is_int(num_return_sequences) or not 1 <= num_return_sequences <= num_beams:
        bad("num_return_sequences", f"an int in [1, num_beams={_plain(num_beams)}]", num_return_sequences)
    if not (_is_real(length_penalty) and math.isfinite(length_penalty)):
        bad("length_penalty", "a finite number", length_penalty)
    if early_stopping not in (True, False, "never"):
        bad("early_stopping", "True, False or 'never'", early_stopping)

    id_range = f"in [0, {vocab_size})" if vocab_size else ">= 0"

    def is_id(v):
        return _is_int(v) and 0 <= v and (not vocab_size or v < vocab_size)

    for name, v in (("pad_token_id", pad_token_id), ("decoder_start_token_id", decoder_start_token_id)):
        if v is not None and not is_id(v):
            bad(name, f"None or a token id, an int {id_range}", v)
    several = isinstance(eos_token_id, (list, tuple))
    eos = list(eos_token_id) if several else [] if eos_token_id is None else [eos_token_id]
    for e in eos:
        if not is_id(e):
            bad("eos_token_id", f"None or an int or a list of ints {id_range} (token ids)", e,
                f" in {_plain(eos)}" if several else "")
    return [int(e) for e in eos]


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _plain(v):
    """numpy scalars as Python numbers, so messages read `nan`, not `np.float64(nan)`."""
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    return v.item() if isinstance(v, np.generic) else v


def _choose(logits, temperature, top_k, top_p, do_sample, rng):
    if not do_sample:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None and top_k > 0:
        kth = np.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1])][:, None]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=-1, kind="stable")  # ties: the lowest id first, as argmax
        sorted_p = np.take_along_axis(probs, order, -1)
        keep_sorted = np.cumsum(sorted_p, -1) - sorted_p < top_p   # always keeps the top token
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, -1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(-1, keepdims=True)
    return np.array([rng.choice(len(p), p=p) for p in probs])


@contextlib.contextmanager
def evaluating(model):
    """Eval mode while decoding: nn.Module.evaluating() restores every layer's own mode;
    other objects that follow the decoding interface get train(previous) back."""
    if hasattr(model, "evaluating"):
        with model.evaluating():
            yield
        return
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        yield
    finally:
        if hasattr(model, "train"):
            model.train(was_training)
