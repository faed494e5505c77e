"""tools/generate.py on an encoder-decoder (T5), and one-line refusals: a model of the wrong
kind for the tool, a missing `tokenizers` package."""
import os
import shutil
import sys

import pytest

from tests.models.text_fixtures import bert, gpt2  # noqa: F401 (fixtures)

from tinytensor import models  # noqa: E402
import tinytensor as tt  # noqa: E402
from tinytensor.tools import embed as embed_cli, generate as generate_cli  # noqa: E402
from tinytensor.tools.lib import text  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def t5(gpt2, tmp_path_factory):
    """A tiny T5 with the GPT-2 fixture's byte-level tokenizer (its one special token is eos)."""
    d = str(tmp_path_factory.mktemp("t5"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(gpt2, name), d)
    tok = models.Tokenizer.from_dir(d)
    eos = tok.eos_token_id
    tt.manual_seed(0)
    models.T5(vocab_size=tok.backend.get_vocab_size(), d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
              pad_token_id=eos, eos_token_id=eos, decoder_start_token_id=eos).save_hf(d)
    return d


def test_generate_answers_with_an_encoder_decoder_as_transformers_does(t5, capsys):
    generate_cli.main([t5, "the dog sat", "--max-new-tokens", "6"])
    out = capsys.readouterr().out
    tok = models.Tokenizer.from_dir(t5)
    ref = transformers.T5ForConditionalGeneration.from_pretrained(t5).eval()
    ids = torch.tensor(tok("the dog sat")["input_ids"].numpy())
    with torch.no_grad():
        want = ref.generate(ids, max_new_tokens=6, do_sample=False, num_beams=1)
    assert out == tok.decode(want[0, 1:].tolist(), skip_special_tokens=True) + "\n"
    assert not out.startswith("the dog sat")  # the prompt is the input, not a prefix


def test_generate_with_beams_on_an_encoder_decoder(t5):
    model, tok = text.load(t5)
    got = text.generate_text(model, tok, "a cat", max_new_tokens=4, num_beams=2)
    ids = model.generate(tok("a cat")["input_ids"], 4, num_beams=2)
    assert got == tok.decode(ids[0, 1:].tolist(), skip_special_tokens=True)


def test_embed_refuses_a_decoder_in_one_line(gpt2):
    with pytest.raises(SystemExit) as e:
        embed_cli.main([gpt2, "a sentence"])
    msg = str(e.value)
    assert msg.startswith(f"embed: {gpt2} holds a GPT model;") and "BERT" in msg, msg
    assert "tools/generate.py" in msg and "\n" not in msg, msg


def test_generate_refuses_an_encoder_in_one_line(bert):
    with pytest.raises(SystemExit) as e:
        generate_cli.main([bert, "a sentence"])
    msg = str(e.value)
    assert msg.startswith(f"generate: {bert} holds a BERT model") and "tools/embed.py" in msg, msg


@pytest.mark.parametrize("cli", [generate_cli, embed_cli])
def test_a_missing_tokenizers_package_is_one_line_naming_the_extra(gpt2, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    with pytest.raises(SystemExit) as e:
        cli.main([gpt2, "x"])
    msg = str(e.value)
    assert "pip install 'tinytensor[text]'" in msg and "\n" not in msg, msg
