"""The JSON files of a HuggingFace directory, malformed (issue 26): one reader
(models/hf_json.py) turns a truncated tokenizer.json, tokenizer_config.json that is not JSON,
is a list or has `"pad_token": 5`, nesting deep enough to end json.load in RecursionError,
and a modules.json that is an object into one error, ConfigError, naming the file and the
field. Before, these were bare Exception, JSONDecodeError, TypeError, RecursionError and
AttributeError from deep inside."""
import json
import os
import shutil

import pytest

from tests.models.text_fixtures import bert_dir, gpt2  # noqa: F401 (gpt2: a fixture)

from tinytensor import models  # noqa: E402
from tinytensor.models.hf import ConfigError  # noqa: E402
from tinytensor.models.hf_json import MAX_DEPTH, read_json  # noqa: E402
from tinytensor.tools.lib import text  # noqa: E402

DEEP = "[" * 100_000 + "]" * 100_000  # json.load: RecursionError


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return bert_dir(str(tmp_path_factory.mktemp("bert")))


def _copy(src, tmp_path, name):
    d = tmp_path / name
    shutil.copytree(src, d)
    return d


def _refused(call, path, *phrases):
    with pytest.raises(ConfigError) as e:
        call()
    message = str(e.value)
    assert str(path) in message, message
    for phrase in phrases:
        assert phrase in message, message
    return message


@pytest.mark.parametrize("name,content,phrases", [
    ("tokenizer_config.json", '{"pad_token": "<|endoftext|>",', ["is not valid JSON"]),
    ("tokenizer_config.json", '["<|endoftext|>"]', ["holds a JSON array, not an object"]),
    ("tokenizer_config.json", '{"pad_token": 5}', ["pad_token=5 must be a token"]),
    ("tokenizer_config.json", '{"eos_token": {"content": ["x"]}}', ['eos_token={"content": ["x"]}']),
    ("tokenizer_config.json", '{"bos_token": "\\udcff"}', ['bos_token="\\udcff" must be a token']),
    ("tokenizer_config.json", '{"pad_token": "<nope>"}', ["must be a token in the vocabulary"]),
    ("tokenizer_config.json", '{"padding_side": "middle"}', ['padding_side="middle" must be "left"']),
    ("tokenizer_config.json", '{"a": ' + DEEP + "}", [f"nests 100001 levels deep, at most {MAX_DEPTH}"]),
    ("tokenizer_config.json", b"{\"pad_token\": \"\xff\"}", ["is not UTF-8 text (byte 0xff at offset 15)"]),
    ("special_tokens_map.json", '{"eos_token": 7}', ["eos_token=7 must be a token"]),
])
def test_tokenizer_files_are_config_errors_naming_file_and_field(gpt2, tmp_path, name, content, phrases):
    d = _copy(gpt2, tmp_path, "tok")
    path = d / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _refused(lambda: models.Tokenizer.from_dir(str(d)), path, *phrases)


def test_a_truncated_tokenizer_json_names_the_file(gpt2, tmp_path):
    d = _copy(gpt2, tmp_path, "tok")
    path = d / "tokenizer.json"
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])
    _refused(lambda: models.Tokenizer.from_dir(str(d)), path, "cannot be read by the tokenizers "
             "library", "EOF while parsing")


@pytest.mark.parametrize("where,content,phrases", [
    (("1_Pooling", "config.json"), DEEP, ["nests 100000 levels deep"]),
    (("1_Pooling", "config.json"), "{", ["is not valid JSON"]),
    (("1_Pooling", "config.json"), '{"pooling_mode_mean_tokens": "yes"}',
     ['pooling_mode_mean_tokens="yes" must be true or false']),
    (("modules.json",), '{"0": {"type": "sentence_transformers.models.Normalize"}}',
     ["holds a JSON object, not an array"]),
    (("modules.json",), '[{"type": "x"}, 5]', ["[1]=5 must be an object with a string \"type\""]),
    (("modules.json",), DEEP, ["nests 100000 levels deep"]),
    (("sentence_bert_config.json",), '{"max_seq_length": "long"}',
     ['max_seq_length="long" must be an integer >= 1 or null']),
    (("config.json",), '{"a": ' + DEEP + "}", ["nests 100001 levels deep"]),
])
def test_sentence_transformers_files_are_config_errors_naming_file_and_field(bert, tmp_path, where,
                                                                               content, phrases):
    d = _copy(bert, tmp_path, "st")
    path = d.joinpath(*where)
    path.write_text(content)
    _refused(lambda: text.pooling_config(str(d)), path, *phrases)


@pytest.mark.parametrize("content,phrases", [
    (DEEP, ["nests 100000 levels deep"]),
    ('{"model_type": "bert",', ["is not valid JSON"]),
    ('{"model_type": "bert", "vocab_size": ' + "9" * 5000 + "}", ["is not valid JSON", "4300 digits"]),
])
def test_from_hf_config_json_is_a_config_error(bert, tmp_path, content, phrases):
    d = _copy(bert, tmp_path, "m")
    (d / "config.json").write_text(content)
    _refused(lambda: models.from_hf(str(d)), d / "config.json", *phrases)


def test_the_reader_accepts_what_hf_writes(tmp_path):
    config = {"added_tokens_decoder": {"0": {"content": "<s>", "special": True}}, "x": [1, [2, [3]]],
              "nested": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))}
    path = tmp_path / "tokenizer_config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(config).encode())  # with a BOM, as some editors save
    assert read_json(str(path), "test") == config
    assert read_json(str(tmp_path / "missing.json"), "test") is None
    (tmp_path / "deeper.json").write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ConfigError, match="nests 65 levels deep"):
        read_json(str(tmp_path / "deeper.json"), "test", expect=list)


def test_the_directory_as_written_still_loads(bert):
    tok = models.Tokenizer.from_dir(bert)
    assert tok.pad_token == "[PAD]" and tok.pad_token_id == tok.token_to_id("[PAD]")
    assert text.pooling_config(bert) == {"modes": ["mean"], "normalize": True, "max_length": 32}
    assert os.path.exists(os.path.join(bert, "1_Pooling", "config.json"))


@pytest.mark.parametrize("changes,phrases", [  # found by tests/fuzz: ValueErrors without the file
    ({"model_type": None}, ["unknown architecture model_type=None"]),
    ({"hidden_dropout_prob": 4294967295}, ["hidden_dropout_prob=4294967295 must be a probability"]),
    ({"attention_probs_dropout_prob": -1}, ["attention_probs_dropout_prob=-1 must be a probability"]),
    ({"architectures": 5}, ["architectures=5 must be a list of class names"]),
    ({"architectures": ["BertModQl"]}, ["architectures=['BertModQl'], a BERT head tinytensor lacks, is not supported"]),
    ({"hidden_act": "gelu_[ew"}, ["gelu_[ew"]),
    ({"id2label": {"x": "A"}}, ["id2label keys must be label ids", "got 'x'"]),
])
def test_config_values_a_layer_would_refuse_are_config_errors_naming_the_file(bert, tmp_path,
                                                                              changes, phrases):
    d = _copy(bert, tmp_path, "m")
    path = d / "config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), **changes)))
    message = _refused(lambda: models.from_hf(str(d)), "config.json", *phrases)
    assert "from_hf" in message
