"""Text generation for decoder-only models: greedy, temperature, top-k and top-p sampling,
with a KV cache so each new token costs one position, not a re-run of the prefix."""
import contextlib
import inspect

import numpy as np

import tinytensor as tt


def generate(model, input_ids, max_new_tokens=20, temperature=1.0, top_k=None, top_p=None,
             do_sample=False, eos_token_id=None, seed=None, use_cache=True, attention_mask=None):
    """Append up to `max_new_tokens` tokens to `input_ids` (B, T); returns (B, T + new).

    Greedy unless do_sample=True. A row that produced `eos_token_id` (an int or a list of
    ints) keeps emitting the id it produced.
    `seed` makes sampling reproducible without touching the global generator.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"generate: input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
    if temperature <= 0 and do_sample:
        raise ValueError("generate: temperature must be positive when sampling")
    eos = [] if eos_token_id is None else [int(e) for e in (
        eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id])]
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
        order = np.argsort(-probs, axis=-1)
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
