"""Checkpoints keep every integer dtype: tinytensor's uint8 ... uint64 are stored as safetensors
U8 ... U64 and come back with the same dtype and bits, also between tinytensor and torch."""
import json
import struct

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

CODES = {"uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16", "int32": "I32",
         "int64": "I64", "uint32": "U32", "uint64": "U64", "bool": "BOOL"}


def extremes(name):
    dt = tt.dtypes.from_any(name)
    if dt is tt.bool:
        return np.array([True, False, True])
    info = np.iinfo(dt.np)
    return np.array([info.min, 0, 1, info.max], dtype=dt.np)


def header_dtypes(path):
    with open(path, "rb") as f:
        n, = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


@pytest.mark.parametrize("name", CODES)
def test_every_integer_dtype_round_trips_with_its_safetensors_code(tmp_path, name):
    t = tt.tensor(extremes(name))
    p = tmp_path / "ck.safetensors"
    nn.save({"model": {"w": t}, "step": 3}, p)
    assert header_dtypes(p) == {"model.w": CODES[name]}
    back = nn.load(p)
    assert back["step"] == 3 and back["model"]["w"].dtype is t.dtype
    assert back["model"]["w"].tolist() == t.tolist()


def test_a_state_dict_of_mixed_dtypes_round_trips(tmp_path):
    sd = {name: tt.tensor(extremes(name)) for name in CODES}
    sd["f16"] = tt.ones(2, dtype=tt.float16)
    p = tmp_path / "sd.safetensors"
    nn.save(sd, p)
    back = nn.load(p)
    assert {k: v.dtype for k, v in back.items()} == {k: v.dtype for k, v in sd.items()}
    assert all(back[k].tolist() == sd[k].tolist() for k in sd)


def test_files_from_torch_load_with_the_same_dtypes_and_ours_load_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    theirs = {name: torch.from_numpy(extremes(name)) for name in CODES}
    p = tmp_path / "torch.safetensors"
    st.save_file(theirs, str(p))
    back = nn.load(p)  # a plain safetensors file: {name: Tensor}
    for name, t in theirs.items():
        assert back[name].dtype.name == name and back[name].tolist() == t.tolist(), name
    q = tmp_path / "ours.safetensors"
    nn.save({name: tt.tensor(extremes(name)) for name in CODES}, q)
    for name, t in st.load_file(str(q)).items():
        assert str(t.dtype) == f"torch.{name}" and t.tolist() == theirs[name].tolist(), name


def test_u64_past_int64_loads_as_uint64_from_a_file_another_tool_wrote(tmp_path):
    values = [0, 2 ** 63, 2 ** 64 - 1]
    header = json.dumps({"u": {"dtype": "U64", "shape": [3], "data_offsets": [0, 24]}}).encode()
    p = tmp_path / "u64.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + np.array(values, "<u8").tobytes())
    u = nn.load(p)["u"]
    assert u.dtype is tt.uint64 and u.tolist() == values
    assert (u >> 63).tolist() == [0, 1, 1]  # unsigned: a logical shift, no sign fill
