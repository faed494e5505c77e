"""The disk cache of compiled objects: a new process skips the C compiler, and two
processes compiling the same source at once both succeed and leave one complete file."""
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from tinytensor.compiler import cache_disk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# builds a small program through the C backend and prints the kernel's result
SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tinytensor as tt
    from tinytensor.compiler import cache_disk
    from tinytensor.compiler.capture import capture
    from tinytensor.compiler.codegen import c
    from tinytensor.compiler import pipeline
    scale = float(sys.argv[1])
    x = tt.tensor(np.arange(4, dtype=np.float32))
    program, _, _ = capture(lambda x: (x * scale + 1.0).relu(), (x,))
    (out,) = c.build(pipeline.lower(program, "c"))([x.data])
    print(cache_disk.compiles, out.tolist())
""")


@pytest.fixture
def env(tmp_path):
    """A fresh cache directory and a $CC that logs each invocation before running cc."""
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "logging-cc"
    wrapper.write_text(f"#!/bin/sh\necho run >> {log}\nexec {shutil.which('cc')} \"$@\"\n")
    wrapper.chmod(0o755)
    e = dict(os.environ, TINYTENSOR_CACHE_DIR=str(tmp_path / "cache"), CC=str(wrapper),
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return e, log, tmp_path / "cache"


def start(e, scale):
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(scale)], env=e, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(p):
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return out.split(" ", 1)


def test_a_new_process_loads_the_cached_object_without_the_compiler(env):
    e, log, cache = env
    scale = 1.0 + uuid.uuid4().int % 1000 / 7   # a source no earlier run compiled
    count, values = finish(start(e, scale))
    assert count == "1" and log.read_text().count("run") == 1
    count2, values2 = finish(start(e, scale))
    assert count2 == "0" and log.read_text().count("run") == 1   # the compiler did not run
    assert values2 == values
    assert len(list(cache.glob("*.so"))) == 1


def test_two_processes_compiling_at_once_both_succeed(env):
    e, log, cache = env
    scale = 2.0 + uuid.uuid4().int % 1000 / 7
    procs = [start(e, scale), start(e, scale)]
    results = [finish(p) for p in procs]
    assert results[0][1] == results[1][1]
    assert [p.name for p in cache.iterdir()] == [p.name for p in cache.glob("tt_*.so")]  # no temp files
    assert len(list(cache.glob("*.so"))) == 1


def test_the_key_changes_with_the_source_the_flags_and_the_compiler(tmp_path):
    cc = shutil.which("cc")
    other = tmp_path / "cc2"
    other.write_text("#!/bin/sh\n")
    keys = {cache_disk.key("int f;", ["-O2"], cc), cache_disk.key("int g;", ["-O2"], cc),
            cache_disk.key("int f;", ["-O3"], cc), cache_disk.key("int f;", ["-O2"], str(other))}
    assert len(keys) == 4
    assert cache_disk.key("int f;", ["-O2"], cc) == cache_disk.key("int f;", ["-O2"], cc)


def test_a_compile_error_shows_the_compiler_output(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"C compiler failed.*error"):
        cache_disk.load("this is not C;", ["-shared", "-fPIC"])
