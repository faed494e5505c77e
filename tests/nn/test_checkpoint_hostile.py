"""Checkpoints under hostile conditions: saves killed mid-write leave temp files that the next
save of the same target sweeps (never a live writer's), and every malformed file, however
broken its header or stored structure, raises CheckpointError naming the file."""
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import checkpoint
from tests.nn.test_checkpoint import assert_load_refuses

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="temp-file sweeping needs fcntl.flock")


def _tmp_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".tmp"))


def _child(code):
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=ROOT))


def _stop(proc):
    """Kill `proc` if it still runs; its stderr."""
    if proc.poll() is None:
        proc.kill()
    return proc.communicate(timeout=10)[1].decode()


def _wait_for(cond, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"the child exited with {proc.returncode}: {proc.stderr.read().decode()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s")
        time.sleep(0.001)


# --------------------------------------------------------------------------- sweeping
@posix_only
def test_a_killed_save_leaves_a_temp_file_that_the_next_save_sweeps(tmp_path):
    p = tmp_path / "ck.safetensors"
    nn.save({"step": 1, "w": tt.ones(3)}, p)
    child = _child(f"import numpy as np\nfrom tinytensor import nn\n"
                   f"nn.save({{'step': 2, 'w': np.ones(16 << 20, np.float32)}}, {str(p)!r})")  # 64 MB
    try:
        _wait_for(lambda: _tmp_files(tmp_path), child)
        child.send_signal(signal.SIGKILL)
    finally:
        _stop(child)
    assert child.returncode == -signal.SIGKILL
    left = _tmp_files(tmp_path)
    assert len(left) == 1, left  # the kill landed mid-write: a stale temp file ...
    assert nn.load(p)["step"] == 1  # ... and the old checkpoint intact
    nn.save({"step": 3, "w": tt.zeros(2)}, p)
    assert os.listdir(tmp_path) == ["ck.safetensors"]  # the next save swept it
    assert nn.load(p)["step"] == 3


@posix_only
def test_a_live_writers_temp_file_is_not_swept(tmp_path):
    p = tmp_path / "ck.safetensors"
    # the child writes its first tensor, then holds the save open until told to go on
    child = _child(f"""
import sys, numpy as np
from tinytensor import nn
from tinytensor.nn import checkpoint
write = checkpoint._write_array
def paused(f, arr):
    write(f, arr)
    print("writing", flush=True)
    sys.stdin.readline()
checkpoint._write_array = paused
nn.save({{'step': 2, 'w': np.ones(4, np.float32)}}, {str(p)!r})
""")
    try:
        ready, _, _ = select.select([child.stdout], [], [], 10)
        if not (ready and child.stdout.readline() == b"writing\n"):
            pytest.fail(f"the child did not start writing: {_stop(child)}")
        theirs = _tmp_files(tmp_path)
        assert len(theirs) == 1
        nn.save({"step": 1}, p)  # a save of the same target while the child is mid-write
        assert _tmp_files(tmp_path) == theirs
        child.stdin.write(b"go\n")
        child.stdin.flush()
        assert child.wait(timeout=10) == 0, child.stderr.read().decode()
    finally:
        _stop(child)
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    assert nn.load(p)["step"] == 2  # the child's save completed, after ours


@posix_only
def test_the_sweep_goes_by_the_lock_not_the_pid_and_only_for_this_target(tmp_path):
    import fcntl
    p = tmp_path / "ck.safetensors"
    # a writer that died, though the pid in the name is alive (pids get reused): stale
    stale = tmp_path / f".ck.safetensors.{os.getpid()}.{'0' * 12}.tmp"
    stale.write_bytes(b"half a checkpoint")
    # a writer holding its lock, whatever the pid in the name says: live
    live = tmp_path / f".ck.safetensors.4.{'1' * 12}.tmp"
    live.write_bytes(b"being written")
    others = [f".ck.safetensors.1.5.{'2' * 12}.tmp",  # a temp file of the target ck.safetensors.1
              f".other.safetensors.5.{'3' * 12}.tmp", "ck.safetensors.tmp",
              f".ck.safetensors.{'4' * 12}.tmp"]  # named before writers locked: live or not, who knows
    for name in others:
        (tmp_path / name).write_bytes(b"not ours")
    with open(live, "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # another open file: conflicts even within this process
        nn.save({"w": tt.ones(2)}, p)
        assert live.exists() and not stale.exists()
    assert sorted(os.listdir(tmp_path)) == sorted(others + [live.name, p.name])


@posix_only
def test_a_sweep_between_creating_and_locking_the_temp_file_does_not_break_the_save(tmp_path, monkeypatch):
    p = tmp_path / "ck.safetensors"
    real, calls = checkpoint.fcntl, []

    def flock(fd, op):
        calls.append(op)
        if len(calls) == 1:  # another process sweeps in the instant before the writer's lock
            checkpoint._sweep(str(tmp_path), p.name)
        return real.flock(fd, op)
    monkeypatch.setattr(checkpoint, "fcntl", types.SimpleNamespace(
        flock=flock, LOCK_EX=real.LOCK_EX, LOCK_NB=real.LOCK_NB))
    nn.save({"step": 5, "w": tt.ones(2)}, p)
    monkeypatch.undo()
    # the writer's lock, the sweep's (which won and deleted the file), the writer's on a new file
    assert calls == [real.LOCK_EX, real.LOCK_EX | real.LOCK_NB, real.LOCK_EX]
    assert os.listdir(tmp_path) == ["ck.safetensors"] and nn.load(p)["step"] == 5


@posix_only
def test_a_sweep_just_before_the_rename_does_not_break_the_save(tmp_path, monkeypatch):
    p = tmp_path / "ck.safetensors"
    real = os.replace

    def replace(src, dst):
        checkpoint._sweep(str(tmp_path), p.name)
        return real(src, dst)
    monkeypatch.setattr(checkpoint.os, "replace", replace)
    nn.save({"step": 6}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ck.safetensors"] and nn.load(p)["step"] == 6


# --------------------------------------------------------------------------- malformed files
DEEP = 100_000
A = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def _a(**change):
    return {"a": dict(A, **change)}


def _tree(tree):
    return {"__metadata__": {"tinytensor": json.dumps(tree)}, "a": A}


MALFORMED = [  # (id, header as a dict or raw JSON text, data bytes, phrases in the message)
    ("deep header", "[" * DEEP + "]" * DEEP, b"", ["nests 100000 levels deep", "at most 127"]),
    ("deep field", '{"a": {"dtype": "F32", "shape": %s, "data_offsets": [0, 8]}}'
     % ("[" * DEEP + "]" * DEEP), bytes(8), ["nests 100002 levels deep"]),
    ("deep tree", {"__metadata__": {"tinytensor": "[" * DEEP + "]" * DEEP}}, b"",
     ["__metadata__['tinytensor']", "nests 100000 levels deep"]),
    ("escaped quotes", '{"a": "' + '\\"[' * DEEP, b"", ["not valid JSON"]),  # one pass, not quadratic
    ("dtype list", _a(dtype=["F32"]), bytes(8), ["tensor 'a'", "unknown dtype ['F32']", "F32"]),
    ("dtype int", _a(dtype=7), bytes(8), ["tensor 'a'", "unknown dtype 7"]),
    ("dtype missing", {"a": {"shape": [2], "data_offsets": [0, 8]}}, bytes(8), ["tensor 'a'", "dtype None"]),
    ("shape string", _a(shape="2"), bytes(8), ["tensor 'a'", "shape '2'"]),
    ("shape float", _a(shape=[2.0]), bytes(8), ["tensor 'a'", "shape [2.0]"]),
    ("shape bool", _a(shape=[True, 2]), bytes(8), ["shape [True, 2]"]),
    ("shape negative", _a(shape=[-2]), bytes(8), ["shape [-2]"]),
    ("shape nested", _a(shape=[[2]]), bytes(8), ["shape [[2]]"]),
    ("too many dims", _a(shape=[1] * 65, data_offsets=[0, 4]), bytes(4), ["tensor 'a'", "65"]),
    ("huge empty", _a(shape=[0, 2 ** 70], data_offsets=[0, 0]), b"", ["tensor 'a'", str(2 ** 70)]),
    ("offsets reversed", _a(data_offsets=[8, 0]), bytes(8), ["tensor 'a'", "[8, 0]", "order"]),
    ("offsets triple", _a(data_offsets=[0, 4, 8]), bytes(8), ["data_offsets [0, 4, 8]"]),
    ("offsets strings", _a(data_offsets=["0", "8"]), bytes(8), ["data_offsets ['0', '8']"]),
    ("offsets negative", _a(data_offsets=[-8, 0]), bytes(8), ["[-8, 0]", "outside"]),
    ("offsets huge", _a(data_offsets=[0, 2 ** 80]), bytes(8), ["outside the 8 data bytes"]),
    ("entry list", {"a": [1, 2]}, b"", ["tensor 'a'", "list, not an object"]),
    ("gap", {"a": A, "b": dict(A, data_offsets=[12, 20])}, bytes(20), ["tensor 'b'", "gap of 4 bytes"]),
    ("metadata values", {"__metadata__": {"format": 1}}, b"", ["__metadata__", "strings to strings"]),
    ("metadata list", {"__metadata__": ["x"]}, b"", ["__metadata__"]),
    ("tree not json", {"__metadata__": {"tinytensor": "{nope"}}, b"", ["__metadata__['tinytensor']", "JSON"]),
    ("ref list", _tree({"x": {"__tensor__": ["a"]}}), bytes(8), ["at 'x'", "['a']", "tensor name"]),
    ("ref number", _tree([{"__ndarray__": 3}]), bytes(8), ["at '0'", "__ndarray__"]),
    ("ref missing", _tree({"x": {"y": {"__tensor__": "b"}}}), bytes(8), ["at 'x.y'", "refers to tensor 'b'"]),
    ("tuple not list", _tree({"t": {"__tuple__": 3}}), bytes(8), ["at 't'", "__tuple__", "list"]),
    ("tuple of dict", _tree({"t": {"__tuple__": {"k": 1}}}), bytes(8), ["at 't'", "__tuple__"]),
    ("dict not list", _tree({"d": {"__dict__": 3}}), bytes(8), ["at 'd'", "__dict__"]),
    ("dict item int", _tree({"d": {"__dict__": [1]}}), bytes(8), ["at 'd'", "[key, value]"]),
    ("dict item triple", _tree({"d": {"__dict__": [[1, 2, 3]]}}), bytes(8), ["at 'd'", "[1, 2, 3]"]),
    ("dict key list", _tree({"d": {"__dict__": [[["k"], 2]]}}), bytes(8), ["at 'd'", "key ['k']"]),
    ("bad ref in dict value", _tree({"d": {"__dict__": [[7, {"__tensor__": None}]]}}), bytes(8),
     ["at 'd.7'", "None"]),
]


@pytest.mark.parametrize("name,header,data,phrases", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_raise_checkpoint_error_naming_the_file(tmp_path, name, header, data, phrases):
    raw = (header if isinstance(header, str) else json.dumps(header)).encode()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    assert_load_refuses(bad, phrases)


# --------------------------------------------------------------------------- uint64
def _u64_file(tmp_path, values):
    header = json.dumps({"u": {"dtype": "U64", "shape": [len(values)],
                               "data_offsets": [0, 8 * len(values)]}}).encode()
    p = tmp_path / "u64.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + np.array(values, "<u8").tobytes())
    return p


def test_u64_tensors_load_exactly_as_uint64(tmp_path):
    # before tinytensor had uint64 these loaded as int64, and values past 2**63 - 1 were refused
    values = [0, 7, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
    back = nn.load(_u64_file(tmp_path, values))["u"]
    assert back.dtype == tt.uint64
    assert [int(v) for v in back.numpy()] == values


def test_u64_numpy_arrays_round_trip_unchanged(tmp_path):
    a = np.array([0, 2 ** 63, 2 ** 64 - 1], np.uint64)
    p = tmp_path / "a.safetensors"
    nn.save({"a": a}, p)
    back = nn.load(p)["a"]
    assert isinstance(back, np.ndarray) and back.dtype == np.uint64
    np.testing.assert_array_equal(back, a)


# --------------------------------------------------------------------------- nesting
def _nested(depth):
    obj = tt.ones(1)
    for _ in range(depth):
        obj = [obj]
    return obj


def test_the_deepest_structure_save_writes_loads_back(tmp_path):
    p = tmp_path / "deep.safetensors"
    nn.save({"x": _nested(125)}, p)  # 127 JSON levels with the top dict and the tensor reference
    x = nn.load(p)["x"]
    for _ in range(125):
        x = x[0]
    assert isinstance(x, tt.Tensor) and float(x) == 1.0


@pytest.mark.parametrize("depth", [126, 5000])
def test_save_refuses_a_structure_load_would_refuse(tmp_path, depth):
    p = tmp_path / "deep.safetensors"
    with pytest.raises(ValueError, match="nn.save: .*nested more than 127 levels"):
        nn.save({"x": _nested(depth)}, p)
    assert os.listdir(tmp_path) == []
