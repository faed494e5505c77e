"""What every model class shares (issue 10, and issue 9 leftovers): configs built from
overrides without touching the caller's object, derived fields that follow the overrides,
pad_token_id checked against the vocabulary, clear errors for malformed config.json fields,
one KV cache class, and save_hf's config.json written atomically."""
import copy
import json
import os
import threading

import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor import models
from tinytensor.models import hf

TINY = {  # model class -> (config class, fields of a small model)
    models.GPT: (models.GPTConfig, dict(vocab_size=32, n_positions=8, n_embd=8, n_layer=1, n_head=2)),
    models.Llama: (models.LlamaConfig, dict(vocab_size=32, hidden_size=8, intermediate_size=8,
                                            num_hidden_layers=1, num_attention_heads=2)),
    models.BERT: (models.BertConfig, dict(vocab_size=32, hidden_size=8, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=8,
                                          max_position_embeddings=8)),
    models.T5: (models.T5Config, dict(vocab_size=32, d_model=8, d_kv=4, d_ff=8, num_layers=1,
                                      num_heads=2)),
    models.Transformer: (models.TransformerConfig, dict(vocab_size=32, d_model=8, encoder_layers=1,
                                                        decoder_layers=1, encoder_attention_heads=2,
                                                        decoder_attention_heads=2, encoder_ffn_dim=8,
                                                        decoder_ffn_dim=8, max_position_embeddings=8)),
}
_SEQ2SEQ = dict(vocab_size=32, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8,
                max_position_embeddings=8)
TINY[models.BART] = (models.BartConfig, _SEQ2SEQ)
TINY[models.Marian] = (models.MarianConfig, dict(_SEQ2SEQ, pad_token_id=31, decoder_start_token_id=31))
CLASSES = list(TINY)
NAME = {c: c.__name__ for c in CLASSES}


@pytest.mark.parametrize("cls", CLASSES, ids=NAME.get)
def test_overrides_leave_the_callers_config_unchanged(cls):
    config_class, small = TINY[cls]
    config = config_class(**small)
    before = copy.deepcopy(config)
    model = cls(config, initializer_range=0.01) if hasattr(config, "initializer_range") else \
        cls(config, dropout_rate=0.0) if cls is models.T5 else cls(config, dropout=0.0)
    assert config == before
    assert model.config is not config
    assert model.config != config  # the override went into the model's own copy


@pytest.mark.parametrize("cls", CLASSES, ids=NAME.get)
def test_unknown_override_names_the_field_and_the_config_class(cls):
    config_class, small = TINY[cls]
    with pytest.raises(TypeError, match=rf"{cls.__name__}: 'n_layers' is not a field of {config_class.__name__}"):
        cls(**small, n_layers=2)


def test_marian_overrides_build_the_config_so_derived_fields_follow():
    # decoder_vocab_size follows vocab_size (it was computed from the default 58101 first)
    model = models.Marian(**TINY[models.Marian][1])
    assert model.config.decoder_vocab_size == 32
    assert model.decoder.embed_tokens.weight.shape == (32, 8)
    resized = models.Marian(model.config, vocab_size=40)
    assert resized.config.decoder_vocab_size == 40 and model.config.decoder_vocab_size == 32


def test_derived_fields_follow_overrides_and_explicit_ones_stay():
    small = TINY[models.Llama][1]
    config = models.LlamaConfig(**small)  # head_dim 4, kv heads 2: derived
    wide = models.Llama(config, hidden_size=16, num_attention_heads=4)
    assert (wide.config.head_dim, wide.config.num_key_value_heads) == (4, 4)
    assert (config.head_dim, config.num_key_value_heads) == (4, 2)
    explicit = models.LlamaConfig(**small, head_dim=6, num_key_value_heads=1)
    kept = models.Llama(explicit, hidden_size=16, num_attention_heads=4)
    assert (kept.config.head_dim, kept.config.num_key_value_heads) == (6, 1)
    t5 = models.T5(models.T5Config(**TINY[models.T5][1]), num_layers=2)
    assert t5.config.num_decoder_layers == 2 and len(t5.decoder.block) == 2


@pytest.mark.parametrize("cls", [models.Llama, models.BERT, models.BART, models.Marian, models.Transformer],
                         ids=NAME.get)
@pytest.mark.parametrize("pad", [32, 40, -33, 1.5])
def test_pad_token_id_outside_the_vocabulary_is_a_clear_error(cls, pad):
    _, small = TINY[cls]
    with pytest.raises(ValueError, match=rf"{cls.__name__}: pad_token_id={pad} is not a row of the "
                                         r"token embedding \(vocab_size=32\); it must be None or an "
                                         r"int in \[-32, 32\)"):
        cls(**dict(small, pad_token_id=pad))


def test_pad_token_id_checked_against_an_unshared_decoder_vocabulary():
    small = dict(TINY[models.Marian][1], share_encoder_decoder_embeddings=False, decoder_vocab_size=16,
                 pad_token_id=20, decoder_start_token_id=0)
    with pytest.raises(ValueError, match=r"pad_token_id=20 .*\(decoder_vocab_size=16\)"):
        models.Marian(**small)
    assert models.Marian(**dict(small, pad_token_id=-1)).decoder.embed_tokens.padding_idx == 15


@pytest.mark.parametrize("value", ["linear", ["default"], 3])
def test_llama_rope_parameters_that_are_not_a_dict_are_a_clear_error(value):
    with pytest.raises(ValueError, match=r"LlamaConfig: rope_parameters must be a dict"):
        models.LlamaConfig.from_dict({"rope_parameters": value})
    with pytest.raises(ValueError, match=r"LlamaConfig: rope_scaling must be a dict"):
        models.LlamaConfig.from_dict({"rope_scaling": value})


def test_bert_id2label_with_non_numeric_keys_is_a_clear_error():
    with pytest.raises(ValueError, match=r"BertConfig: id2label keys must be label ids .*got 'positive'"):
        models.BertConfig.from_dict({"id2label": {"0": "negative", "positive": "positive"}})
    with pytest.raises(ValueError, match=r"BertConfig: id2label must be a dict .*got \['a', 'b'\]"):
        models.BertConfig.from_dict({"id2label": ["a", "b"]})
    assert models.BertConfig.from_dict({"id2label": {"0": "a", "1": "b"}}).num_labels == 2


@pytest.mark.parametrize("cls", [models.GPT, models.Llama], ids=NAME.get)
def test_decoder_only_models_cache_in_nn_kv_caches(cls):
    model = cls(**TINY[cls][1]).eval()
    cache = model.new_cache()
    with tt.no_grad():
        model(tt.tensor([[1, 2, 3], [4, 5, 6]]), cache=cache)
    assert all(type(c) is nn.KVCache for c in cache.self_attn) and cache.length == 3
    cache.select([1, 1, 0])
    assert cache.self_attn[0].key.shape[0] == 3 and cache.length == 3


def test_save_hf_is_a_plain_function_and_a_method(tmp_path):
    model = models.GPT(**TINY[models.GPT][1])
    models.save_hf(model, str(tmp_path / "f"))
    model.save_hf(str(tmp_path / "m"))
    for d in ("f", "m"):
        loaded = models.from_hf(str(tmp_path / d))
        assert loaded.config == model.config
    with pytest.raises(ValueError, match=r"save_hf: Transformer has model_type='transformer', "
                                         r"which has no HuggingFace layout"):
        models.save_hf(models.Transformer(**TINY[models.Transformer][1]), str(tmp_path / "t"))


def test_config_json_exports_to_one_directory_at_once_do_not_share_a_temporary(tmp_path, monkeypatch):
    # the first export stops half-way through writing config.json while a second one runs
    # to the end; with one fixed temporary name the second truncated and renamed the
    # first's file, whose own rename then failed (and wrote into config.json)
    model = models.GPT(**TINY[models.GPT][1])
    dump, first_writing, second_done = json.dump, threading.Event(), threading.Event()
    errors = []

    def slow_dump(value, f, **kw):
        if threading.current_thread().name == "first":
            f.write("{")
            first_writing.set()
            assert second_done.wait(10)
            f.seek(0)
        dump(value, f, **kw)

    monkeypatch.setattr(hf.json, "dump", slow_dump)

    def export(name):
        try:
            model.save_hf(str(tmp_path))
        except BaseException as e:  # noqa: BLE001 (reported below, from the main thread)
            errors.append((name, e))
        finally:
            if name == "second":
                second_done.set()

    first = threading.Thread(target=export, args=("first",), name="first")
    first.start()
    assert first_writing.wait(10)
    second = threading.Thread(target=export, args=("second",), name="second")
    second.start()
    second.join(10)
    first.join(10)
    assert not errors, errors
    assert json.loads((tmp_path / "config.json").read_text())["n_embd"] == 8
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names fds through /proc")
def test_config_json_is_fsynced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    events = []
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def record_replace(src, dst):
        events.append(("replace", os.path.basename(dst)))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    models.GPT(**TINY[models.GPT][1]).save_hf(str(tmp_path))
    i = events.index(("replace", "config.json"))
    temp = events[i - 1]
    assert temp[0] == "fsync" and os.path.dirname(temp[1]) == str(tmp_path) \
        and os.path.basename(temp[1]).startswith(".config.json.")
    assert events[i + 1:] == [("fsync", str(tmp_path))]
