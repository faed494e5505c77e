"""pytorch_model.bin files that attack the unpickler itself (issue 26): nesting that overflows
the C stack, integers too long to print, sizes of 200,000 dimensions, a memo index that
allocates 64 GB. Each is a CheckpointError naming the file, found before anything is
unpickled or multiplied, within a CPU-time bound; every file is loaded in a child process
with CPU and memory limits (tests/limits.py), so a regression fails here naming the case
instead of killing or stalling the test run."""
import struct
import zipfile

import pytest

from tinytensor import nn
from tests.limits import refusals_missed, run_cases

torch = pytest.importorskip("torch")
from tinytensor.nn.pickle_scan import MAX_DEPTH, scan  # noqa: E402
from tinytensor.nn.torch_pickle import load_torch_bin  # noqa: E402

N = 200_000
_REBUILD = b"ctorch._utils\n_rebuild_tensor_v2\n"
_EMPTY_DICT_MARK = b"\x80\x02}(X\x01\x00\x00\x00w"  # {"w": ... (protocol 2)


def _long(n):
    """LONG4: a signed little-endian integer of any length."""
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def _int(n):
    if 0 <= n < 1 << 16:  # BININT1 or BININT2
        return b"K" + bytes([n]) if n < 256 else b"M" + struct.pack("<H", n)
    return _long(n)


def _ints(values):
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def _pid(numel=4):
    return (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000"
            b"X\x03\x00\x00\x00cpu" + _long(numel) + b"t")


def _tensor(offset=0, size=(4,), stride=(1,), numel=4):
    """A {"w": tensor} state dict's pickle with the given storage offset, size, stride."""
    return (_EMPTY_DICT_MARK + _REBUILD + b"(" + _pid(numel) + b"Q" + _long(offset) + _ints(size)
            + _ints(stride) + b"\x89tRu.")


HOSTILE = {  # name -> (data.pkl, a phrase of the refusal)
    # the pickle: a dict key nested 200,000 deep; hashing it overflowed the C stack
    "nested_key": (b"\x80\x02}" + b"(" * N + b")" + b"t" * N + b"K\x01s.", "marks nest more than"),
    # the same without MARKs: TUPLE1 of TUPLE1 of ...
    "nested_tuple1": (b"\x80\x02}" + b")" + b"\x85" * N + b"K\x01s.", "nested more than"),
    # a persistent id nested 200,000 deep: its error message recursed (RecursionError)
    "nested_persistent_id": (_EMPTY_DICT_MARK + b")" + b"\x85" * N + b"Qu.", "nested more than"),
    # > 4,300 digits: the int->str limit broke the error message (ValueError)
    "huge_offset": (_tensor(offset=10 ** 5000), "outside int64"),
    "huge_size": (_tensor(size=(10 ** 5000,)), "outside int64"),
    "huge_numel": (_tensor(numel=10 ** 5000), "outside int64"),
    "size_past_int64": (_tensor(size=(1 << 63,)), "outside int64"),
    # 200,000 dimensions of 65535: math.prod of them burned 20 s of CPU
    "200000_dims": (_tensor(size=(65535,) * N, stride=(1,) * N), "more than the 64 dimensions"),
    "65_dims": (_tensor(size=(1,) * 65, stride=(1,) * 65), "more than the 64 dimensions"),
    # sizes each inside int64 whose product is not: a checked product
    "product_past_int64": (_tensor(size=(1 << 40, 1 << 40), stride=(0, 0)), "more than 2**63 elements"),
    # memo slot 2**32 - 1: the C unpickler would grow its memo table to 64 GB and fill it
    "memo_index_bomb": (b"\x80\x02}r\xff\xff\xff\xff.", "out of sequence"),
    "get_of_nothing": (b"\x80\x02j\x05\x00\x00\x00.", "never stored"),
    "stack_underflow": (b"\x80\x02s.", "pops more than the stack holds"),
    "unknown_opcode": (b"\x80\x02}\xff.", "opcode stream is malformed"),
}


def _write(path, pkl):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/data/0", bytes(16))


def test_hostile_pickles_are_checkpoint_errors_naming_the_file_within_a_cpu_bound(tmp_path):
    paths = {}
    for name, (pkl, _) in HOSTILE.items():
        paths[name] = str(tmp_path / f"{name}.bin")
        _write(paths[name], pkl)
    results = run_cases("from tinytensor.nn.torch_pickle import load_torch_bin",
                        {name: f"load_torch_bin({path!r})" for name, path in paths.items()},
                        cpu_s=60, wall_s=300)
    failures = refusals_missed(results, {name: (paths[name], phrase) for name, (_, phrase) in HOSTILE.items()},
                               cpu_s=5.0)
    assert not failures, "\n".join(failures)


def test_the_scan_passes_what_torch_writes_including_module_metadata(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4),
                              torch.nn.Sequential(torch.nn.Linear(4, 2)))
    state = net.state_dict()  # an OrderedDict with _metadata, set by BUILD
    for protocol in (2, 4):
        path = tmp_path / f"net{protocol}.bin"
        torch.save(state, path, pickle_protocol=protocol)
        got = load_torch_bin(str(path))
        assert got.keys() == state.keys()
        for k, v in state.items():
            assert (got[k] == v.numpy()).all()


def test_nesting_up_to_the_limit_is_read_and_one_more_is_refused():
    def nested(depth):  # a list holding a tuple nested `depth` deep: TUPLE1 depth times
        return b"\x80\x02]K\x01" + b"\x85" * (depth - 2) + b"a."
    assert scan(nested(MAX_DEPTH)) is None
    assert "nested more than" in scan(nested(MAX_DEPTH + 1))


def test_a_damaged_zip_is_a_checkpoint_error_naming_the_file(tmp_path):
    path = tmp_path / "ok.bin"
    torch.save({"w": torch.arange(64.0)}, path)
    raw = bytearray(path.read_bytes())
    start = raw.index(b"data/0") + len(b"data/0")  # the local header's name, then the entry data
    raw[start + 100] ^= 0xFF                         # inside the stored tensor's bytes: a bad CRC
    bad = tmp_path / "bad_crc.bin"
    bad.write_bytes(bytes(raw))
    with pytest.raises(nn.CheckpointError, match="damaged") as e:
        load_torch_bin(str(bad))
    assert str(bad) in str(e.value)
    legacy = tmp_path / "legacy.bin"
    legacy.write_bytes(b"\x80\x02\x8a\x0alegacy torch.save" + bytes(64))
    with pytest.raises(nn.CheckpointError, match="not a zip-format torch checkpoint") as e:
        load_torch_bin(str(legacy))
    assert str(legacy) in str(e.value)
