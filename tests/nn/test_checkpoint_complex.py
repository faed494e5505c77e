"""nn.save / nn.load of complex tensors (issue 23): complex64 as safetensors' C64, complex128
as its float64 (..., 2) view with a tree marker; a hostile marker is refused."""
import json
import struct

import numpy as np

from tinytensor import nn
import tinytensor as tt
from tests.nn.test_checkpoint import assert_load_refuses


def test_round_trip_keeps_dtype_and_bits(tmp_path):
    z64 = tt.tensor([[1 + 2j, -3.5j], [0, 1e-30 + 7j]], dtype=tt.complex64)
    z128 = tt.tensor([np.pi + 1j / 3, -0.0 - 2j, complex("nan") + 1j], dtype=tt.complex128)
    arr = np.array([1 - 1j, 2j])
    obj = {"a": z64, "b": [z128, (arr, tt.tensor(2.5 + 1j, dtype=tt.complex128))]}
    nn.save(obj, tmp_path / "c.safetensors")
    back = nn.load(tmp_path / "c.safetensors")
    assert back["a"].dtype is tt.complex64 and back["b"][0].dtype is tt.complex128
    assert back["a"].numpy().tobytes() == z64.numpy().tobytes()
    assert back["b"][0].numpy().tobytes() == z128.numpy().tobytes()
    assert isinstance(back["b"][1][0], np.ndarray) and back["b"][1][0].tolist() == arr.tolist()
    assert back["b"][1][1].shape == () and back["b"][1][1].item() == 2.5 + 1j


def test_c64_from_other_writers_loads(tmp_path):
    from safetensors.numpy import save_file
    z = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(2, 3)
    save_file({"w": z}, str(tmp_path / "o.safetensors"))
    back = nn.load(tmp_path / "o.safetensors")["w"]
    assert back.dtype is tt.complex64 and back.numpy().tolist() == z.tolist()


def _rewrite_tree(path, tree):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["__metadata__"]["tinytensor"] = json.dumps(tree)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def test_complex128_marker_on_a_wrong_tensor_is_refused(tmp_path):
    p = tmp_path / "h.safetensors"
    nn.save({"x": tt.ones(3, dtype=tt.float32), "y": tt.ones(3, 3, dtype=tt.float64)}, p)
    _rewrite_tree(p, {"x": {"__complex128__": "x"}, "y": {"__complex128_ndarray__": "y"}})
    assert_load_refuses(p, ["__complex128__ tensor 'x' is not a float64 (..., 2) array",
                            "__complex128_ndarray__ tensor 'y' is not a float64 (..., 2) array"])
