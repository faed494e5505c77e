"""Checkpoints: safetensors files written and read with NumPy; atomic saves; resume gives
the bit-identical next step; broken files and mismatched states give clear errors."""
import json
import os
import struct

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import checkpoint, optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8, padding_idx=0)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU()) for _ in range(2)])
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 11, bias=False)
        self.register_buffer("scale", tt.tensor(2.0))

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = x + b(x)
        return self.head(self.norm(x)) * self.scale


def _batch(t):
    rng = np.random.default_rng(t)
    return tt.tensor(rng.integers(0, 11, (3, 5))), tt.tensor(rng.integers(0, 11, (3, 5)))


def _train_step(model, opt, t):
    x, y = _batch(t)
    logits = model(x)
    loss = nn.CrossEntropyLoss()(logits.reshape(-1, 11), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss)


def _setup(seed=0):
    tt.manual_seed(seed)
    model = Net()
    decay = [p for n, p in model.named_parameters() if p.ndim == 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2)
    return model, opt


def test_resume_gives_bit_identical_next_steps(tmp_path):
    model, opt = _setup(0)
    for t in range(4):
        _train_step(model, opt, t)
    path = tmp_path / "ckpt.safetensors"
    nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 4,
             "config": {"d_model": 8, "vocab": 11, "name": "net", "dropout": 0.0, "tags": ["a", "b"]}},
            path)
    ck = nn.load(path)
    assert ck["step"] == 4 and ck["config"]["tags"] == ["a", "b"] and ck["config"]["dropout"] == 0.0
    model2, opt2 = _setup(1)  # different initial weights, replaced by the checkpoint
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    for t in range(4, 7):
        assert _train_step(model, opt, t) == _train_step(model2, opt2, t)
    for (n, a), (_, b) in zip(model.state_dict().items(), model2.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=n)


def test_round_trip_types_and_values(tmp_path):
    obj = {
        "f64": tt.tensor(np.arange(6.0).reshape(2, 3)),
        "f32": tt.tensor([1.5, -2.0]),
        "f16": tt.tensor([0.5, 3.0], dtype=tt.float16),
        "i64": tt.tensor([1, 2, 3]),
        "i32": tt.tensor([[7]], dtype=tt.int32),
        "bool": tt.tensor([True, False]),
        "scalar": tt.tensor(3.25),
        "empty": tt.zeros(0, 4),
        "np": np.arange(5, dtype=np.uint8),
        "int_keys": {0: tt.ones(2), 7: {"x": None}},
        "tuple": (1, 2.5, "three", None, True),
        "nested": [{"a": tt.zeros(1)}, [tt.ones(1), 4]],
        "tricky": {"__tensor__": "not a tensor"},
        "float": float("inf"),
    }
    p = tmp_path / "x.safetensors"
    nn.save(obj, p)
    back = nn.load(p)
    assert list(back) == list(obj)
    for k in ("f64", "f32", "f16", "i64", "i32", "bool", "scalar", "empty"):
        assert isinstance(back[k], tt.Tensor) and back[k].dtype == obj[k].dtype, k
        np.testing.assert_array_equal(back[k].numpy(), obj[k].numpy())
    assert isinstance(back["np"], np.ndarray) and back["np"].dtype == np.uint8
    np.testing.assert_array_equal(back["np"], obj["np"])
    assert list(back["int_keys"]) == [0, 7] and back["int_keys"][7] == {"x": None}
    assert back["tuple"] == obj["tuple"] and isinstance(back["tuple"], tuple)
    assert back["nested"][1][1] == 4 and back["tricky"] == {"__tensor__": "not a tensor"}
    assert back["float"] == float("inf")
    back["f64"].data[0, 0] = 100.0  # loaded tensors are writable


def test_file_is_plain_safetensors(tmp_path):
    model, _ = _setup(0)
    p = tmp_path / "model.safetensors"
    nn.save(model.state_dict(), p)
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"]["format"] == "pt"
    names = [k for k in header if k != "__metadata__"]
    assert sorted(names) == sorted(model.state_dict())
    w = header["head.weight"]
    assert w["dtype"] == "F32" and w["shape"] == [11, 8]
    b, e = w["data_offsets"]
    arr = np.frombuffer(raw[8 + n + b: 8 + n + e], dtype="<f4").reshape(11, 8)
    np.testing.assert_array_equal(arr, model.head.weight.detach().numpy())


def test_readable_by_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open
    model, opt = _setup(0)
    _train_step(model, opt, 0)
    p = tmp_path / "ck.safetensors"
    nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}, p)
    loaded = st.load_file(str(p))
    np.testing.assert_array_equal(loaded["model.head.weight"], model.head.weight.detach().numpy())
    assert "optimizer.state.0.exp_avg" in loaded
    with safe_open(str(p), framework="numpy") as f:
        assert "tinytensor" in f.metadata()
    # and the other way: a file written by safetensors loads here, bf16 widened to float32
    st.save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], np.int64)},
                 str(tmp_path / "theirs.safetensors"))
    back = nn.load(tmp_path / "theirs.safetensors")
    assert list(back) == ["b", "a"] or list(back) == ["a", "b"]
    np.testing.assert_array_equal(back["a"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_foreign_file_with_bf16_loads_as_float32_without_ml_dtypes(tmp_path, monkeypatch):
    # with ml_dtypes BF16 loads as bfloat16 (tests/nn/test_checkpoint_bf16.py); this is the
    # fallback without it
    monkeypatch.setattr(checkpoint, "BF16_NP", None)
    monkeypatch.delitem(checkpoint._CODES, "BF16")
    vals = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    bf16 = (vals.view(np.uint32) >> 16).astype("<u2")  # these values are exact in bfloat16
    header = json.dumps({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}).encode()
    p = tmp_path / "bf16.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + bf16.tobytes())
    back = nn.load(p)
    assert back["w"].dtype == tt.float32
    np.testing.assert_array_equal(back["w"].numpy(), vals)


def _tmp_files(d):
    return [f for f in os.listdir(d) if f.endswith(".tmp")]


@pytest.mark.parametrize("where", ["replace", "write", "fsync"])
def test_crash_mid_save_keeps_old_checkpoint(tmp_path, monkeypatch, where):
    p = tmp_path / "ck.safetensors"
    nn.save({"w": tt.ones(4), "step": 1}, p)
    before = p.read_bytes()

    def boom(*a, **k):
        raise OSError("simulated crash")
    if where == "replace":
        monkeypatch.setattr(checkpoint.os, "replace", boom)
    elif where == "write":
        calls = []

        def write_some(f, arr):  # the first tensor is written, then the disk "fails"
            if calls:
                boom()
            calls.append(1)
            f.write(arr.tobytes())
        monkeypatch.setattr(checkpoint, "_write_array", write_some)
    else:
        monkeypatch.setattr(checkpoint.os, "fsync", boom)
    with pytest.raises(OSError, match="simulated crash"):
        nn.save({"w": tt.zeros(4), "v": tt.zeros(100), "step": 2}, p)
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert nn.load(p)["step"] == 1
    assert _tmp_files(tmp_path) == [] and os.listdir(tmp_path) == ["ck.safetensors"]


def test_interrupt_mid_save_also_cleans_up(tmp_path, monkeypatch):
    p = tmp_path / "ck.safetensors"

    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint, "_write_array", interrupt)
    with pytest.raises(KeyboardInterrupt):
        nn.save({"w": tt.ones(3)}, p)
    assert os.listdir(tmp_path) == []


def test_overwrite_replaces(tmp_path):
    p = tmp_path / "ck.safetensors"
    nn.save({"step": 1, "w": tt.ones(2)}, p)
    nn.save({"step": 2, "w": tt.zeros(3)}, p)
    back = nn.load(p)
    assert back["step"] == 2 and back["w"].shape == (3,)
    assert os.listdir(tmp_path) == ["ck.safetensors"]


def _valid_bytes(tmp_path):
    p = tmp_path / "good.safetensors"
    nn.save({"a": tt.ones(4, 4), "b": tt.zeros(3, dtype=tt.int64), "step": 3}, p)
    return p.read_bytes()


def _with_header(raw, edit):
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    edit(header)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + raw[8 + n:]


def _corrupt_two(h):
    h["a"]["dtype"] = "F7"
    h["b"]["shape"] = [5]


def _overlap(h):
    h["a"]["data_offsets"] = [0, 64]
    h["b"]["data_offsets"] = [32, 56]


BROKEN = [
    ("empty", lambda raw: b"", ["fewer than the 8-byte"]),
    ("truncated", lambda raw: raw[:-10], ["outside", "truncated"]),
    ("truncated header", lambda raw: raw[:40], ["header length"]),
    ("garbage", lambda raw: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, ["header length"]),
    ("not json", lambda raw: struct.pack("<Q", 6) + b"{nope}", ["not valid JSON"]),
    ("not utf8", lambda raw: struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc", ["not UTF-8"]),
    ("json list", lambda raw: struct.pack("<Q", 2) + b"[]", ["not an object"]),
    ("two bad entries", lambda raw: _with_header(raw, _corrupt_two), ["unknown dtype 'F7'", "need 40", "2 problems"]),
    ("overlap", lambda raw: _with_header(raw, _overlap), ["overlap"]),
    ("trailing bytes", lambda raw: raw + b"junk", ["4 bytes after"]),
    ("dangling ref", lambda raw: _with_header(raw, lambda h: h.pop("b") and h["a"].update(data_offsets=[0, 64])),
     ["refers to tensor 'b'"]),
]


@pytest.mark.parametrize("name,make,phrases", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_files_give_clear_errors(tmp_path, name, make, phrases):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(make(_valid_bytes(tmp_path)))
    assert_load_refuses(bad, phrases)


def assert_load_refuses(path, phrases):
    """nn.load(path) raises CheckpointError naming the file and saying every one of phrases."""
    with pytest.raises(nn.CheckpointError) as e:
        nn.load(path)
    msg = str(e.value)
    for phrase in [str(path), *phrases]:
        assert phrase in msg, msg


def test_missing_file_or_directory_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        nn.load(tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError, match="no_dir.*does not exist"):
        nn.save({"a": tt.ones(1)}, tmp_path / "no_dir" / "x.safetensors")


def test_mismatched_model_state_lists_every_problem(tmp_path):
    model, _ = _setup(0)
    sd = dict(model.state_dict())
    sd["head.weight"] = tt.zeros(5, 8)
    sd["norm.bias"] = tt.zeros(3)
    del sd["emb.weight"]
    sd["extra.weight"] = tt.zeros(2)
    p = tmp_path / "m.safetensors"
    nn.save(sd, p)
    with pytest.raises(RuntimeError) as e:
        Net().load_state_dict(nn.load(p))
    msg = str(e.value)
    for part in ["head.weight", "(11, 8)", "(5, 8)", "norm.bias", "missing: emb.weight",
                 "unexpected: extra.weight"]:
        assert part in msg, msg


def test_mismatched_optimizer_state_lists_every_problem(tmp_path):
    model, opt = _setup(0)
    _train_step(model, opt, 0)
    p = tmp_path / "o.safetensors"
    nn.save(opt.state_dict(), p)
    other = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 8))
    with pytest.raises(ValueError) as e:
        optim.AdamW(other.parameters()).load_state_dict(nn.load(p))
    assert "2 parameter group(s), this optimizer has 1" in str(e.value)
    # same grouping and counts, wrong shapes: every mis-shaped state entry is named
    m2 = Net()
    m2.head = nn.Linear(8, 12, bias=False)
    m2.norm = nn.LayerNorm(9)
    decay = [q for q in m2.parameters() if q.ndim == 2]
    no_decay = [q for q in m2.parameters() if q.ndim < 2]
    opt2 = optim.AdamW([{"params": decay}, {"params": no_decay}])
    with pytest.raises(ValueError) as e:
        opt2.load_state_dict(nn.load(p))
    msg = str(e.value)
    assert "(12, 8)" in msg and "(9,)" in msg and msg.count("exp_avg_sq") >= 3


@pytest.mark.parametrize("obj,match", [
    ({"cfg": object()}, "cannot store a object at 'cfg'"),
    ({"a": {(1, 2): 3}}, "dict key"),
    ({"x": np.zeros(2, dtype="datetime64[s]")}, "datetime64"),  # complex64 is C64 now (issue 23)
])
def test_unsupported_values_are_rejected_before_writing(tmp_path, obj, match):
    p = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=match):
        nn.save(obj, p)
    assert os.listdir(tmp_path) == []


def test_load_to_device_argument(tmp_path):
    p = tmp_path / "x.safetensors"
    nn.save({"a": tt.ones(2)}, p)
    assert nn.load(p, device="cpu")["a"].device == tt.device("cpu")


@pytest.mark.gpu
def test_cuda_tensors_save_and_load(tmp_path):
    p = tmp_path / "x.safetensors"
    a = tt.arange(6.0, device="cuda").reshape(2, 3)
    nn.save({"a": a}, p)
    back = nn.load(p, device="cuda")
    assert back["a"].device.type == "cuda"
    np.testing.assert_array_equal(back["a"].cpu().numpy(), a.cpu().numpy())
