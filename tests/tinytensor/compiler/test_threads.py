"""The C backend's threads (compiler/codegen/threads.py, c_pool.py): split kernels give the
bits of whole ones, gemm jobs give BLAS's products, OpenBLAS's thread count comes back,
the tuning keeps the faster form, and a forked child still computes."""
import os
import time

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import blas_threads
from tinytensor.compiler.codegen import runner, threads

from .helpers import training_step

BIG = 2 * threads.SPLIT_ELEMENTS   # elements enough for a kernel to be split


@pytest.fixture
def always_split(monkeypatch):
    """Tuned kernels always take their split form (else the machine's timing decides)."""
    monkeypatch.setattr(runner, "_tuned", lambda whole, split: split)


def _run(fn, arrays, n_threads, calls=2):
    step = tt.compile(fn, backend="c", threads=n_threads)
    tensors = [tt.tensor(a) for a in arrays]
    for _ in range(calls):
        out = step(*tensors)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _same_bits(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_kernels_give_the_bits_of_whole_ones(always_split, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BIG // 256 + 3, 256)).astype(dtype)   # rows not a multiple of 2
    flat = rng.standard_normal(BIG + 37).astype(dtype)             # no multiple of the grain
    w = rng.standard_normal(256).astype(dtype)

    def fn(x, flat, w):
        return (F.gelu(x * w + 1.0, approximate="tanh"),         # elementwise over rows
                (flat * 1.5 + 0.5).tanh(),                       # one flat loop
                F.log_softmax(x, dim=-1),                        # a row kernel (max, sum)
                (x * w).sum(0) + x.amax(0) * 0.0)                # column sums
    whole = _run(fn, [x, flat, w], 1)
    split = _run(fn, [x, flat, w], 2)
    _same_bits(whole, split)


def test_a_split_training_step_matches_the_whole_one(always_split):
    from tinytensor import nn
    rng = np.random.default_rng(1)
    xa, ya = rng.standard_normal((512, 256)).astype(np.float32), rng.integers(0, 10, 512)

    def make():
        tt.manual_seed(0)
        m = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 10))
        return m, nn.optim.AdamW(m.parameters(), lr=1e-3)

    step = training_step(lambda m, x, y: F.cross_entropy(m(x), y))
    results = []
    for n in (1, 2):
        m, opt = make()
        fn = tt.compile(step, backend="c", threads=n)
        x, y = tt.tensor(xa), tt.tensor(ya)
        losses = [float(fn(m, opt, x, y)) for _ in range(4)]
        results.append((losses, [p.data.copy() for p in m.parameters()]))
    # Not bits: OpenBLAS's AVX2 (Haswell) kernels round a block of rows apart from the whole
    # product (1e-6 here), so the split step equals the whole one only to rounding on such
    # CPUs; on Zen 4 / AVX-512 kernels it is bitwise. The bound is that rounding's size.
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _gemm_cases(rng, dtype):
    a = rng.standard_normal((256, 300)).astype(dtype)
    b = rng.standard_normal((300, 200)).astype(dtype)
    qkv = rng.standard_normal((8, 64, 768)).astype(dtype)
    w = rng.standard_normal((768, 300)).astype(dtype)
    yield "2-d", (lambda x, y: (x @ y) * 2.0), [a, b]
    yield "transposed", (lambda x, y: (x.transpose(0, 1) @ y.transpose(0, 1)) * 2.0), [a.T.copy(), b.T.copy()]

    def heads(x):   # strided views, two leading dims: attention's q @ k^T
        q = x[:, :, :256].reshape(8, 64, 4, 64).permute(0, 2, 1, 3)
        k = x[:, :, 256:512].reshape(8, 64, 4, 64).permute(0, 2, 3, 1)
        return (q @ k) * 1.0
    yield "batched heads", heads, [qkv]
    yield "broadcast weight", (lambda x, w: (x @ w) + 1.0), [qkv, w]
    yield "one matrix of a batch (rows split)", (lambda x, w: (x[:1] @ w) + 1.0), [qkv, w]
    yield "not BLAS's layout (NumPy's matmul)", (lambda x, y: (x[::2, ::2] @ y[::2]) + 0.0), \
        [rng.standard_normal((512, 600)).astype(dtype), rng.standard_normal((600, 512)).astype(dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_jobs_give_numpys_products(dtype):
    rng = np.random.default_rng(2)
    eps = np.finfo(dtype).eps
    for name, fn, arrays in _gemm_cases(rng, dtype):
        want = fn(*[tt.tensor(a) for a in arrays]).numpy()
        # a block of rows may be rounded differently from the whole (OpenBLAS's Haswell
        # kernels): the bound is a few roundings of the sum of |terms| (K * max|a| * max|b|)
        k = arrays[0].shape[-1]
        atol = 8 * eps * k * max(float(np.abs(a).max()) for a in arrays) ** 2
        for n in (1, 2, 3):
            (got,) = _run(fn, arrays, n)
            np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=f"{name}, {n} threads")


def test_a_gemm_job_in_more_parts_than_threads_computes_every_row():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 100, 70)).astype(np.float32)
    y = rng.standard_normal((70, 90)).astype(np.float32)
    p = threads.pool(2)
    gemm = p.gemm(np.float32)
    if gemm is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    for parts in (1, 2, 5, 7):
        z = np.full((3, 100, 90), np.nan, np.float32)
        job = runner.GemmJob(gemm, x.shape, y.shape, z.shape, np.float32, parts)
        assert job.set(x, y, z)
        p.run(p.gemm_part, runner.ctypes.addressof(job.args), None, parts)
        np.testing.assert_allclose(z, x @ y, rtol=1e-5, atol=1e-5)


def test_openblas_is_held_to_one_thread_inside_a_run_and_set_back():
    b = threads.blas()
    if b is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    before = b.get()
    with threads.blas_held_to_one():
        assert b.get() == 1
    assert b.get() == before
    x = np.random.default_rng(4).standard_normal((256, 256)).astype(np.float32)
    _run(lambda x: (x @ x) * 2.0, [x], 2)
    assert b.get() == before
    with pytest.raises(ZeroDivisionError), threads.blas_held_to_one():
        raise ZeroDivisionError
    assert b.get() == before


def test_overlapping_holds_of_openblas_restore_its_count_once_the_last_ends():
    # an eager matmul in one thread and a conv's gemm parts in another hold it at once: the
    # first in saves the count, the last out restores it (each restoring its own would leave
    # OpenBLAS at one thread when the first ends before the second)
    import threading
    b = threads.blas()
    if b is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    before = b.get()
    b.set(2)
    try:
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        inside = []

        def second():
            first_in.wait()
            with threads.blas_held_to_one():
                second_in.set()
                first_out.wait()
                inside.append(b.get())   # still held, the first holder gone
        t = threading.Thread(target=second)
        t.start()
        with threads.blas_held_to_one():
            first_in.set()
            second_in.wait()
        first_out.set()
        t.join()
        assert inside == [1] and b.get() == 2
    finally:
        b.set(before)


def test_without_openblas_kernels_still_split_and_matmuls_run_whole(always_split, monkeypatch):
    monkeypatch.setattr(blas_threads, "_BLAS", None)
    monkeypatch.setattr(blas_threads, "_SEARCHED", True)
    assert threads.default_threads() == 1
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BIG // 128, 128)).astype(np.float32)
    fn = lambda x: ((x @ x.transpose(0, 1)[:, :128]) * 2.0).exp()
    _same_bits(_run(fn, [x], 1), _run(fn, [x], 2))


def test_the_tuning_keeps_the_faster_form():
    def timed(seconds, calls):
        def f():
            calls.append(seconds)
            time.sleep(seconds)
        return f
    for fast_split in (True, False):
        calls = []
        whole = timed(0.0 if not fast_split else 0.004, calls)
        split = timed(0.004 if not fast_split else 0.0, calls)
        call = runner._tuned(whole, split)
        for _ in range(2 * threads.TUNE_CALLS):
            call()
        assert len(calls) == 2 * threads.TUNE_CALLS and call.chosen
        calls.clear()
        call()
        assert calls == [0.0]   # the fast one, from now on
        assert (call.chosen[0] is split) == fast_split


def test_a_forked_child_computes_with_a_pool_of_its_own(always_split):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    x = np.random.default_rng(6).standard_normal((BIG // 128, 128)).astype(np.float32)
    fn = lambda x: ((x @ x.transpose(0, 1)[:, :128]) * 2.0).tanh()
    want = _run(fn, [x], 2)[0]     # the parent's pool is up (its own split: the same bits
    #                                as the child's, whatever the CPU's BLAS does with a split)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its workers did not survive the fork
        ok = 0
        try:
            ok = int(_run(fn, [x], 2)[0].tobytes() == want.tobytes())
        finally:
            os.write(w, bytes([ok]))
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"\x01"


def test_threads_is_checked_by_tt_compile():
    with pytest.raises(ValueError, match="threads must be a whole number"):
        tt.compile(lambda x: x, backend="c", threads=0)
    with pytest.raises(ValueError, match="threads must be a whole number"):
        tt.compile(lambda x: x, backend="c", threads=2.0)
    with pytest.raises(ValueError, match="backend='numpy' runs in one thread"):
        tt.compile(lambda x: x, backend="numpy", threads=2)
    assert tt.compile(lambda x: x * 2.0, backend="numpy", threads=1)(tt.tensor([1.0])).numpy() == 2.0


def test_the_loop_the_parts_share_is_one_longer_than_one(always_split):
    # a batch of one beside a broadcast bias leaves a loop of length 1 first (the collapse
    # cannot merge it): splitting that one would hand every element to one part
    from tinytensor.compiler.codegen import c
    from tinytensor.compiler.passes import columns, fuse
    from ._programs import program_of
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 512, 512)).astype(np.float32)
    w = rng.standard_normal(512).astype(np.float32)
    fn = lambda x, w: F.gelu(x + w, approximate="tanh")
    program, _ = program_of(fn, x, w)
    source, _ = c.program_source(columns.run(fuse.run(program)))
    assert "tt_part_start(512, part, parts, 1)" in source and "tt_part_start(1," not in source
    _same_bits(_run(fn, [x, w], 1), _run(fn, [x, w], 2))
