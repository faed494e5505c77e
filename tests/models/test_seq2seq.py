"""models.seq2seq.generate_seq2seq on toy models whose logits are fixed tables, so every
result can be derived by hand or by exhaustive search. (Token-for-token agreement with
HuggingFace's beam search on a real model is tested in test_t5.py.)"""
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.models.seq2seq import Seq2SeqCache, generate_seq2seq

START, EOS, PAD = 0, 1, 0


class ToyCache:
    """Holds the decoded tokens per row, so a wrong `select` changes the logits."""

    def __init__(self):
        self.history = None

    @property
    def length(self):
        return 0 if self.history is None else self.history.shape[1]

    def select(self, index):
        self.history = self.history[np.asarray(index.numpy() if isinstance(index, tt.Tensor) else index)]


class ToyModel:
    """Next-token logits = tables[t][last token] + history * tables[t][sum(prefix) % V], where
    t = input_ids[:, 0] picks one table per input row (the 'encoder' passes it on)."""

    def __init__(self, tables, history=0.0, eos=EOS):
        self.tables = np.asarray(tables, dtype=np.float64)  # (n, V, V)
        self.history = history
        self.config = SimpleNamespace(eos_token_id=eos, pad_token_id=PAD, decoder_start_token_id=START)
        self.training = True
        self.calls = []  # decoder input lengths, to see the cache at work

    def train(self, mode=True):
        self.training = mode

    def eval(self):
        self.training = False

    def new_cache(self):
        return ToyCache()

    def encode(self, input_ids, attention_mask=None):
        return tt.tensor(input_ids.numpy()[:, :1, None].astype(np.float32))  # (B, 1, 1)

    def next_logits(self, table, prefix):  # float64 (V,), for the exhaustive search too
        V = self.tables.shape[-1]
        return self.tables[table, prefix[-1]] + self.history * self.tables[table, sum(prefix) % V]

    def decode(self, decoder_input_ids, encoder_states, encoder_attention_mask=None, cache=None):
        new = decoder_input_ids.numpy()
        self.calls.append(new.shape[1])
        if cache is not None:
            cache.history = new if cache.history is None else np.concatenate([cache.history, new], 1)
            full = cache.history
        else:
            full = new
        rows = encoder_states.numpy()[:, 0, 0].astype(int)
        T, past = new.shape[1], full.shape[1] - new.shape[1]
        out = np.stack([[self.next_logits(rows[b], list(full[b, :past + j + 1])) for j in range(T)]
                        for b in range(len(rows))])
        return tt.tensor(out.astype(np.float32))  # (B, T, V)


def _log_softmax(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def exhaustive(model, table, max_new, length_penalty):
    """Every hypothesis (ends with EOS, or reaches max_new tokens) with its score
    sum(log p) / len**length_penalty, best first."""
    V = model.tables.shape[-1]
    hyps = []
    for n in range(1, max_new + 1):
        for toks in itertools.product([t for t in range(V) if t != EOS], repeat=n - 1):
            for last in range(V):
                if n < max_new and last != EOS:
                    continue
                seq = [START, *toks, last]
                lp = sum(_log_softmax(model.next_logits(table, seq[:i]))[seq[i]] for i in range(1, len(seq)))
                hyps.append((lp / n ** length_penalty, seq))
    return sorted(hyps, key=lambda h: -h[0])


def gen(model, rows, **kw):
    ids = tt.tensor(np.array([[r, 5] for r in rows]))
    return generate_seq2seq(model, ids, **kw).numpy().tolist()


def random_tables(seed, n=1, V=4, scale=2.0):
    return np.random.default_rng(seed).normal(0, scale, (n, V, V))


# ---------------------------------------------------------------------- beam search
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("length_penalty,early_stopping", [
    (0.0, False), (0.0, "never"), (1.0, "never"), (2.0, "never"), (-1.0, False)])
def test_wide_beam_search_is_exhaustive_search(seed, length_penalty, early_stopping):
    # 4 tokens, 3 steps: 12 beams never prune a live hypothesis, and with these early-stopping
    # rules the stopping bound is exact, so the result must be the best hypothesis overall
    model = ToyModel(random_tables(seed), history=0.7)
    best = exhaustive(model, 0, 3, length_penalty)
    out = gen(model, [0], max_new_tokens=3, num_beams=12, length_penalty=length_penalty,
              early_stopping=early_stopping, num_return_sequences=2)
    width = max(len(best[0][1]), len(best[1][1]))
    fill = EOS  # HF's `pad_token_id or eos_token_id[0]`: pad 0 falls through to EOS
    assert out == [h + [fill] * (width - len(h)) for _, h in best[:2]]  # best, second best


# From START: EOS .45, token 2 .35, token 3 .20. After 2: 2 again .95, EOS .05. After 3: EOS .9.
def _designed():
    lp = np.full((5, 5), np.log(1e-6))
    lp[START, [EOS, 2, 3]] = np.log([0.45, 0.35, 0.20])
    lp[2, [2, EOS]] = np.log([0.95, 0.05])
    lp[3, [EOS, 2]] = np.log([0.9, 0.1])
    lp[EOS, EOS] = 0.0
    return ToyModel(lp[None])


@pytest.mark.parametrize("length_penalty,early_stopping,expected", [
    # sum log p: [EOS] -0.80 beats [2 2 2] -1.15 and [3 EOS] -1.71
    (0.0, "never", [START, EOS]),
    # per token: [2 2 2] -0.38 beats [EOS] -0.80 and [3 EOS] -0.86
    (1.0, "never", [START, 2, 2, 2]),
    (1.0, False, [START, 2, 2, 2]),   # after step 2 the running [2 2] (-0.55) can still win
    # True stops once num_beams (2) hypotheses are finished: [EOS] and [3 EOS] after step 2
    (1.0, True, [START, EOS]),
    (-1.0, False, [START, EOS]),      # a negative penalty prefers short outputs
])
def test_length_penalty_and_early_stopping_on_a_designed_table(length_penalty, early_stopping, expected):
    model = _designed()
    out = gen(model, [0], max_new_tokens=3, num_beams=2, length_penalty=length_penalty,
              early_stopping=early_stopping)
    assert out == [expected]


def _table(rules, V=5):
    """log-prob table from {state: {next: p}}; unlisted moves get p = 1e-6."""
    lp = np.full((V, V), np.log(1e-6))
    for state, nxt in rules.items():
        for tok, p in nxt.items():
            lp[state, tok] = np.log(p)
    return lp


# [EOS] .5 (-0.69 per token) finishes first; [3 EOS] .18 (-0.86) finishes at step 2, when the
# running [2 4] (.165) is worth -0.90 per token at its length but -0.60 at length 3; and
# indeed [2 4 4] (.157, -0.62 per token) would win.
_LATE = {START: {EOS: 0.5, 2: 0.3, 3: 0.2}, 2: {4: 0.55, EOS: 0.45}, 3: {EOS: 0.9, 3: 0.1},
         4: {4: 0.95, EOS: 0.05}, EOS: {EOS: 1.0}}


@pytest.mark.parametrize("early_stopping,expected", [
    ("never", [START, 2, 4, 4]),   # bounds the running beam at the longest length: goes on
    (False, [START, EOS]),         # bounds it at its current length: stops after step 2
    (True, [START, EOS]),          # two beams, two finished hypotheses: stops after step 2
])
def test_early_stopping_heuristics(early_stopping, expected):
    model = ToyModel(_table(_LATE)[None])
    assert gen(model, [0], max_new_tokens=3, num_beams=2, early_stopping=early_stopping) == [expected]


def test_only_the_top_num_beams_candidates_may_finish():
    # [EOS] (.25) is the best hypothesis, but at step 1 it ranks third of the candidates,
    # behind [2] and [3], so with 2 beams HF never lets it finish
    rules = {START: {2: 0.4, 3: 0.35, EOS: 0.25}, 2: {2: 0.6, EOS: 0.4}, 3: {EOS: 0.55, 3: 0.45}}
    model = ToyModel(_table(rules)[None])
    assert gen(model, [0], max_new_tokens=2, num_beams=2, length_penalty=0.0) == [[START, 2, 2]]


def test_a_batch_row_with_all_beams_finished_takes_no_more_under_early_stopping():
    # row 0: [EOS] (-0.69 per token) and [2 EOS] (-1.00) fill both beams at step 2, while the
    # running [2 4] (-0.90 at its length) still looks promising; row 1 keeps the search going
    # to step 3, where row 0 would otherwise admit [2 4 4] (-0.62)
    full = {**_LATE, 3: {EOS: 0.6, 3: 0.4}}
    rows = np.stack([_table(full), _table({t: {2: 0.7, 3: 0.3} for t in range(5)})])
    model = ToyModel(rows)
    out = gen(model, [0, 1], max_new_tokens=3, num_beams=2, early_stopping=True)
    assert out[0][:2] == [START, EOS] and out[1] == [START, 2, 2, 2]
    out = gen(model, [0, 1], max_new_tokens=3, num_beams=2, early_stopping=False)
    assert out[0] == [START, 2, 4, 4]


def test_beam_search_finds_what_greedy_misses():
    lp = np.full((4, 4), -20.0)
    lp[START, [2, 3]] = np.log([0.6, 0.4])      # greedy takes 2 ...
    lp[2, [2, 3]] = np.log([0.5, 0.5])          # ... where every continuation is a coin flip
    lp[3, 3] = np.log(0.99)                      # 3 -> 3 is near certain: 0.4 * .99 * .99 > 0.6 * .5 * .5
    model = ToyModel(lp[None])
    assert gen(model, [0], max_new_tokens=3, eos_token_id=[]) == [[START, 2, 2, 2]]
    assert gen(model, [0], max_new_tokens=3, num_beams=2, eos_token_id=[]) == [[START, 3, 3, 3]]


def test_batch_rows_are_independent_and_short_rows_are_filled():
    model = ToyModel(random_tables(7, n=3), history=0.3)
    kw = dict(max_new_tokens=4, num_beams=3, length_penalty=1.0)
    alone = [gen(model, [r], **kw)[0] for r in range(3)]
    together = gen(model, [0, 1, 2], **kw)
    width = max(len(a) for a in alone)
    fill = EOS  # HF's `pad_token_id or eos_token_id[0]`: pad 0 falls through to EOS
    assert together == [a + [fill] * (width - len(a)) for a in alone]
    assert len({len(a) for a in alone}) > 1, "the rows should finish at different lengths"


@pytest.mark.parametrize("num_beams", [1, 3])
def test_cache_gives_the_same_tokens_as_recomputation(num_beams):
    model = ToyModel(random_tables(3, n=2, V=6), history=1.0)
    kw = dict(max_new_tokens=6, num_beams=num_beams, eos_token_id=[])
    model.calls.clear()
    cached = gen(model, [0, 1], **kw)
    assert model.calls[0] == 1 and set(model.calls[1:]) == {1}  # one new position per step
    model.calls.clear()
    assert gen(model, [0, 1], use_cache=False, **kw) == cached
    assert model.calls == list(range(1, 7))                     # the whole prefix every step


def test_seq2seq_cache_select_reorders_every_layer():
    cache = Seq2SeqCache(2)
    for c in cache.self_attn + cache.cross_attn:
        c.update(tt.tensor(np.arange(3.0).reshape(3, 1, 1, 1)), tt.tensor(np.arange(3.0).reshape(3, 1, 1, 1)))
    assert cache.length == 1
    cache.select(np.array([2, 2, 0]))
    for c in cache.self_attn + cache.cross_attn:
        assert c.key.numpy().ravel().tolist() == [2, 2, 0] and c.value.numpy().ravel().tolist() == [2, 2, 0]


# ---------------------------------------------------------------------- greedy / sampling
def _chain():
    lp = np.full((6, 6), -9.0)
    lp[START, 2] = lp[2, 3] = lp[3, 4] = lp[4, EOS] = lp[EOS, 5] = lp[5, 5] = 0.0
    other = lp.copy()
    other[START] = -9.0
    other[START, EOS] = 0.0  # row with table 1 ends at once
    return ToyModel(np.stack([lp, other]))


def test_greedy_pads_finished_rows_and_stops_when_all_are_done():
    out = gen(_chain(), [0, 1], max_new_tokens=10)
    assert out == [[START, 2, 3, 4, EOS], [START, EOS, PAD, PAD, PAD]]


def test_greedy_without_eos_runs_to_max_new_tokens():
    assert gen(_chain(), [0], max_new_tokens=6, eos_token_id=[]) == [[START, 2, 3, 4, EOS, 5, 5]]


def test_several_eos_ids_and_explicit_pad():
    out = gen(_chain(), [0], max_new_tokens=10, eos_token_id=[7, 3], decoder_start_token_id=START)
    assert out == [[START, 2, 3]]
    # token 1 is no EOS now: row 1 runs to the end; row 0 is padded with pad_token_id
    out = gen(_chain(), [0, 1], max_new_tokens=6, eos_token_id=[3], pad_token_id=4)
    assert out == [[START, 2, 3, 4, 4, 4, 4], [START, EOS, 5, 5, 5, 5, 5]]


def test_sampling_is_reproducible_and_top_k_1_is_greedy():
    model = ToyModel(random_tables(5, V=8, scale=1.0))
    kw = dict(max_new_tokens=8, eos_token_id=[], do_sample=True, temperature=1.3, top_p=0.9)
    a, b = gen(model, [0], seed=11, **kw), gen(model, [0], seed=11, **kw)
    assert a == b
    assert len({str(gen(model, [0], seed=s, **kw)) for s in range(6)}) > 1
    greedy = gen(model, [0], max_new_tokens=8, eos_token_id=[])
    assert gen(model, [0], max_new_tokens=8, eos_token_id=[], do_sample=True, top_k=1, seed=0) == greedy
    beam_kw = dict(max_new_tokens=5, num_beams=3, do_sample=True, eos_token_id=[])
    assert gen(model, [0], seed=2, **beam_kw) == gen(model, [0], seed=2, **beam_kw)


def test_mode_is_restored_and_bad_arguments_are_clear_errors():
    model = _chain()
    gen(model, [0], max_new_tokens=2)
    assert model.training is True
    with pytest.raises(ValueError, match="num_return_sequences"):
        gen(model, [0], num_beams=2, num_return_sequences=3)
    with pytest.raises(ValueError, match="early_stopping"):
        gen(model, [0], num_beams=2, early_stopping="sometimes")
    with pytest.raises(ValueError, match="input_ids must be"):
        generate_seq2seq(model, tt.tensor([1, 2, 3]))
    model.config = SimpleNamespace(eos_token_id=EOS, pad_token_id=PAD)
    with pytest.raises(ValueError, match="decoder_start_token_id"):
        gen(model, [0])
