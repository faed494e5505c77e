"""Beam search for decoder-only models (models.generate(num_beams=...), models.beam) against
HuggingFace's generate(num_beams=..., do_sample=False) token for token, on GPT-2 and Llama
built offline from a config (random weights) and loaded with models.from_hf."""
import pytest

import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402

VOCAB, MAX_NEW = 96, 8
# two left-padded rows: padding shifts positions, so a wrong mask or position changes tokens
PROMPT = [[0, 0, 5, 17, 33, 2], [9, 9, 40, 1, 7, 3]]
MASK = [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]
# EOS ids that some of each model's beams produce mid-way (asserted below), so hypotheses
# of different lengths compete and the shorter outputs get filled
EOS = {"gpt2": [68, 54], "llama": [36, 48]}


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                  eos_token_id=0, attn_implementation="eager")
    ref = transformers.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        # with the default init one token repeats forever and every beam is alike; strong
        # position embeddings make the left padding matter
        for name, p in ref.named_parameters():
            if name.endswith("c_proj.weight"):
                p.mul_(4.0)
            if name.endswith("wpe.weight"):
                p.mul_(10.0)
    return ref


def _llama():
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0}, bos_token_id=1,
        eos_token_id=2, attn_implementation="eager")
    return transformers.LlamaForCausalLM(cfg)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def pair(request, tmp_path_factory):
    torch.manual_seed(0)
    ref = {"gpt2": _gpt2, "llama": _llama}[request.param]().eval()
    path = tmp_path_factory.mktemp(request.param)
    ref.save_pretrained(path)
    return request.param, ref, models.from_hf(str(path))


def _reference(ref, **kw):
    with torch.no_grad():
        return ref.generate(torch.tensor(PROMPT), attention_mask=torch.tensor(MASK),
                            max_new_tokens=MAX_NEW, do_sample=False, **kw).tolist()


def _ours(model, **kw):
    return model.generate(tt.tensor(PROMPT), MAX_NEW, attention_mask=tt.tensor(MASK), **kw).tolist()


BEAM_CASES = [  # (num_beams, length_penalty, early_stopping, num_return_sequences, pad_token_id)
    (2, 1.0, False, 1, None), (2, 0.5, True, 2, 3), (2, -1.0, "never", 2, None),
    (4, 1.0, False, 4, 3), (4, 2.0, True, 1, None), (4, -1.0, False, 2, 0),
    (4, 1.5, "never", 3, 3), (4, 0.0, True, 4, None)]


@pytest.mark.parametrize("nb,lp,es,n,pad", BEAM_CASES, ids=[str(c) for c in BEAM_CASES])
def test_beam_search_equals_transformers_token_for_token(pair, nb, lp, es, n, pad):
    kind, ref, model = pair
    kw = dict(num_beams=nb, length_penalty=lp, early_stopping=es, num_return_sequences=n,
              eos_token_id=EOS[kind], pad_token_id=pad)
    expected = _reference(ref, **kw)
    assert _ours(model, **kw) == expected
    assert len(expected) == len(PROMPT) * n


def test_some_beams_finish_early_and_the_cases_differ(pair):
    # guards the cases above against being trivial: with these EOS ids, hypotheses end
    # before max_new_tokens (filled outputs), and the options change the result
    kind, ref, model = pair
    results, filled = set(), False
    for nb, lp, es, n, pad in BEAM_CASES:
        out = _ours(model, num_beams=nb, length_penalty=lp, early_stopping=es,
                    num_return_sequences=n, eos_token_id=EOS[kind], pad_token_id=pad)
        generated = [row[len(PROMPT[0]):] for row in out]
        filled |= any(any(t in EOS[kind] for t in row[:-1]) for row in generated)
        results.add(str(out))
    assert filled
    assert len(results) >= 5


@pytest.mark.parametrize("nb", [2, 4])
def test_cache_and_recomputation_give_the_same_beams(pair, nb):
    kind, _, model = pair
    kw = dict(num_beams=nb, num_return_sequences=nb, eos_token_id=EOS[kind])
    assert _ours(model, **kw) == _ours(model, use_cache=False, **kw)


def test_one_beam_is_the_greedy_path_as_transformers(pair):
    kind, ref, model = pair
    eos = EOS[kind][:1]
    outs = []
    for pad in (None, 3):
        # without pad_token_id a finished row repeats its EOS (HF: pad = the first EOS id)
        expected = _reference(ref, eos_token_id=eos, pad_token_id=eos[0] if pad is None else pad)
        outs.append(_ours(model, num_beams=1, eos_token_id=eos, pad_token_id=pad))
        assert outs[-1] == expected
    assert outs[0] != outs[1], "a row should finish early, so that the filling shows"
    assert _ours(model, num_beams=1) == _ours(model) == _reference(ref, eos_token_id=None, pad_token_id=0)


def test_beam_sampling_is_reproducible_with_a_seed(pair):
    _, _, model = pair
    kw = dict(num_beams=3, num_return_sequences=2, do_sample=True, temperature=1.5, top_k=20, seed=4)
    a = _ours(model, **kw)
    assert a == _ours(model, **kw) and len(a) == 2 * len(PROMPT)
    assert len({str(_ours(model, **dict(kw, seed=s))) for s in range(4)}) > 1


BAD = [
    (dict(num_beams=0), "num_beams", "0", "an int >= 1"),
    (dict(num_beams=2.0), "num_beams", "2.0", "an int >= 1"),
    (dict(num_beams=2, num_return_sequences=3), "num_return_sequences", "3", "[1, num_beams=2]"),
    (dict(num_return_sequences=2), "num_return_sequences", "2", "[1, num_beams=1]"),
    (dict(num_beams=2, length_penalty=float("nan")), "length_penalty", "nan", "a finite number"),
    (dict(num_beams=2, early_stopping="sometimes"), "early_stopping", "'sometimes'",
     "True, False or 'never'"),
    (dict(num_beams=2, pad_token_id=VOCAB), "pad_token_id", f"{VOCAB}", f"[0, {VOCAB})"),
]


@pytest.mark.parametrize("kw,arg,value,allowed", BAD, ids=[f"{a}={v}" for _, a, v, _ in BAD])
def test_bad_beam_arguments_name_the_argument_value_and_range(pair, kw, arg, value, allowed):
    _, _, model = pair
    with pytest.raises(ValueError) as e:
        _ours(model, **kw)
    msg = str(e.value)
    assert msg.startswith(f"generate: {arg} ") and f"got {value}" in msg and allowed in msg, msg
