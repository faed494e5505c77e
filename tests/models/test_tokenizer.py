"""models.Tokenizer: an HF directory's tokenizer.json through the `tokenizers` library,
with padding, attention masks and the special tokens of tokenizer_config.json."""
import json
import os

import pytest

from .text_fixtures import bert, gpt2, tokenizers  # noqa: F401 (bert, gpt2: fixtures)

from tinytensor import models  # noqa: E402


def test_encode_decode_match_the_tokenizers_library(gpt2):
    tok = models.Tokenizer.from_dir(gpt2)
    ref = tokenizers.Tokenizer.from_file(os.path.join(gpt2, "tokenizer.json"))
    enc = tok("the cat saw the log")
    assert enc["input_ids"].tolist() == [ref.encode("the cat saw the log").ids]
    assert enc["attention_mask"].tolist() == [[1] * len(ref.encode("the cat saw the log").ids)]
    assert tok.decode(enc["input_ids"][0]) == "the cat saw the log"
    assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id == ref.token_to_id("<|endoftext|>")


def test_batch_padding_follows_padding_side_and_masks_the_pads(gpt2, bert):
    tok = models.Tokenizer.from_dir(gpt2, pad_token="<|endoftext|>")   # GPT-2 has no pad token
    enc = tok(["the cat", "the cat sat on the mat"])
    ids, mask = enc["input_ids"].numpy(), enc["attention_mask"].numpy()
    n_short = int(mask[0].sum())
    assert ids.shape == mask.shape and n_short < ids.shape[1]
    assert (mask[0, :ids.shape[1] - n_short] == 0).all()                 # left padding
    assert (ids[0, :ids.shape[1] - n_short] == tok.pad_token_id).all()
    assert tok.decode(ids[0], skip_special_tokens=True) == "the cat"
    wp = models.Tokenizer.from_dir(bert)
    enc = wp(["a cat", "the dog sat on the log"])
    ids, mask = enc["input_ids"].numpy(), enc["attention_mask"].numpy()
    assert mask[0, 0] == 1 and mask[0, -1] == 0                          # right padding (default)
    assert ids[0, 0] == wp.token_to_id("[CLS]") and ids[0, -1] == wp.pad_token_id == 0
    assert wp.batch_decode(ids, skip_special_tokens=True) == ["a cat", "the dog sat on the log"]


def test_padding_and_truncation_saved_in_tokenizer_json_are_not_applied(bert, tmp_path):
    # all-MiniLM-L6-v2's tokenizer.json pads every text to 128 and truncates there; padding
    # counted as tokens would flatten every mean-pooled embedding (transformers ignores it too)
    backend = tokenizers.Tokenizer.from_file(os.path.join(bert, "tokenizer.json"))
    backend.enable_padding(pad_id=0, pad_token="[PAD]", length=20)
    backend.enable_truncation(max_length=4)
    d = tmp_path / "saved_padding"
    d.mkdir()
    backend.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(open(os.path.join(bert, "tokenizer_config.json")).read())
    enc = models.Tokenizer.from_dir(str(d))(["a cat", "the dog sat on the log"])
    ref = models.Tokenizer.from_dir(bert)(["a cat", "the dog sat on the log"])
    assert enc["input_ids"].tolist() == ref["input_ids"].tolist()
    assert enc["attention_mask"].tolist() == ref["attention_mask"].tolist()


def test_truncation_and_max_length(bert):
    wp = models.Tokenizer.from_dir(bert)
    enc = wp(["the dog sat on the log and the cat sat on the mat"], max_length=6, truncation=True)
    assert enc["input_ids"].shape == (1, 6)
    assert enc["input_ids"][0, -1].item() == wp.token_to_id("[SEP]")   # specials survive truncation


def test_missing_files_and_padding_without_pad_token_are_clear_errors(tmp_path, gpt2):
    with pytest.raises(FileNotFoundError, match=r"Tokenizer: .*tokenizer\.json"):
        models.Tokenizer.from_dir(str(tmp_path))
    tok = models.Tokenizer.from_dir(gpt2)
    with pytest.raises(ValueError, match=r"Tokenizer: padding 2 texts of different lengths needs a "
                                         r"pad token.*pad_token"):
        tok(["the cat", "the cat sat on the mat"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tokenizer.json").write_text(open(os.path.join(gpt2, "tokenizer.json")).read())
    (bad / "tokenizer_config.json").write_text(json.dumps({"pad_token": "<nope>"}))
    with pytest.raises(ValueError, match=r"Tokenizer: .*tokenizer_config\.json: pad_token=\"<nope>\" "
                                         r"must be a token in the vocabulary"):
        models.Tokenizer.from_dir(str(bad))
