"""Plain `tt.compile` runs the fastest backend that works: the generated C where a C
compiler is found, CUDA for GPU tensors, else the interpreter with one warning naming the
compiler to install; a program C fails to build runs on the interpreter with a warning."""
import types
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler import cache_disk, choose
from tinytensor.compiler.codegen import runner as c_runner
from tinytensor.core.tensor import Tensor
from tinytensor.device import Device


def chain(x):
    return ((x * 1.5 + 0.5) * x - 0.25).relu()


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(choose, "_warned", set())


def test_plain_compile_runs_the_generated_c_where_a_compiler_is_found():
    fast = tt.compile(chain)
    assert fast.backend is None   # not chosen before the first call
    a, b = tt.randn(1000), tt.randn(1000)
    before = cache_disk.compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fast(a).data.tobytes() == chain(a).data.tobytes()
        assert fast(b).data.tobytes() == chain(b).data.tobytes()   # a replay, on C kernels
    assert fast.backend == "c"
    assert isinstance(fast._entries()[0].runner, c_runner.Runner)
    assert cache_disk.compiles == before + 1


def test_decorator_forms_and_threads_take_the_default():
    @tt.compile(threads=2)
    def step(x):
        return chain(x)
    x = tt.randn(64)
    step(x)
    assert step.backend == "c"
    assert tt.compile(dynamic=True)(chain)(x).data.tobytes() == chain(x).data.tobytes()


def test_without_a_c_compiler_it_is_the_interpreter_and_one_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))   # no cc there
    monkeypatch.delenv("CC", raising=False)
    x = tt.randn(50)
    with pytest.warns(RuntimeWarning, match=r"no C compiler.*apt-get install gcc.*\$CC") as got:
        f = tt.compile(chain)
        assert f(x).data.tobytes() == chain(x).data.tobytes()
    assert [w.filename for w in got] == [__file__]   # points at the user's call
    assert f.backend == "numpy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # once per process: a second function says nothing
        g = tt.compile(lambda x: x * 2.0 + 1.0)
        g(x), g(x)
        f(tt.randn(7))
    assert g.backend == "numpy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tt.compile(chain, backend="numpy")(x)   # asked for: no warning either


def test_a_program_c_cannot_build_runs_on_the_interpreter_with_a_warning(tmp_path, monkeypatch):
    bad = tmp_path / "broken-cc"
    bad.write_text("#!/bin/sh\necho 'internal compiler error' >&2\nexit 1\n")
    bad.chmod(0o755)
    monkeypatch.setenv("CC", str(bad))
    x = tt.randn(30)
    fast = tt.compile(chain)
    with pytest.warns(RuntimeWarning, match=r"(?s)'c' backend could not build chain's program.*"
                                            r"internal compiler error"):
        assert fast(x).data.tobytes() == chain(x).data.tobytes()
    assert fast.backend == "numpy"
    y = tt.randn(30)
    assert fast(y).data.tobytes() == chain(y).data.tobytes()
    with pytest.raises(cache_disk.CompileError, match="internal compiler error"):
        tt.compile(chain, backend="c")(x)   # asked for by name: raised


def test_an_unusable_cache_directory_is_raised_not_hidden(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.raises(cache_disk.CacheDirError, match="TINYTENSOR_CACHE_DIR"):
        tt.compile(chain)(tt.randn(5))


def _cuda_tensor():
    dev = object.__new__(Device)   # a CUDA device object without a GPU: choose reads .type
    dev.type, dev.index = "cuda", 0
    return Tensor._make(np.zeros(3, np.float32), dev, False)


def test_gpu_tensors_choose_cuda():
    meta = types.SimpleNamespace(tree=None, bindings=[])   # what choose reads of capture's meta
    assert choose.backend((_cuda_tensor(),), {}, meta) == "cuda"
    assert choose.backend((tt.randn(3),), {}, meta) == "c"
    # a parameter on the GPU (a compiled model called on CPU ids would still fail there)
    assert choose.backend((tt.randn(3),), {}, {"tree": None,
                                               "bindings": [("param", _cuda_tensor())]}) == "cuda"
