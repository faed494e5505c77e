"""Hostile and malformed HuggingFace directories (issue 9): models.from_hf and the torch
pickle reader refuse them with an error that names the file and the field, before allocating
more than the files hold. Every hostile file is built here, a few hundred bytes to a few KB.

Each refusal runs under `_bounded`: the peak of traced memory (NumPy's buffers included) and
the wall time are asserted, and the address space and the time are capped meanwhile, so that
a regression fails with MemoryError or TimeoutError instead of taking the machine down."""
import collections
import contextlib
import io
import json
import os
import pickle
import re
import resource
import signal
import tracemalloc
import zipfile
import dataclasses
from dataclasses import fields

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")
from tinytensor import models  # noqa: E402
from tinytensor.models import hf  # noqa: E402
from tinytensor.nn.torch_pickle import load_torch_bin  # noqa: E402
from tests.limits import cpu_seconds

MiB = 1 << 20

TINY = {  # kind -> a small model of that family, two layers per stack
    "gpt2": lambda: models.GPT(models.GPTConfig(vocab_size=50, n_positions=8, n_embd=16,
                                                n_layer=2, n_head=2)),
    "openai-gpt": lambda: models.GPT(models.GPTConfig(vocab_size=50, n_positions=8, n_embd=16,
                                                      n_layer=2, n_head=2, model_type="openai-gpt")),
    "llama": lambda: models.Llama(models.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)),
    "bert": lambda: models.BERT(models.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=8), head="pretraining"),
    "t5": lambda: models.T5(models.T5Config(
        vocab_size=50, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, relative_attention_max_distance=16)),
    "bart": lambda: models.BART(models.BartConfig(
        vocab_size=50, max_position_embeddings=8, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
        decoder_ffn_dim=24)),
    "marian": lambda: models.Marian(models.MarianConfig(
        vocab_size=50, max_position_embeddings=8, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
        decoder_ffn_dim=24, pad_token_id=49, decoder_start_token_id=49)),
}


def _checkpoint(tmp_path, kind, fmt="safetensors"):
    """A directory like transformers writes: config.json and the weights in `fmt`."""
    d = tmp_path / f"{kind}-{fmt}"
    TINY[kind]().save_hf(str(d))
    if fmt == "bin":
        weights = hf.read_weights(str(d))
        torch.save({k: torch.from_numpy(np.array(v)) for k, v in weights.items()},
                   d / "pytorch_model.bin")
        os.remove(d / "model.safetensors")
    return d


def _edit_config(d, **changes):
    path = d / "config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), **changes)))


def _vm_size():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024


@contextlib.contextmanager
def _bounded(peak=4 * MiB, seconds=1.0):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_size() + 2048 * MiB if os.path.exists("/proc/self/status") else None
    if cap is not None and (hard == resource.RLIM_INFINITY or cap < hard):
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    def overdue(*_):
        raise TimeoutError(f"still running after {10 * seconds} s")

    previous = signal.signal(signal.SIGALRM, overdue)
    signal.setitimer(signal.ITIMER_REAL, 10 * seconds)
    tracemalloc.start()
    start = cpu_seconds()
    try:
        yield
        elapsed = cpu_seconds() - start
        used = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert used < peak, f"peak traced memory {used} bytes, expected under {peak}"
    assert elapsed < seconds, f"took {elapsed:.2f} s of CPU"


# --------------------------------------------------------------- config.json against the weights
@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("kind,field,value,message", [
    ("gpt2", "n_layer", 10**9,
     r"config.json: n_layer=1000000000 but .*/{file} holds 2 layers \(h.0 .. h.1\)"),
    ("gpt2", "vocab_size", 300_000_000,
     r"wrong shape: wte.weight expects \(300000000, 16\) but the file has \(50, 16\) "
     r"\(config.json: vocab_size=300000000\)"),
    ("gpt2", "n_inner", 10**9, r"h.0.mlp.c_fc.weight expects \(1000000000, 16\).*n_inner=1000000000"),
    ("llama", "num_hidden_layers", 10**9,
     r"num_hidden_layers=1000000000 but .*/{file} holds 2 layers \(model.layers.0 .. model.layers.1\)"),
    ("llama", "vocab_size", 300_000_000,
     r"model.embed_tokens.weight expects \(300000000, 16\).*vocab_size=300000000"),
    ("llama", "intermediate_size", 10**9,
     r"model.layers.0.mlp.gate_proj.weight expects \(1000000000, 16\).*intermediate_size=1000000000"),
    ("bert", "num_hidden_layers", 10**9, r"num_hidden_layers=1000000000 but .* holds 2 layers"),
])
def test_config_sizes_the_weights_do_not_hold_are_refused_before_allocating(
        tmp_path, fmt, kind, field, value, message):
    d = _checkpoint(tmp_path, kind, fmt)
    _edit_config(d, **{field: value})
    file = "model.safetensors" if fmt == "safetensors" else "pytorch_model.bin"
    with _bounded():
        with pytest.raises(hf.ConfigError, match=message.format(file=file)) as e:
            models.from_hf(str(d))
    assert str(d / "config.json") in str(e.value)


# size fields no weight depends on: positions computed on the fly (RoPE, Marian's sinusoids),
# T5's bucket distance, the label count of a model without a classifier
UNSTORED = {"llama": {"max_position_embeddings"}, "marian": {"max_position_embeddings"},
            "t5": {"relative_attention_max_distance"}, "bert": {"num_labels"}}


@pytest.mark.parametrize("kind", sorted(TINY))
def test_every_size_field_of_every_family_is_checked_against_the_weights(tmp_path, kind):
    # a size field that the check forgot would let 10**9 through to the model's allocation
    d = _checkpoint(tmp_path, kind)
    original = (d / "config.json").read_text()
    sizes = [f.name for f in fields(hf.FAMILIES[kind].config_class)
             if f.type is int and not f.name.endswith("_token_id")]
    loaded = set()
    for field in sizes:
        (d / "config.json").write_text(original)
        _edit_config(d, **{field: 10**9})
        with _bounded(peak=8 * MiB):
            try:
                model = models.from_hf(str(d))
            except hf.ConfigError as e:
                assert f"{field}=1000000000" in str(e), str(e)
            else:
                assert not model.training
                loaded.add(field)
    assert loaded == UNSTORED.get(kind, set())


# --------------------------------------------------------------- config.json on its own
@pytest.mark.parametrize("kind,changes,message", [
    ("gpt2", {"n_head": 0}, r"config.json: n_head=0 must be an integer > 0"),
    ("gpt2", {"n_embd": "16"}, r'config.json: n_embd="16" must be an integer > 0'),
    ("gpt2", {"n_layer": 2.0}, r"config.json: n_layer=2.0 must be an integer > 0"),
    ("gpt2", {"n_head": 3}, r"config.json: n_embd=16 is not divisible by n_head=3"),
    ("gpt2", {"layer_norm_epsilon": "1e-5"}, r'layer_norm_epsilon="1e-5" must be a number'),
    ("gpt2", {"tie_word_embeddings": "yes"}, r'tie_word_embeddings="yes" must be true or false'),
    ("gpt2", {"vocab_size": None, "n_head": True},
     r"vocab_size=null must be an integer > 0; n_head=true must be an integer > 0"),
    ("llama", {"num_attention_heads": 0}, r"num_attention_heads=0 must be an integer > 0"),
    ("llama", {"hidden_size": "16"}, r'hidden_size="16" must be an integer > 0'),
    ("llama", {"num_key_value_heads": 3},
     r"num_attention_heads=4 is not divisible by num_key_value_heads=3"),
    ("llama", {"rms_norm_eps": None}, r"rms_norm_eps=null must be a number"),
    ("bert", {"hidden_size": 16, "num_attention_heads": 3},
     r"hidden_size=16 is not divisible by num_attention_heads=3"),
    ("bert", {"id2label": ["a", "b"]}, r'id2label=\["a", "b"\] must be an object'),
    ("t5", {"feed_forward_proj": 3}, r"feed_forward_proj=3 must be a string"),
])
def test_malformed_config_fields_are_named_with_the_file(tmp_path, kind, changes, message):
    d = _checkpoint(tmp_path, kind)
    _edit_config(d, **changes)
    with pytest.raises(hf.ConfigError, match=message) as e:
        models.from_hf(str(d))
    assert str(d / "config.json") in str(e.value)


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "holds a JSON array, not an object"),
    ('"gpt2"', "holds a JSON string, not an object"),
    ('{"model_type": ["gpt2"]}', r"unknown architecture model_type=\['gpt2'\]"),
])
def test_config_that_is_not_an_object_is_a_clear_error(tmp_path, text, message):
    d = _checkpoint(tmp_path, "gpt2")
    (d / "config.json").write_text(text)
    with pytest.raises(ValueError, match=message) as e:
        models.from_hf(str(d))
    assert "config.json" in str(e.value) or "unknown architecture" in str(e.value)


# --------------------------------------------------------------- the returned model
def test_from_hf_returns_eval_mode_like_from_pretrained(tmp_path):
    # transformers' from_pretrained returns eval mode; in training mode dropout would move
    # these logits far from the reference's
    models.GPT(models.GPTConfig(vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                resid_pdrop=0.5, embd_pdrop=0.5, attn_pdrop=0.5)).save_hf(str(tmp_path))
    model = models.from_hf(str(tmp_path))
    assert not any(m.training for m in model.modules())
    ids = tt.tensor(np.random.default_rng(0).integers(0, 40, (2, 9)))
    logits = model(ids).logits.detach().numpy()
    np.testing.assert_array_equal(model(ids).logits.detach().numpy(), logits)
    with_dropout = model.train()(ids).logits.detach().numpy()
    assert np.abs(with_dropout - logits).max() > 0.1


@pytest.mark.parametrize("kind,variant", [
    ("gpt2", {}), ("openai-gpt", {}), ("gpt2", {"n_inner": 40}),
    ("llama", {}), ("llama", {"tie_word_embeddings": True}),
    ("llama", {"attention_bias": True, "mlp_bias": True, "head_dim": 6, "num_key_value_heads": 1}),
    ("bert", {"head": None}), ("bert", {"head": "mlm"}), ("bert", {"head": "pretraining"}),
    ("bert", {"head": "classification", "num_labels": 3}),
    ("t5", {}), ("t5", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
                        "num_decoder_layers": 3}),
    ("bart", {}), ("bart", {"tie_word_embeddings": False}),
    ("marian", {}), ("marian", {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 60}),
    ("marian", {"tie_word_embeddings": False}),
])
def test_expected_shapes_are_those_of_the_model(kind, variant):
    # from_hf checks a checkpoint against config arithmetic before building the model; this
    # holds that arithmetic equal to what the model really allocates
    variant = dict(variant)
    base = TINY[kind]()
    head = variant.pop("head", None)
    config_obj = dataclasses.replace(base.config, **variant)
    model = models.BERT(config_obj, head=head) if kind == "bert" else type(base)(config_obj)
    family = hf.FAMILIES[model.config.model_type]
    config = dict(model.config.to_dict(), model_type=family.model_type)
    if kind == "bert":
        from tinytensor.models.bert_hf import ARCHITECTURE_OF_HEAD
        config["architectures"] = [ARCHITECTURE_OF_HEAD[model.head]]
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert hf.expected_shapes(family, config) == want


# --------------------------------------------------------------- pytorch_model.bin
class _Storage:
    def __init__(self, key, numel, kind="FloatStorage"):
        self.key, self.numel, self.kind = key, numel, getattr(torch, kind)


class _Tensor:
    """Pickles as torch.save writes a tensor, with whatever offset/size/stride it is given."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride)

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args + (False, collections.OrderedDict())


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", obj.kind, obj.key, "cpu", obj.numel)
        return None


def _write_bin(path, state, entries, compress=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(state)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in entries.items():
            z.writestr(f"archive/data/{key}", data, compress_type=compress)


def test_stride_zero_expansion_larger_than_its_storage_is_refused(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    torch.save({"w": torch.zeros(1).expand(20000, 20000)}, path)  # what torch itself writes
    assert os.path.getsize(path) < 2048
    with _bounded(peak=1 * MiB):
        with pytest.raises(nn.CheckpointError, match=r"tensor 'w': size \(20000, 20000\) "
                           r"\(400000000 elements\), stride \(0, 0\) at offset 0 has more "
                           r"elements than its storage '0' holds \(1\)"):
            load_torch_bin(str(path))


def test_from_hf_refuses_an_expanded_embedding_naming_the_file(tmp_path):
    d = _checkpoint(tmp_path, "gpt2", "bin")
    state = torch.load(d / "pytorch_model.bin")
    state["transformer.wte.weight"] = torch.zeros(1, 16).expand(50, 16)
    torch.save(state, d / "pytorch_model.bin")
    with pytest.raises(nn.CheckpointError, match="(?s)pytorch_model.bin.*tensor 'transformer.wte.weight'"):
        models.from_hf(str(d))


def test_deflated_entry_larger_than_its_declared_storage_is_not_inflated(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    _write_bin(path, {"w": _Tensor(_Storage("0", 4), 0, (4,), (1,))},
               {"0": bytes(32 * MiB)}, compress=zipfile.ZIP_DEFLATED)
    assert os.path.getsize(path) < 64 * 1024
    with _bounded(peak=1 * MiB):
        with pytest.raises(nn.CheckpointError, match=r"storage '0' declares 4 elements \(16 bytes\) "
                                                     r"but its zip entry .*data/0 holds 33554432"):
            load_torch_bin(str(path))


@pytest.mark.parametrize("state,entries,message", [
    ({"w": _Tensor(_Storage("0", 4), 0, (10,), (1,))}, {"0": bytes(16)},
     r"tensor 'w': size \(10,\) \(10 elements\), stride \(1,\) at offset 0 does not fit its "
     r"storage '0' of 4 elements \(reaches element 9\)"),
    ({"w": _Tensor(_Storage("0", 4), 2, (2, 2), (2, 1))}, {"0": bytes(16)},
     r"tensor 'w': size \(2, 2\) .* at offset 2 does not fit"),
    ({"w": _Tensor(_Storage("0", 4), 4, (), ())}, {"0": bytes(16)}, r"tensor 'w': .*does not fit"),
    ({"w": _Tensor(_Storage("0", 4), -1, (2,), (1,))}, {"0": bytes(16)},
     r"tensor 'w': .*offset -1.*must be non-negative"),
    ({"w": _Tensor(_Storage("0", 4), 0, (2, 2), (1,))}, {"0": bytes(16)},
     r"tensor 'w': size \(2, 2\) and stride \(1,\) .*differ in length"),
    ({"w": _Tensor(_Storage("0", 4), 0, ("2",), (1,))}, {"0": bytes(16)},
     r"tensor 'w': .*not integers"),
    ({"w": _Tensor(_Storage("0", 8), 0, (4,), (1,))}, {"0": bytes(16)},
     r"storage '0' declares 8 elements \(32 bytes\) but its zip entry .* holds 16"),
    ({"w": _Tensor(_Storage("0", 4), 0, (4,), (1,))}, {}, r"storage '0' .* missing from the archive"),
    ({"w": 3}, {}, r"'w' is a int, not a tensor"),
    ({"a": _Tensor(_Storage("0", 4), 0, (4,), (1,)), "b": _Tensor(_Storage("0", 2), 0, (2,), (1,))},
     {"0": bytes(16)}, r"storage '0' is declared twice"),
])
def test_malformed_pickled_tensors_are_refused_naming_the_tensor(tmp_path, state, entries, message):
    path = tmp_path / "pytorch_model.bin"
    _write_bin(path, state, entries)
    with pytest.raises(nn.CheckpointError, match=message) as e:
        load_torch_bin(str(path))
    assert str(path) in str(e.value)


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_pickle_is_refused_naming_the_file(tmp_path, cut):
    torch.save({"w": torch.zeros(3)}, tmp_path / "ok.bin")
    with zipfile.ZipFile(tmp_path / "ok.bin") as z:
        entries = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(tmp_path / "cut.bin", "w") as z:
        for n, data in entries.items():
            z.writestr(n, data[:int(len(data) * cut)] if n.endswith("data.pkl") else data)
    with pytest.raises(nn.CheckpointError, match=r"(?s)cut.bin.*data.pkl cannot be unpickled"):
        load_torch_bin(str(tmp_path / "cut.bin"))


def test_views_and_shared_storages_load_as_torch_wrote_them(tmp_path):
    a = torch.arange(12.0).reshape(3, 4)
    state = {"a": a, "row": a[1], "cols": a[:, 1:3], "t": a.t(), "ids": torch.arange(6).expand(1, -1),
             "bf16": torch.tensor([1.5, -2.25], dtype=torch.bfloat16), "scalar": a[2, 3],
             "empty": torch.zeros(0, 5)}
    torch.save(state, tmp_path / "x.bin")
    got = load_torch_bin(str(tmp_path / "x.bin"))
    assert got.keys() == state.keys()
    for k, v in state.items():
        np.testing.assert_array_equal(got[k], v.float().numpy() if k == "bf16" else v.numpy())
        assert got[k].shape == tuple(v.shape) and not got[k].flags.writeable
    assert np.shares_memory(got["a"], got["row"])  # one storage, as in torch
