"""kernels/c_copy.py, a strided array laid out C-contiguous on the C pool (the copy a reshape
of a transposed array makes, at two threads or more): every element's bytes, for
transposes, flips, slices and permutations, and reshape's view-or-copy rule unchanged."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels import c_copy, c_eager
from tests.eager_c import needs_cc

pytestmark = needs_cc


@pytest.fixture(autouse=True)
def two_threads():
    """The kernel runs at two threads or more (on one, NumPy's copy is as fast)."""
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    before = blas.get()
    blas.set(2)
    yield
    blas.set(before)

VIEWS = [lambda a: a.transpose(0, 2, 1), lambda a: a.transpose(2, 1, 0), lambda a: a[:, ::2, ::-1],
         lambda a: a.transpose(1, 0, 2), lambda a: a[::-1].transpose(0, 2, 1),
         lambda a: a[:, 3:70, 5:200].transpose(0, 2, 1), lambda a: a.reshape(16, 16, 8, 256).transpose(3, 0, 2, 1),
         lambda a: a[::2, :, 1:], lambda a: a[:, :, ::8]]   # the last: a strided last dim


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_copy_is_every_element_s_bytes(dt):
    x = np.random.default_rng(0).standard_normal((16, 128, 256)).astype(dt)
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    bits = x.reshape(-1).view(np.uint32 if dt == np.float32 else np.uint64)
    bits[3] = 0xFFC00005 if dt == np.float32 else 0xFFF8000000000005   # a nan with a payload
    for k, f in enumerate(VIEWS):
        v = f(x)
        assert v.size >= c_eager.MIN_ELEMENTS and not v.flags.c_contiguous, k
        c = c_copy.contiguous(v)
        assert c is not None and c.flags.c_contiguous and c.shape == v.shape, k
        assert c.tobytes() == np.ascontiguousarray(v).tobytes(), k


def test_on_one_thread_numpy_copies():
    from tinytensor.compiler.codegen import threads
    threads.blas().set(1)
    assert c_copy.contiguous(np.zeros((300, 400), np.float32).T) is None


def test_reshape_copies_through_the_kernel_only_where_numpy_would_copy():
    x = np.random.default_rng(1).standard_normal((64, 128, 40)).astype(np.float32)
    X = tt.tensor(x)
    before = c_eager.calls.get("copy", 0)
    t = X.transpose(1, 2).reshape(64, -1)
    assert c_eager.calls.get("copy", 0) == before + 1
    assert t.numpy().tobytes() == x.transpose(0, 2, 1).reshape(64, -1).tobytes()
    # splitting a dim of a strided tensor needs no copy: a view, which view() takes too
    s = X.transpose(0, 1)
    split = s.reshape(16, 8, 64, 40)
    assert c_eager.calls.get("copy", 0) == before + 1
    assert np.shares_memory(split.data, s.data) and np.shares_memory(s.view(16, 8, 64, 40).data, s.data)
    with pytest.raises(RuntimeError):
        X.transpose(1, 2).view(64, -1)
