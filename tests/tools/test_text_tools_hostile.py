"""tools/generate.py and tools/embed.py on input they did not expect (issue 26): argv that is
not UTF-8 (a TypeError from the tokenizers library before) is refused naming the byte, and an
empty prompt (IndexError before) starts from BOS, as transformers' generate without
input_ids does, or is refused clearly when there is no BOS."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.models.text_fixtures import bert, gpt2  # noqa: F401 (fixtures)

from tinytensor import models  # noqa: E402
import tinytensor as tt  # noqa: E402
from tests.limits import ROOT  # noqa: E402
from tinytensor.tools import embed as embed_cli, generate as generate_cli  # noqa: E402
from tinytensor.tools.lib import text  # noqa: E402

NOT_UTF8 = os.fsdecode(b"caf\xc3\xa9 \xff!")  # what Python makes of such argv bytes on POSIX


def test_generate_refuses_a_prompt_that_is_not_utf8_naming_the_byte(gpt2, capsys):
    with pytest.raises(SystemExit) as e:
        generate_cli.main([gpt2, NOT_UTF8])
    assert e.value.code == 2
    assert "the prompt is not valid UTF-8: byte 0xff at offset 6" in capsys.readouterr().err


def test_embed_refuses_a_sentence_that_is_not_utf8_naming_it(bert, capsys):
    with pytest.raises(SystemExit) as e:
        embed_cli.main([bert, "fine", NOT_UTF8])
    assert e.value.code == 2
    assert "sentence 2 is not valid UTF-8: byte 0xff at offset 6" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="argv bytes are a POSIX notion")
def test_real_argv_bytes_reach_the_check(tmp_path):
    proc = subprocess.run([sys.executable, "tools/generate.py", str(tmp_path), b"\xfe\xff"], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, timeout=120)
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"the prompt is not valid UTF-8: byte 0xfe at offset 0" in proc.stderr


def test_the_tokenizer_names_a_lone_surrogate(gpt2):
    tok = models.Tokenizer.from_dir(gpt2)
    with pytest.raises(ValueError, match=r"text 1 is not valid Unicode: a lone surrogate at "
                                         r"character 5 \(byte 0xff"):
        tok(["ok", NOT_UTF8])
    with pytest.raises(ValueError, match="text 0 is not valid Unicode"):
        tok.encode(NOT_UTF8)


def test_an_empty_prompt_starts_from_bos(gpt2, capsys):
    model, _ = text.load(gpt2)
    # the fixture's BOS is its EOS, after which generation ends at once; with another BOS
    # token the continuation shows where generation started
    tok = models.Tokenizer.from_dir(gpt2, bos_token="the")
    assert tok("", add_special_tokens=False)["input_ids"].shape == (1, 0)
    bos = tt.tensor([[tok.bos_token_id]], dtype=tt.int64)
    want = tok.decode(model.generate(bos, 6, eos_token_id=tok.eos_token_id)[0, 1:],
                      skip_special_tokens=True)
    assert text.generate_text(model, tok, "", max_new_tokens=6) == want and want
    beams = text.generate_text(model, tok, "", max_new_tokens=6, num_beams=2)
    ref = model.generate(bos, 6, num_beams=2, eos_token_id=tok.eos_token_id)[0, 1:]
    assert beams == tok.decode(ref, skip_special_tokens=True)
    generate_cli.main([gpt2, "", "--max-new-tokens", "6"])  # its own BOS (= EOS): ends at once
    assert capsys.readouterr().out == "\n"


def test_an_empty_prompt_without_a_bos_is_refused_clearly(gpt2):
    model, _ = text.load(gpt2)
    tok = models.Tokenizer.from_dir(gpt2, bos_token=None)
    model.config.bos_token_id = None
    with pytest.raises(ValueError, match="the prompt is empty .* names a bos_token"):
        text.generate_text(model, tok, "", max_new_tokens=3)
    with pytest.raises(ValueError, match=r"generate: input_ids of shape \(1, 0\) holds no tokens"):
        model.generate(tt.tensor(np.zeros((1, 0), np.int64)), 3)
