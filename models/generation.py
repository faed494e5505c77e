"""Text generation for decoder-only models: greedy, temperature, top-k and top-p sampling,
with a KV cache so each new token costs one position, not a re-run of the prefix.
`check_generation_args` validates the arguments of this and of models.seq2seq's generation."""
import contextlib
import inspect
import math
import numbers

import numpy as np

import tinytensor as tt


def generate(model, input_ids, max_new_tokens=20, temperature=1.0, top_k=None, top_p=None,
             do_sample=False, eos_token_id=None, seed=None, use_cache=True, attention_mask=None):
    """Append up to `max_new_tokens` tokens to `input_ids` (B, T); returns (B, T + new).

    Greedy unless do_sample=True. A row that produced `eos_token_id` (an int or a list of
    ints) keeps emitting the id it produced. Bad arguments raise ValueError (see
    check_generation_args for the allowed values).
    `seed` makes sampling reproducible without touching the global generator.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"generate: input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
    eos = check_generation_args("generate", vocab_size(model), max_new_tokens=max_new_tokens,
                                do_sample=do_sample, temperature=temperature, top_k=top_k,
                                top_p=top_p, use_cache=use_cache, eos_token_id=eos_token_id)
    rng = np.random.default_rng(seed)
    ids = input_ids
    B = ids.shape[0]
    done = np.zeros(B, dtype=bool)
    ended = np.zeros(B, dtype=np.int64)  # the eos id each finished row keeps emitting
    cache = model.new_cache() if use_cache else None
    mask = attention_mask
    max_len = getattr(getattr(model, "config", None), "n_positions", None)
    takes_positions = "position_ids" in inspect.signature(model.forward).parameters
    with evaluating(model):  # dropout off; each layer's own mode comes back afterwards
        with tt.no_grad():
            step_input = ids
            for _ in range(max_new_tokens):
                step_mask = mask
                if max_len is not None and (cache.length if cache else 0) + step_input.shape[1] > max_len:
                    # past the context: slide the window, re-reading its second half afresh
                    keep = max(1, max_len // 2) if cache is not None else max_len
                    cache = model.new_cache() if cache is not None else None
                    step_input = ids[:, -keep:]
                if mask is not None:
                    step_mask = mask[:, -((cache.length if cache else 0) + step_input.shape[1]):]
                kw = {}
                if mask is not None and takes_positions:
                    # a left-padded row's positions start at its first real token (as HF's generate)
                    m = step_mask.to(tt.int64)
                    pos = m.cumsum(-1) - 1
                    pos = tt.where(m > 0, pos, tt.ones_like(pos))
                    kw["position_ids"] = pos[:, -step_input.shape[1]:]   # (B, T_step)
                out = model(step_input, attention_mask=step_mask, cache=cache, **kw)
                logits = out.logits[:, -1].float().numpy().astype(np.float64)  # (B, vocab)
                nxt = _choose(logits, temperature, top_k, top_p, do_sample, rng)
                if eos:
                    nxt = np.where(done, ended, nxt)
                    ended = np.where(done, ended, nxt)
                    done |= np.isin(nxt, eos)
                new = tt.tensor(nxt.reshape(B, 1), dtype=tt.int64, device=ids.device)
                ids = tt.cat([ids, new], dim=1)
                if mask is not None:
                    mask = tt.cat([mask, tt.ones(B, 1, dtype=mask.dtype, device=mask.device)], dim=1)
                step_input = new if use_cache else ids
                if eos and done.all():
                    break
    return ids


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
