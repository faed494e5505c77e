"""safetensors headers whose shapes attack the loader's arithmetic (issue 26): a shape of
1,000 dimensions of 65535 made an error message past the int->str limit (ValueError), one
of 200,000 dimensions burned ~20 s of CPU in math.prod before that. Each is a
CheckpointError naming the file, found before multiplying anything; the files are loaded in
a child process with CPU and memory limits (tests/limits.py)."""
import json
import struct

import numpy as np
import pytest

from tinytensor import nn
from tests.limits import refusals_missed, run_cases


def _file(path, shape, offsets=(0, 4), dtype="F32", data=bytes(4)):
    header = json.dumps({"w": {"dtype": dtype, "shape": shape, "data_offsets": list(offsets)}})
    header = header.encode() + b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return str(path)


HOSTILE = {  # name -> (shape, data_offsets, a phrase of the refusal)
    "1000_dims_of_65535": ([65535] * 1000, (0, 4), "shape has 1000 dimensions, more than the 64"),
    "200000_dims_of_65535": ([65535] * 200_000, (0, 4), "shape has 200000 dimensions"),
    "65_dims": ([1] * 65, (0, 4), "shape has 65 dimensions"),
    "size_past_int64": ([1 << 63], (0, 4), "not a list of non-negative int64 integers"),
    "size_of_4000_digits": ([10 ** 4000], (0, 4), "[<an integer of 13288 bits>]"),
    "bytes_past_int64": ([1 << 40, 1 << 40], (0, 4), "holds more than 2**63 bytes"),
    "offset_of_4000_digits": ([1], (0, 10 ** 4000), "data_offsets [0, <an integer of 13288 bits>]"),
}


def test_hostile_shapes_are_checkpoint_errors_naming_the_file_within_a_cpu_bound(tmp_path):
    paths = {name: _file(tmp_path / f"{name}.safetensors", shape, offsets)
             for name, (shape, offsets, _) in HOSTILE.items()}
    results = run_cases("from tinytensor import nn", {name: f"nn.load({path!r})" for name, path in paths.items()},
                        cpu_s=60, wall_s=300)
    failures = refusals_missed(results, {name: (paths[name], phrase) for name, (_, _, phrase) in HOSTILE.items()},
                               cpu_s=2.0)
    assert not failures, "\n".join(failures)


def test_a_shape_of_64_dimensions_still_loads(tmp_path):
    if np.lib.NumpyVersion(np.__version__) < "2.0.0":
        pytest.skip("NumPy < 2 has at most 32 dimensions")
    got = nn.load(_file(tmp_path / "ok.safetensors", [1] * 63 + [2], (0, 8), data=bytes(8)))
    assert tuple(got["w"].shape) == (1,) * 63 + (2,)


def test_a_lone_surrogate_outside_a_string_of_the_stored_structure_is_a_checkpoint_error(tmp_path):
    # found by tests/fuzz: the header's JSON escape "\udcff" can put a lone surrogate into
    # the stored structure's text, which the depth count encoded as strict UTF-8
    # (UnicodeEncodeError) unless it sat inside a string
    for tree, ok in [('{"name": "\udcff"}', True), ('{"name": \udcff}', False)]:
        header = json.dumps({"__metadata__": {"format": "tinytensor", "tinytensor": tree}}).encode()
        header += b" " * (-len(header) % 8)
        path = tmp_path / "s.safetensors"
        path.write_bytes(struct.pack("<Q", len(header)) + header)
        if ok:
            assert nn.load(path) == {"name": "\udcff"}
        else:
            with pytest.raises(nn.CheckpointError, match="(?s)s.safetensors.*is not valid JSON"):
                nn.load(path)
