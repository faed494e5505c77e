"""Generation arguments are checked in one place (models.generation.check_generation_args)
for decoder-only generate (GPT, Llama) and generate_seq2seq (T5, BART, Marian, the 2017
Transformer): a bad value is a ValueError naming the function, the argument, the value
and the allowed range, instead of a silent empty result or "probabilities contain NaN"."""
import numpy as np
import pytest

from tinytensor import models
import tinytensor as tt
from tinytensor.models.generation import _choose

V = 32
DECODERS = {
    "gpt": lambda: models.GPT(vocab_size=V, n_positions=16, n_embd=16, n_layer=1, n_head=2),
    "llama": lambda: models.Llama(vocab_size=V, hidden_size=16, intermediate_size=32,
                                  num_hidden_layers=1, num_attention_heads=2,
                                  max_position_embeddings=32),
}
_ENC_DEC = dict(vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                decoder_ffn_dim=32, max_position_embeddings=32)
SEQ2SEQ = {
    "t5": lambda: models.T5(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
    "bart": lambda: models.BART(**_ENC_DEC),
    "marian": lambda: models.Marian(models.MarianConfig(**_ENC_DEC, pad_token_id=V - 1,
                                                        decoder_start_token_id=V - 1)),
    "transformer": lambda: models.Transformer(**_ENC_DEC),
}


@pytest.fixture(scope="module", params=sorted(DECODERS) + sorted(SEQ2SEQ))
def model(request):
    tt.manual_seed(0)
    return request.param, (DECODERS.get(request.param) or SEQ2SEQ[request.param])()


def _generate(model, **kw):
    name, m = model
    ids = tt.tensor([[3, 4, 5], [6, 7, 8]])
    return m.generate(ids, **kw)


NAN, INF = float("nan"), float("inf")
# (arguments, the argument named, the value printed, the allowed range printed)
BAD = [
    (dict(max_new_tokens=-1), "max_new_tokens", "-1", "an int >= 1"),
    (dict(max_new_tokens=0), "max_new_tokens", "0", "an int >= 1"),
    (dict(max_new_tokens=2.5), "max_new_tokens", "2.5", "an int >= 1"),
    (dict(max_new_tokens=True), "max_new_tokens", "True", "an int >= 1"),
    (dict(do_sample=True, temperature=NAN), "temperature", "nan", "finite number > 0"),
    (dict(do_sample=True, temperature=np.float64(NAN)), "temperature", "nan", "finite number > 0"),
    (dict(do_sample=True, temperature=0.0), "temperature", "0.0", "finite number > 0"),
    (dict(do_sample=True, temperature=-1), "temperature", "-1", "finite number > 0"),
    (dict(do_sample=True, temperature=INF), "temperature", "inf", "finite number > 0"),
    (dict(do_sample=True, top_p=0.0), "top_p", "0.0", "(0, 1]"),
    (dict(do_sample=True, top_p=1.5), "top_p", "1.5", "(0, 1]"),
    (dict(do_sample=True, top_p=NAN), "top_p", "nan", "(0, 1]"),
    (dict(do_sample=True, top_k=-1), "top_k", "-1", "an int >= 0"),
    (dict(do_sample=True, top_k=2.5), "top_k", "2.5", "an int >= 0"),
    (dict(eos_token_id=-1), "eos_token_id", "-1", f"[0, {V})"),
    (dict(eos_token_id=[2, V]), "eos_token_id", f"{V}", f"[0, {V})"),
    (dict(eos_token_id="2"), "eos_token_id", "'2'", f"[0, {V})"),
    (dict(do_sample="yes"), "do_sample", "'yes'", "True or False"),
    (dict(use_cache=None), "use_cache", "None", "True or False"),
]
SEQ2SEQ_BAD = [
    (dict(num_beams=0), "num_beams", "0", "an int >= 1"),
    (dict(num_beams=2.0), "num_beams", "2.0", "an int >= 1"),
    (dict(num_beams=2, num_return_sequences=3), "num_return_sequences", "3", "[1, num_beams=2]"),
    (dict(pad_token_id=-1), "pad_token_id", "-1", f"[0, {V})"),
    (dict(pad_token_id=V), "pad_token_id", f"{V}", f"[0, {V})"),
    (dict(decoder_start_token_id=V + 5), "decoder_start_token_id", f"{V + 5}", f"[0, {V})"),
    (dict(num_beams=2, length_penalty=NAN), "length_penalty", "nan", "a finite number"),
    (dict(num_beams=2, early_stopping="sometimes"), "early_stopping", "'sometimes'",
     "True, False or 'never'"),
]


@pytest.mark.parametrize("kw,arg,value,allowed", BAD, ids=[f"{a}={v}" for _, a, v, _ in BAD])
def test_bad_arguments_name_the_argument_value_and_range(model, kw, arg, value, allowed):
    fn = "generate_seq2seq" if model[0] in SEQ2SEQ else "generate"
    kw = {"max_new_tokens": 3, **kw}
    with pytest.raises(ValueError) as e:
        _generate(model, **kw)
    msg = str(e.value)
    assert msg.startswith(f"{fn}: {arg} ") and f"got {value}" in msg and allowed in msg, msg
    assert "np." not in msg


@pytest.mark.parametrize("kw,arg,value,allowed", SEQ2SEQ_BAD,
                         ids=[f"{a}={v}" for _, a, v, _ in SEQ2SEQ_BAD])
def test_bad_seq2seq_arguments_name_the_argument_value_and_range(kw, arg, value, allowed):
    tt.manual_seed(0)
    with pytest.raises(ValueError) as e:
        _generate(("bart", SEQ2SEQ["bart"]()), **{"max_new_tokens": 3, **kw})
    msg = str(e.value)
    assert msg.startswith(f"generate_seq2seq: {arg} ") and f"got {value}" in msg and allowed in msg, msg


def test_a_config_eos_outside_the_vocabulary_names_the_config():
    tt.manual_seed(0)
    m = models.T5(vocab_size=V, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                  eos_token_id=V + 1)
    with pytest.raises(ValueError, match=rf"eos_token_id \(from model.config\) must be .*got {V + 1}"):
        m.generate(tt.tensor([[3, 4]]), max_new_tokens=2)


def test_valid_edge_values_are_accepted(model):
    # numpy ints, top_k=0 (off), top_p=1 (off), temperature=0 while greedy (unused, as HF)
    out = _generate(model, max_new_tokens=np.int64(2), temperature=0.0, top_k=0, top_p=1.0,
                    eos_token_id=[np.int64(V - 1)])
    assert out.shape[0] == 2
    sampled = _generate(model, max_new_tokens=2, do_sample=np.bool_(True), top_k=0, top_p=1, seed=0)
    assert sampled.shape[0] == 2


@pytest.mark.parametrize("seed", range(3))
def test_tiny_top_p_keeps_exactly_the_most_probable_token(model, seed):
    greedy = _generate(model, max_new_tokens=6, eos_token_id=[])
    tiny = _generate(model, max_new_tokens=6, eos_token_id=[], do_sample=True, top_p=1e-9,
                     temperature=1.7, seed=seed)
    assert tiny.tolist() == greedy.tolist()


def test_tiny_top_p_breaks_ties_as_greedy_does():
    # argmax takes the first of tied maxima; the top-p cut must keep that same token
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 300))
    for row in logits:
        row[rng.choice(300, 5, replace=False)] = 9.0
    picked = _choose(logits, 1.0, None, 1e-9, True, np.random.default_rng(1))
    np.testing.assert_array_equal(picked, logits.argmax(-1))
