"""Beam search (and beam sampling), shared by decoder-only generation (models.generation)
and encoder-decoder generation (models.seq2seq), step for step HuggingFace transformers 5.x
`GenerationMixin._beam_search`:
- 2 * num_beams candidates are kept per step (more with several EOS ids), and only the
  `num_beams` best candidates of a step may finish;
- a hypothesis that ends (EOS, or the length limit) is scored sum(log p) / length**length_penalty,
  where length counts the generated tokens (the prompt, or the start token, excluded);
- early_stopping: True stops a batch row once num_beams hypotheses are finished; False
  stops when the best running beam, scored at its current length, cannot beat the worst
  finished one; "never" uses the best length it could still reach when length_penalty > 0;
- outputs shorter than the longest are filled with pad_token_id, or with the first EOS id
  when pad_token_id is 0 or unset (HF's `pad_token_id or eos_token_id[0]`).
Scores are kept in float32 as HF does, so ties break the same way.

The caller supplies a stepper: `next_logits(seqs)` takes the (N, t) int64 numpy tokens of
every row so far and returns the (N, vocab) float32 numpy next-token logits;
`select(index)` reorders its state (the KV cache) so that row i of the next step is row
index[i] of this one.
"""
import numpy as np

_NEG = np.float32(-1.0e9)  # HF's "impossible" score


def beam_search(stepper, prompts, num_beams, max_new_tokens, eos, pad, length_penalty=1.0,
                early_stopping=False, num_return_sequences=1, do_sample=False, temperature=1.0,
                top_k=None, top_p=None, rng=None):
    """prompts (B, P) int64 -> (B * num_return_sequences, P + n) ids, n <= max_new_tokens: the
    best finished hypotheses of each row, best first. `eos` is a list of ids ([] never ends
    early). The stepper sees B * num_beams rows, row b * num_beams + k being beam k of row b."""
    nb = num_beams
    B, prompt_len = prompts.shape
    cur_len, max_length = prompt_len, prompt_len + max_new_tokens
    keep = max(2, 1 + len(eos)) * nb                   # candidates kept per step
    top_nb = np.arange(keep) < nb                       # only these may finish this step
    fill = (pad if pad else eos[0]) if eos else -1
    running = np.full((B, nb, max_length), fill, dtype=np.int64)  # running beams' tokens
    running[:, :, :prompt_len] = prompts[:, None, :]
    finished_seqs = running.copy()                      # best finished hypotheses
    running_scores = np.zeros((B, nb), np.float32)      # sum of log-probs
    running_scores[:, 1:] = _NEG                        # step 1 expands beam 0 only
    finished_scores = np.full((B, nb), _NEG, np.float32)
    is_finished = np.zeros((B, nb), dtype=bool)
    improvable = np.ones((B, 1), dtype=bool)            # could a running beam still win?
    running_src = np.full((B, nb, max_new_tokens), -1, np.int64)  # flat row each step came from
    finished_src = running_src.copy()
    batch_offset = np.arange(B)[:, None] * nb

    while True:
        logits = stepper.next_logits(running[:, :, :cur_len].reshape(B * nb, cur_len))  # (B*nb, V)
        V = logits.shape[-1]
        logp = _log_softmax(logits)
        if do_sample:
            logp = _warp(logp, temperature, top_k, top_p)
        logp = (logp.reshape(B, nb, V) + running_scores[:, :, None]).reshape(B, nb * V)

        # c. the `keep` best continuations over all beams (or sampled without replacement)
        if do_sample:
            cand = _sample_without_replacement(logp, keep, rng)
        else:
            cand = _topk(logp, keep)                                      # (B, keep)
        cand_scores = np.take_along_axis(logp, cand, -1)                  # (B, keep)
        src_beam, token = cand // V, cand % V
        cand_seqs = _gather(running, src_beam).copy()                     # (B, keep, max_length)
        cand_seqs[:, :, cur_len] = token
        cand_src = _gather(running_src, src_beam).copy()
        cand_src[:, :, cur_len - prompt_len] = src_beam + batch_offset

        # d. which candidates end here: EOS, or the length limit
        ends = np.isin(token, eos) | (cur_len + 1 >= max_length)          # (B, keep)

        # e. the nb best candidates that go on
        go_scores = cand_scores + ends.astype(np.float32) * _NEG
        nxt = _topk(go_scores, nb)
        running = _gather(cand_seqs, nxt)
        running_scores = _gather(go_scores, nxt)
        running_src = _gather(cand_src, nxt)

        # f. finished candidates enter the finished set if they beat its members
        just_finished = ends & top_nb[None, :]
        fin_scores = cand_scores / np.float32((cur_len + 1 - prompt_len) ** length_penalty)
        batch_full = is_finished.all(-1, keepdims=True) & (early_stopping is True)
        fin_scores = fin_scores + batch_full.astype(np.float32) * _NEG
        fin_scores = fin_scores + (~improvable).astype(np.float32) * _NEG
        fin_scores = fin_scores + (~just_finished).astype(np.float32) * _NEG
        merged_scores = np.concatenate([finished_scores, fin_scores], axis=1)
        best = _topk(merged_scores, nb)
        finished_seqs = _gather(np.concatenate([finished_seqs, cand_seqs], axis=1), best)
        finished_scores = _gather(merged_scores, best)
        finished_src = _gather(np.concatenate([finished_src, cand_src], axis=1), best)
        is_finished = _gather(np.concatenate([is_finished, just_finished], axis=1), best)

        # g. move the cache rows along with their beams
        stepper.select(running_src[:, :, cur_len - prompt_len].reshape(-1))
        cur_len += 1

        if early_stopping == "never" and length_penalty > 0.0:
            best_len = max_length - prompt_len
        else:
            best_len = cur_len - prompt_len
        best_running = running_scores[:, :1] / np.float32(best_len ** length_penalty)
        worst_finished = np.where(is_finished, finished_scores.min(1, keepdims=True), _NEG)
        improvable = improvable & (best_running > worst_finished).any(-1, keepdims=True)

        all_full = is_finished.all() and early_stopping is True
        if not improvable.any() or all_full or ends.all():
            break

    seqs = finished_seqs[:, :num_return_sequences].reshape(B * num_return_sequences, max_length)
    src = finished_src[:, :num_return_sequences].reshape(B * num_return_sequences, -1)
    generated = int((src != -1).sum(1).max())
    return seqs[:, :prompt_len + generated]


def _log_softmax(x):  # float32, along the last axis
    m = x.max(-1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _warp(logp, temperature, top_k, top_p):
    """HF's sampling warpers applied to log-probabilities (beam sampling): temperature,
    then top-k, then top-p; removed tokens get -inf. Keeps at least 2 tokens, as HF does
    for beams."""
    logp = logp / np.float32(temperature)
    V = logp.shape[-1]
    if top_k is not None and top_k > 0:
        k = min(max(top_k, 2), V)
        kth = np.sort(logp, axis=-1)[:, -k][:, None]
        logp = np.where(logp < kth, -np.inf, logp)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(logp, axis=-1, kind="stable")  # ascending, as HF's TopPLogitsWarper
        sorted_lp = np.take_along_axis(logp, order, -1)
        p = np.exp(sorted_lp - sorted_lp.max(-1, keepdims=True))
        cum = np.cumsum(p / p.sum(-1, keepdims=True), -1)
        drop = cum <= 1 - top_p
        drop[:, -2:] = False
        remove = np.zeros_like(drop)
        np.put_along_axis(remove, order, drop, -1)
        logp = np.where(remove, -np.inf, logp)
    return logp.astype(np.float32)


def _topk(x, k):  # indices of the k largest along the last axis, best first, ties to the lower index
    return np.argsort(-x, axis=-1, kind="stable")[..., :k]


def _gather(x, idx):  # x (B, K, ...) rows picked per batch by idx (B, k)
    idx = idx.reshape(idx.shape + (1,) * (x.ndim - 2))
    return np.take_along_axis(x, idx, axis=1)


def _sample_without_replacement(logp, k, rng):
    """k indices per row drawn without replacement from softmax(logp), sorted by logp."""
    out = np.empty((logp.shape[0], k), dtype=np.int64)
    for b, row in enumerate(logp.astype(np.float64)):
        p = np.exp(row - row.max())
        p /= p.sum()
        nz = int((p > 0).sum())
        picked = rng.choice(len(p), size=min(k, nz), replace=False, p=p)
        if nz < k:  # too few live tokens: pad with impossible ones (score -inf, never chosen)
            rest = np.setdiff1d(np.argsort(-row, kind="stable"), picked, assume_unique=False)
            picked = np.concatenate([picked, rest[:k - nz]])
        out[b] = picked[np.argsort(-row[picked], kind="stable")]
    return out
