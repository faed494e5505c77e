"""The disk cache loads only what this user compiled: a planted object or header is never
run, directories are 0700 whatever the umask, an unsafe directory is replaced by a private
one with a warning, a damaged entry is rebuilt, a killed compile's leftovers are swept, and
an unusable location is an error naming it and $TINYTENSOR_CACHE_DIR."""
import hashlib
import os
import stat
import subprocess
import tempfile
import time
import uuid
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler import cache_disk
from tinytensor.compiler.capture import capture
from tinytensor.compiler.codegen import c, cuda, toolchain
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import fuse

FLAGS = ["-O1", "-fPIC", "-shared"]

# what an attacker plants: an object whose constructor leaves a marker file
PLANTED = """
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("ran", f); fclose(f); }
}
int tt_probe(void) { return -1; }
"""


def probe_source():
    """A source no earlier run compiled, and the value its function returns."""
    n = uuid.uuid4().int % 100000
    return f"int tt_probe(void) {{ return {n}; }}\n", n


def entry_path(directory, source):
    return os.path.join(directory, f"tt_{cache_disk.key(source, FLAGS, cache_disk.find_compiler())}.so")


def compile_planted(tmp_path, marker):
    src = tmp_path / "planted.c"
    src.write_text(PLANTED % marker)
    out = tmp_path / "planted.so"
    subprocess.run([cache_disk.find_compiler(), "-shared", "-fPIC", "-o", str(out), str(src)],
                   check=True)
    return out.read_bytes()


def with_record(body):
    """`body` with a record that matches it, as the attacker can forge one."""
    return body + cache_disk.MAGIC + len(body).to_bytes(8, "little") + hashlib.sha256(body).digest()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """HOME and the temp dir in tmp_path: the fallback directories land there."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.makedirs(tmp_path / "tmp", mode=0o700)
    return tmp_path


@pytest.mark.parametrize("forged", [False, True])
def test_an_object_planted_in_a_world_writable_directory_is_never_loaded(home, monkeypatch, forged):
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(shared))
    source, n = probe_source()
    marker = home / "marker"
    body = compile_planted(home, marker)
    with open(entry_path(str(shared), source), "wb") as f:
        f.write(with_record(body) if forged else body)
    with pytest.warns(RuntimeWarning, match=r"not using the compile cache directory.*group or "
                                            r"others can write to it \(mode 777\).*chmod 700"):
        lib = cache_disk.load(source, FLAGS)
    assert not marker.exists(), "the planted object's constructor ran"
    assert lib.tt_probe() == n
    private = home / "home" / ".cache" / "tinytensor" / "compiler"   # the default, made 0700
    assert os.path.exists(entry_path(str(private), source))
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700


def test_an_object_planted_without_a_valid_record_is_rebuilt_not_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(cache))
    source, n = probe_source()
    marker = tmp_path / "marker"
    body = compile_planted(tmp_path, marker)
    cache_disk.cache_dir()
    with open(entry_path(str(cache), source), "wb") as f:
        f.write(body)
    assert cache_disk.load(source, FLAGS).tt_probe() == n
    assert not marker.exists(), "the planted object's constructor ran"


@pytest.mark.parametrize("mode, parent", [(0o770, 0o700), (0o757, 0o700), (0o700, 0o777)])
def test_a_directory_others_can_write_or_swap_is_replaced_by_a_private_one(home, monkeypatch,
                                                                           mode, parent):
    outer = home / "outer"
    d = outer / "cache"
    d.mkdir(parents=True)
    d.chmod(mode)
    outer.chmod(parent)
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(d))
    with pytest.warns(RuntimeWarning, match=r"not using the compile cache directory"):
        got = cache_disk.cache_dir()
    assert got == str(home / "home" / ".cache" / "tinytensor" / "compiler")
    outer.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_directory_owned_by_another_user_is_not_used(home, monkeypatch):
    d = home / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(d))
    with pytest.warns(RuntimeWarning, match=r"owned by uid 65534, not by this user"):
        assert cache_disk.cache_dir() != str(d)


def test_under_umask_000_every_level_and_entry_is_private(tmp_path, monkeypatch):
    root = tmp_path / "a"
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(root / "b" / "c"))
    source, n = probe_source()
    old = os.umask(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # the directories it made are safe: no fallback
            assert cache_disk.load(source, FLAGS).tt_probe() == n
    finally:
        os.umask(old)
    for p in (root, root / "b", root / "b" / "c"):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p
    (entry,) = (root / "b" / "c").glob("tt_*.so")
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o600


def test_a_header_planted_in_the_cache_directory_is_not_compiled_in(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(cache))
    cache_disk.cache_dir()
    marker = tmp_path / "marker"
    # the real header plus a constructor: it would compile and run under the honest key
    (cache / "tt_math.h").write_text(f'#include "{toolchain.HEADER}"\n' + PLANTED.replace(
        "int tt_probe(void) { return -1; }", "") % marker)
    scale = 1.0 + uuid.uuid4().int % 1000 / 7
    x = tt.tensor(np.arange(4, dtype=np.float32))
    program, _, _ = capture(lambda x: (x * scale + 1.0).relu(), (x,))
    (out,) = c.build(pipeline.lower(program, "c"))([x.data])
    np.testing.assert_array_equal(out, np.maximum(np.arange(4, dtype=np.float32) * np.float32(scale)
                                                  + np.float32(1.0), 0))
    assert not marker.exists(), "the planted header was compiled in"


def _damaged(body, how):
    if how == "truncated":
        return body[:len(body) // 2]
    if how == "garbage":
        return os.urandom(len(body))
    if how == "record of a truncated body":   # the record says a size the body no longer has
        return with_record(body)[:-cache_disk.RECORD - 100] + with_record(body)[-cache_disk.RECORD:]
    flipped = bytearray(with_record(body))   # a bit flipped in a recorded body
    flipped[len(body) // 2] ^= 1
    return bytes(flipped)


@pytest.mark.parametrize("how", ["truncated", "garbage", "record of a truncated body", "flipped bit"])
def test_a_damaged_entry_is_rebuilt(tmp_path, monkeypatch, how):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    other, _ = probe_source()
    donor = cache_disk.load(other, FLAGS)   # a real entry's bytes to damage
    assert donor.tt_probe() >= 0
    d = cache_disk.cache_dir()
    with open(entry_path(d, other), "rb") as f:
        body = f.read()[:-cache_disk.RECORD]
    source, n = probe_source()
    path = entry_path(d, source)
    with open(path, "wb") as f:
        f.write(_damaged(body, how))
    before = cache_disk.compiles
    assert cache_disk.load(source, FLAGS).tt_probe() == n
    assert cache_disk.compiles == before + 1
    assert cache_disk.verified(path)


def test_a_killed_compiles_leftovers_are_swept(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(cache))
    old = time.time() - 2 * cache_disk.STALE
    stale = [cache / "tt_0123.so.tmp", cache / ".tt_abcd.tmp", cache / "tt_0123.c"]
    for p in stale:
        p.write_text("x")
    (cache / "build-dead").mkdir()
    (cache / "build-dead" / "tt_0123.c").write_text("x")
    stale.append(cache / "build-dead")
    (cache / "cuda").mkdir()
    stale.append(cache / "cuda" / "tmpk3j2")   # CuPy's temp file, from a killed compile
    stale[-1].write_text("x")
    for p in stale:
        os.utime(p, (old, old))
    (cache / "build-live").mkdir()   # another process compiling right now
    (cache / "tt_keep.so").write_text("x")
    source, n = probe_source()
    assert cache_disk.load(source, FLAGS).tt_probe() == n
    assert not [p for p in stale if os.path.lexists(p)]
    assert (cache / "build-live").exists() and (cache / "tt_keep.so").exists()


def test_an_unusable_cache_directory_is_an_error_naming_it_and_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(cache_disk.CacheDirError,
                       match=rf"{blocker / 'cache'}.*TINYTENSOR_CACHE_DIR names"):
        cache_disk.load(probe_source()[0], FLAGS)


def test_an_unusable_default_directory_falls_back_with_a_warning(home, monkeypatch):
    blocker = home / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(blocker))
    monkeypatch.delenv("TINYTENSOR_CACHE_DIR", raising=False)
    source, n = probe_source()
    with pytest.warns(RuntimeWarning, match=r"cannot be created.*TINYTENSOR_CACHE_DIR"):
        assert cache_disk.load(source, FLAGS).tt_probe() == n
    fallback = home / "tmp" / f"tinytensor-{os.geteuid()}" / "compiler"
    assert os.path.exists(entry_path(str(fallback), source))


class _FakeCupy:
    """Enough of CuPy for cuda.Runner._prepare: records CUPY_CACHE_DIR as CuPy would read it
    while compiling (RawModule, get_function)."""

    def __init__(self):
        seen = self.seen = []

        class RawModule:
            def __init__(self, code, options):
                seen.append(os.environ.get("CUPY_CACHE_DIR"))

            def get_function(self, name):
                seen.append(os.environ.get("CUPY_CACHE_DIR"))
                return lambda *a: None

        class Device:
            id = 0

            def __init__(self, *a):
                pass

        self.RawModule = RawModule
        self.cuda = type("cuda", (), {"Device": Device})
        self.asarray, self.empty, self.ascontiguousarray = np.asarray, np.empty, np.ascontiguousarray


def _cuda_runner():
    x = tt.tensor(np.arange(4, dtype=np.float32))
    program, _, _ = capture(lambda x: (x * 2.0 + 1.0).relu(), (x,))
    return cuda.build(fuse.run(program))


@pytest.mark.parametrize("theirs", [None, 0o777])
def test_the_cuda_backends_kernel_cache_follows_the_same_rules(tmp_path, monkeypatch, theirs):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(cache))
    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    if theirs is not None:
        shared = tmp_path / "shared-cupy"
        shared.mkdir()
        shared.chmod(theirs)
        monkeypatch.setenv("CUPY_CACHE_DIR", str(shared))
    fake = _FakeCupy()
    runner = _cuda_runner()
    if theirs is None:
        runner._prepare(fake)
    else:
        with pytest.warns(RuntimeWarning, match=r"not using CUPY_CACHE_DIR=.*group or others"):
            runner._prepare(fake)
    mine = str(cache / "cuda")
    assert fake.seen and set(fake.seen) == {mine}
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
    assert os.environ.get("CUPY_CACHE_DIR") == (None if theirs is None else str(shared))


def test_a_safe_cupy_cache_dir_of_the_users_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "mine"))
    fake = _FakeCupy()
    _cuda_runner()._prepare(fake)
    assert set(fake.seen) == {str(tmp_path / "mine")}
    assert stat.S_IMODE(os.stat(tmp_path / "mine").st_mode) == 0o700
