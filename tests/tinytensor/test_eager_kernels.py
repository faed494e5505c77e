"""Eager C kernels (kernels/c_eager.py, kernels/c_rows.py): each hot op's C path against its
NumPy path (the reference, TINYTENSOR_EAGER_KERNELS=0) and against torch in float64, the
compiled replay's bits, the bits at one and two threads, and the fallbacks."""
import functools

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.compiler import cache_disk
from tinytensor.kernels import c_eager
from tests.eager_c import needs_cc, numpy_path, run_noting_kernels


def _value_and_grad(op, x, g):
    """op(X) of a leaf X holding x, and X's gradient for the output gradient g, as arrays."""
    X = tt.tensor(x, requires_grad=True)
    y = op(X)
    y.backward(tt.tensor(g))
    return y.detach().numpy(), X.grad.numpy()


SHAPE = (136, 256)   # 34816 elements: just past MIN_ELEMENTS
TF = torch.nn.functional


def _w(dt):
    return np.linspace(-1.5, 1.5, SHAPE[-1]).astype(dt)


# name: (kernel names that must run, tinytensor fn, torch fn, tolerance float32, float64)
CASES = {
    "softmax": (("softmax", "softmax_backward"), lambda x: F.softmax(x, -1),
                lambda x: torch.softmax(x, -1), 1e-6, 1e-15),
    "log_softmax": (("log_softmax", "log_softmax_backward"), lambda x: F.log_softmax(x, -1),
                    lambda x: torch.log_softmax(x, -1), 1e-5, 1e-14),
    "layer_norm": (("layer_norm", "layer_norm_backward"),
                   lambda x: F.layer_norm(x, (SHAPE[-1],), tt.tensor(_w(x.dtype.np)), tt.tensor(_w(x.dtype.np)[::-1].copy())),
                   lambda x: TF.layer_norm(x, (SHAPE[-1],), torch.tensor(_w(np.float64)), torch.tensor(_w(np.float64)[::-1].copy())),
                   1e-5, 1e-13),
    "rms_norm": (("rms_norm", "rms_norm_backward"), lambda x: F.rms_norm(x, (SHAPE[-1],), tt.tensor(_w(x.dtype.np))),
                 lambda x: TF.rms_norm(x, (SHAPE[-1],), torch.tensor(_w(np.float64))), 1e-5, 1e-13),
    "tanh": (("tanh", "tanh_backward"), lambda x: x.tanh(), torch.tanh, 1e-6, 1e-15),
    "sigmoid": (("sigmoid", "sigmoid_backward"), lambda x: x.sigmoid(), torch.sigmoid, 1e-6, 1e-15),
    "silu": (("silu", "silu_backward"), F.silu, TF.silu, 1e-5, 1e-14),
    "gelu_tanh": (("gelu_tanh", "gelu_tanh_backward"), lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: TF.gelu(x, approximate="tanh"), 1e-5, 1e-14),
    "gelu": (("gelu_erf_slope",), F.gelu, TF.gelu, 1e-5, 1e-14),
    "erf": (("erf", "erf_backward"), lambda x: x.erf(), torch.erf, 1e-6, 1e-15),
    "exp": (("exp", "exp_backward"), lambda x: (x * 0.25).exp(), lambda x: (x * 0.25).exp(), 1e-6, 1e-15),
    "log": (("log",), lambda x: (x * x + 0.5).log(), lambda x: (x * x + 0.5).log(), 1e-6, 1e-15),
}


def _fwd_bwd(fn, x, g):
    X = tt.tensor(x, requires_grad=True)
    y = fn(X)
    y.backward(tt.tensor(g))
    return y.detach().numpy(), X.grad.numpy()


def _data(dt, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(SHAPE) * 3).astype(dt)
    x[0, :6] = [0.0, -0.0, 20.0, -20.0, 1e-6, -1e-6]
    return x, rng.standard_normal(SHAPE).astype(dt)


# each case compiles two kernels the first time (seconds on a cold cache): two in CI, every
# case and dtype in the slow run
_FAST = {("softmax", np.float32), ("gelu", np.float32)}


@needs_cc
@pytest.mark.parametrize("case,dt", [pytest.param(c, d, marks=() if (c, d) in _FAST else pytest.mark.slow)
                                     for c in sorted(CASES) for d in (np.float32, np.float64)])
def test_the_c_path_runs_and_agrees_with_numpy_and_torch(case, dt):
    names, fn, tfn, tol32, tol64 = CASES[case]
    x, g = _data(dt)
    before = {n: c_eager.calls.get(n, 0) for n in names}
    y, gx = _fwd_bwd(fn, x, g)
    assert all(c_eager.calls.get(n, 0) > before[n] for n in names), (case, c_eager.calls)
    yn, gn = numpy_path(_fwd_bwd, fn, x, g)
    X = torch.tensor(x.astype(np.float64), requires_grad=True)
    yt = tfn(X)
    yt.backward(torch.tensor(g.astype(np.float64)))
    tol = tol32 if dt == np.float32 else tol64
    scale_y, scale_g = max(1.0, np.abs(yn).max()), max(1.0, np.abs(gn).max())
    for got, numpy_, ref, scale in ((y, yn, yt.detach().numpy(), scale_y), (gx, gn, X.grad.numpy(), scale_g)):
        assert got.dtype == dt and got.shape == SHAPE
        # the C path is as close to torch's float64 as NumPy's path is (a few ulps more at most)
        assert np.abs(got - ref).max() <= np.abs(numpy_ - ref).max() + tol * scale, case
        assert np.abs(got - numpy_).max() <= 2 * tol * scale, case


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_topk_is_the_stable_order_ties_and_nan_included(dt):
    x, _ = _data(dt)
    x[1, 10:40] = 2.5           # ties: the lower index first
    x[2, :] = 0.0
    x[2, 7] = -0.0              # -0 ties with 0
    x[3, [4, 9, 200]] = np.nan  # nan is the largest value, as in torch: first, or last
    x[4, :] = np.nan
    for largest in (True, False):
        before = c_eager.calls.get("topk", 0)
        v, i = tt.tensor(x).topk(8, -1, largest=largest)
        assert c_eager.calls.get("topk", 0) == before + 1
        prev = c_eager.set_enabled(False)
        try:
            vn, iN = tt.tensor(x).topk(8, -1, largest=largest)
        finally:
            c_eager.set_enabled(prev)
        np.testing.assert_array_equal(i.numpy(), iN.numpy())
        np.testing.assert_array_equal(v.numpy(), vn.numpy())
        # torch's values (its order of ties, nan among nan included, is its own)
        tv, _ = torch.tensor(x).topk(8, -1, largest=largest)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        # and torch's stable sort's indices
        _, ts = torch.tensor(x).sort(dim=-1, descending=largest, stable=True)
        np.testing.assert_array_equal(i.numpy(), ts[:, :8].numpy())


@needs_cc
@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_blocks_agree_with_numpy_and_torch(causal):
    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal((2, 4, 70, 32)) for _ in range(4))   # 2*4*70*70 scores < MIN
    k, v = (np.concatenate([a] * 3, axis=2) for a in (k, v))                # 70 x 210: past MIN

    def run():
        Q, K, V = (tt.tensor(a, requires_grad=True) for a in (q, k, v))
        o = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        o.backward(tt.tensor(g))
        return [o.detach().numpy(), Q.grad.numpy(), K.grad.numpy(), V.grad.numpy()]
    before = (c_eager.calls.get("flash_fwd", 0), c_eager.calls.get("flash_bwd", 0))
    got = run()
    assert (c_eager.calls.get("flash_fwd", 0), c_eager.calls.get("flash_bwd", 0)) > before
    ref = numpy_path(run)
    Q, K, V = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    o = TF.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    o.backward(torch.tensor(g))
    for a, b, t in zip(got, ref, [o.detach().numpy(), Q.grad.numpy(), K.grad.numpy(), V.grad.numpy()]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
        np.testing.assert_allclose(a, t, rtol=0, atol=1e-13)


@needs_cc
@pytest.mark.parametrize("case", ["layer_norm", "softmax"])
def test_a_compiled_replay_gives_the_eager_kernel_s_bits(case):
    """tt.compile's promise (a replay computes eager's bits) holds by construction: the eager
    kernel is the compiler's kernel of the same decomposition."""
    _, fn, _, _, _ = CASES[case]
    x, _ = _data(np.float32)
    eager = fn(tt.tensor(x)).numpy()
    compiled = tt.compile(fn, backend="c")
    compiled(tt.tensor(x))                       # the capture's call
    np.testing.assert_array_equal(compiled(tt.tensor(x)).numpy(), eager)


def _layer_norm_grads(x, g):
    """y and the gradients of x, weight and bias (the weight's and bias's: column sums of a
    big array into a row, after a row kernel split over the threads)."""
    X = tt.tensor(x, requires_grad=True)
    w = tt.tensor(_w(x.dtype), requires_grad=True)
    b = tt.tensor(_w(x.dtype)[::-1].copy(), requires_grad=True)
    y = F.layer_norm(X, (x.shape[-1],), w, b)
    y.backward(tt.tensor(g))
    return y.detach().numpy(), X.grad.numpy(), w.grad.numpy(), b.grad.numpy()


@needs_cc
def test_results_do_not_depend_on_the_thread_count():
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    x, g = _data(np.float32)
    x = np.concatenate([x] * 8)   # past SPLIT_ELEMENTS: split over the pool's threads
    g = np.concatenate([g] * 8)
    before = blas.get()
    outs = []
    try:
        for n in (1, 2):
            blas.set(n)
            outs.append([_fwd_bwd(CASES[c][1], x, g) for c in ("softmax", "gelu")] + [_layer_norm_grads(x, g)])
    finally:
        blas.set(before)
    for a, b in zip(*outs):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_small_calls_and_the_switch_run_numpy(monkeypatch):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)   # below MIN_ELEMENTS
    before = dict(c_eager.calls)
    F.softmax(tt.tensor(x), -1)
    prev = c_eager.set_enabled(False)
    try:
        F.softmax(tt.tensor(np.resize(x, SHAPE)), -1)
    finally:
        c_eager.set_enabled(prev)
    assert c_eager.calls == before
    assert not c_eager._env_on("0") and not c_eager._env_on(" off ") and not c_eager._env_on("No")
    assert c_eager._env_on(None) and c_eager._env_on("1")


def test_without_a_c_compiler_eager_runs_numpy(monkeypatch):
    def missing():
        raise cache_disk.CompilerNotFound("no cc (test)")
    monkeypatch.setattr(cache_disk, "find_compiler", missing)
    monkeypatch.setattr(c_eager, "_compiler", [])
    x, g = _data(np.float32)
    before = dict(c_eager.calls)
    y, gx = _fwd_bwd(F.gelu, x, g)
    assert c_eager.calls == before and np.isfinite(y).all() and np.isfinite(gx).all()


@needs_cc
def test_a_kernel_built_inside_record_leaves_one_node_on_the_tape(monkeypatch):
    """The kernel's own capture (its first use) must not record onto the user's tape."""
    monkeypatch.setattr(c_eager, "_kernels", {})   # built afresh here (the disk cache still serves)
    x, _ = _data(np.float32)
    with tt.record() as tape:
        y = tt.tensor(x).tanh()
    assert c_eager.calls.get("tanh", 0) >= 1
    assert [n.fn.__name__ for n in tape.nodes] == ["Tanh"], [n.fn.__name__ for n in tape.nodes]
    assert y.shape == SHAPE


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_the_norm_kernels_give_the_reference_decomposition_s_bits(dt):
    """Exactly rounded ops: the C kernel's sums are NumPy's pairwise sums, so layer_norm and
    rms_norm equal the reference ops (fusion off: NumPy's mean, sqrt, 1/x) bit for bit."""
    x, _ = _data(dt)
    w, b = tt.tensor(_w(dt)), tt.tensor(_w(dt)[::-1].copy())
    before = c_eager.calls.get("layer_norm", 0), c_eager.calls.get("rms_norm", 0)
    got = [F.layer_norm(tt.tensor(x), (SHAPE[-1],), w, b).numpy(), F.rms_norm(tt.tensor(x), (SHAPE[-1],), w).numpy()]
    assert (c_eager.calls.get("layer_norm", 0), c_eager.calls.get("rms_norm", 0)) > before
    with tt.kernels.use_fusion(False):
        ref = [F.layer_norm(tt.tensor(x), (SHAPE[-1],), w, b).numpy(), F.rms_norm(tt.tensor(x), (SHAPE[-1],), w).numpy()]
    for a, r in zip(got, ref):
        assert a.tobytes() == r.tobytes()


@needs_cc
def test_a_kernel_first_built_inside_tt_compile_s_capture_is_eager_s(monkeypatch):
    """A kernel first needed while tt.compile captures a step is captured apart from it:
    before, the outer capture's guards made its sizes fixed (the kernel then wrote 53
    elements of 34816), and its ops landed on the step's tape."""
    monkeypatch.setattr(c_eager, "_kernels", {})
    x, _ = _data(np.float32)
    step = tt.compile(lambda t: F.silu(t) * 2.0, backend="numpy")
    first = step(tt.tensor(x)).numpy()            # the capture: builds the silu kernel
    assert c_eager._kernels and all(k is not None for k in c_eager._kernels.values())
    again = step(tt.tensor(x)).numpy()            # the interpreter's replay
    eager = (F.silu(tt.tensor(x)) * 2.0).numpy()
    assert first.tobytes() == eager.tobytes() == again.tobytes()
    assert len(step.programs[0].instrs) == 2      # silu and mul: nothing of the kernel's capture


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cumsum_last_dim_is_numpy_s_additions_bit_for_bit_and_its_backward_too(dt):
    x, g = _data(dt)
    x[1, :3] = [-0.0, -0.0, np.nan]   # a row of -0.0 stays -0.0; nan carries on
    x[2, 7] = np.inf
    before = (c_eager.calls.get("cumsum", 0), c_eager.calls.get("cumsum_rev", 0))
    X = tt.tensor(x, requires_grad=True)
    y = tt.cumsum(X, -1)
    y.backward(tt.tensor(g))
    assert (c_eager.calls.get("cumsum", 0), c_eager.calls.get("cumsum_rev", 0)) == (before[0] + 1, before[1] + 1)
    assert np.array_equal(y.detach().numpy(), np.cumsum(x, -1), equal_nan=True)
    assert np.signbit(y.detach().numpy()[1, :2]).all()
    assert np.array_equal(X.grad.numpy(), np.flip(np.cumsum(np.flip(g, -1), -1), -1))
    T = torch.tensor(x.astype(np.float64), requires_grad=True)
    yt = torch.cumsum(T, -1)
    yt.backward(torch.tensor(g.astype(np.float64)))
    tol = 1e-4 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(y.detach().numpy()[3:], yt.detach().numpy()[3:], rtol=tol, atol=tol)
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=tol, atol=tol)


@needs_cc
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=1, padding=1, dilation=2, ceil_mode=True),
                                dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), ceil_mode=True),
                                dict(kernel_size=(3, 2), stride=(1, 3), dilation=(2, 1))])
def test_max_pool2d_c_winners_gather_and_scatter_are_numpy_s_bit_for_bit(kw):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 32, 33))
    x[0, 0, :4, :4] = -np.inf        # a window of lowest values names its first real element
    x[0, 1, 2, 3] = np.nan           # a nan wins its windows
    x[1, 2, :, 5] = x[1, 2, :, 6]    # ties: the first
    g = rng.standard_normal((2, 16, 40, 40))

    def run():
        X = tt.tensor(x, requires_grad=True)
        y, i = F.max_pool2d(X, return_indices=True, **kw)
        y.backward(tt.tensor(g[..., :y.shape[-2], :y.shape[-1]].copy()))
        return y.detach().numpy(), i.numpy(), X.grad.numpy()

    before = c_eager.calls.get("max_pool2d", 0)
    got = run()
    assert c_eager.calls.get("max_pool2d", 0) == before + 1
    ref = numpy_path(run)
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@needs_cc
def test_gather_and_scatter_add_along_the_last_dim_run_c_in_add_at_order():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 700)).astype(np.float32)
    index = rng.integers(0, 700, (64, 600))   # repeats: the additions' order matters
    src = rng.standard_normal((64, 600)).astype(np.float32)
    before = (c_eager.calls.get("gather", 0), c_eager.calls.get("scatter_add", 0))
    got = (tt.gather(tt.tensor(x), -1, tt.tensor(index)).numpy(),
           tt.scatter_add(tt.tensor(x), 1, tt.tensor(index), tt.tensor(src)).numpy())
    assert (c_eager.calls.get("gather", 0), c_eager.calls.get("scatter_add", 0)) == (before[0] + 1, before[1] + 1)
    ref = x.copy()
    np.add.at(ref, (np.arange(64)[:, None], index), src)
    assert np.array_equal(got[0], np.take_along_axis(x, index, 1)) and np.array_equal(got[1], ref)


@needs_cc
def test_exact_gelu_keeps_its_slope_for_the_backward_and_a_compiled_step_gets_the_same_bits():
    """Eager's forward returns the slope with the GELU, from one cdf and exp, and its backward
    is g * slope (no second C kernel); the compiled step computes the slope afresh from the cdf
    rounded the same way: the same bits."""
    x, g = _data(np.float32)
    with tt.no_grad():
        plain = F.gelu(tt.tensor(x)).numpy()   # no backward to come: the GELU alone
    before = {k: c_eager.calls.get(k, 0) for k in ("gelu_erf_slope", "gelu_erf_backward")}
    y, gx = _fwd_bwd(F.gelu, x, g)
    assert {k: c_eager.calls.get(k, 0) - before[k] for k in before} == {"gelu_erf_slope": 1, "gelu_erf_backward": 0}
    assert np.array_equal(plain, y)

    def step(t, gt):
        t.requires_grad_(True)
        return tt.grad((F.gelu(t) * gt).sum(), [t])[0]
    compiled = tt.compile(step, backend="c")
    compiled(tt.tensor(x), tt.tensor(g))         # the capture's call
    np.testing.assert_array_equal(compiled(tt.tensor(x), tt.tensor(g)).numpy(), gx)


def _cross_entropy(x, t, g, eps, reduction):
    X = tt.tensor(x, requires_grad=True)
    loss = F.cross_entropy(X, tt.tensor(t), label_smoothing=eps, reduction=reduction)
    loss.backward(tt.tensor(g) if reduction == "none" else None)
    return loss.detach().numpy(), X.grad.numpy()


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_cross_entropy_c_rows_agree_with_numpy_and_torch(dt):
    """kernels/c_cross_entropy.py: ignored rows, a nan row, label smoothing, every reduction."""
    x, _ = _data(dt)
    x = np.concatenate([x, x[::-1] * 0.5], axis=1)   # 512 classes: two of the kernels' lanes' spans and more
    rng = np.random.default_rng(5)
    t = rng.integers(0, x.shape[1], x.shape[0])
    t[[3, 40]] = -100
    x[7, 11] = np.nan
    g = rng.standard_normal(x.shape[0]).astype(dt)
    eps64 = np.finfo(np.float64).eps
    tol = 1e-5 if dt == np.float32 else 1e-13
    for eps in (0.0, 0.1):
        for reduction in ("none", "sum", "mean"):
            before = (c_eager.calls.get("cross_entropy", 0), c_eager.calls.get("cross_entropy_backward", 0))
            got = _cross_entropy(x, t, g, eps, reduction)
            assert c_eager.calls["cross_entropy"] > before[0] and c_eager.calls["cross_entropy_backward"] > before[1]
            want = numpy_path(_cross_entropy, x, t, g, eps, reduction)
            for a, b in zip(got, want):
                assert a.dtype == dt and np.array_equal(np.isnan(a), np.isnan(b))
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.nanmax(np.abs(b))))
            # against torch in float64, without the nan row (torch's loss is then nan everywhere)
            keep = np.ones(x.shape[0], bool)
            keep[7] = False
            X = torch.tensor(x[keep].astype(np.float64), requires_grad=True)
            lt = TF.cross_entropy(X, torch.tensor(t[keep]), label_smoothing=eps, reduction="none")
            lt.backward(torch.tensor(g[keep].astype(np.float64)))
            if reduction == "none":
                np.testing.assert_allclose(got[0][keep], lt.detach().numpy(), rtol=tol, atol=tol + 64 * eps64)
                np.testing.assert_allclose(got[1][keep], X.grad.numpy(), rtol=tol, atol=tol + 64 * eps64)


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_softmax_row_pass_gives_the_generated_kernel_s_bits(dt):
    """kernels/c_softmax.py (exp once, into the output) against the codegen's row kernel it
    replaces in eager (the one tt.compile generates): the same bytes, nan payloads too."""
    from tinytensor.kernels import c_softmax
    import importlib
    S = importlib.import_module("tinytensor.ops.softmax")
    rng = np.random.default_rng(3)
    for C in (7, 129, 1000):
        x = (rng.standard_normal((40000 // C + 3, C)) * 5).astype(dt)
        x[1, 3] = np.nan
        x[2, :] = -np.inf
        x[0, :4] = [0.0, -0.0, 30.0, -30.0]
        got = c_softmax.forward(x)
        want = c_eager.run("softmax", lambda t: S._forward_op(False)(t, -1), [x], ("rn",))[0]
        assert got.tobytes() == want.tobytes(), C


@needs_cc
def test_back_to_back_split_calls_run_every_part_once():
    """The pool's parts are claimed as its threads come (codegen/c_pool.c), several per
    thread: hundreds of calls in a row (a worker still finishing the last job's claims while
    the next is posted) each compute every element, exactly once."""
    from tinytensor.compiler.codegen import threads
    from tinytensor.ops.elementwise import exp
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    x = np.random.default_rng(4).standard_normal(threads.SPLIT_ELEMENTS + 4099).astype(np.float32)
    before = blas.get()
    try:
        blas.set(1)
        (want,) = c_eager.elementwise("exp", exp, [x])
        blas.set(2)
        for _ in range(300):
            (got,) = c_eager.elementwise("exp", exp, [x])
            assert got.tobytes() == want.tobytes()
    finally:
        blas.set(before)


@needs_cc
def test_embedding_gradient_rows_are_add_at_s_bit_for_bit():
    """kernels/c_scatter_rows.py: repeated ids add in add.at's order."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((300, 96)).astype(np.float32)
    ids = rng.integers(0, 300, (40, 17))
    ids[0, :9] = 5                      # one row added many times
    g = rng.standard_normal(ids.shape + (96,)).astype(np.float32)

    def run():
        W = tt.tensor(w, requires_grad=True)
        F.embedding(tt.tensor(ids), W).backward(tt.tensor(g))
        return W.grad.numpy()

    before = c_eager.calls.get("scatter_rows_add", 0)
    got = run()
    assert c_eager.calls.get("scatter_rows_add", 0) == before + 1
    want = numpy_path(run)
    assert got.tobytes() == want.tobytes()
    T = torch.tensor(w.astype(np.float64), requires_grad=True)
    TF.embedding(torch.tensor(ids), T).backward(torch.tensor(g.astype(np.float64)))
    np.testing.assert_allclose(got, T.grad.numpy(), rtol=1e-5, atol=1e-5)


@needs_cc
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_a_whole_sum_s_gradient_reaches_the_next_backward_dense_so_its_c_kernel_runs(reduce):
    # loss = y.sum() (or mean) hands y's backward a broadcast of one number: made dense at
    # the kernels' sizes, the pooling's scatter and the norm's backward run C, not NumPy;
    # the scatter gives the NumPy path's bits, the norm's backward its stated 8 ulp
    # (test_norm_backward_kernel.py)
    x = np.random.default_rng(3).standard_normal((8, 16, 32, 32)).astype(np.float32)

    def run(op):
        X = tt.tensor(x, requires_grad=True)
        getattr(op(X), reduce)().backward()
        return X.grad.numpy()

    for op, kernel, ulps in [(lambda X: F.max_pool2d(X, 3, 2, 1), "scatter_add", 0),
                             (lambda X: F.layer_norm(X, (32,)), "layer_norm_backward", 8)]:
        got, names = run_noting_kernels(run, op)
        assert kernel in names
        ref = numpy_path(run, op)
        # ulps of the gradient's terms (x's size), not of the result: the norm's exact
        # gradient here is 0, which C gives and NumPy misses by rounding (2e-7)
        assert np.all(np.abs(got - ref) <= ulps * np.finfo(np.float32).eps * np.abs(x).max()), kernel


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("op, kernels", [(lambda X: F.relu(X), {"relu_backward"}),
                                         (lambda X: F.leaky_relu(X, 0.2), {"leaky_relu", "leaky_relu_backward"})],
                         ids=["relu", "leaky_relu"])
def test_relu_selects_run_c_with_numpy_s_bits_through_nan_inf_and_signed_zeros(op, kernels, dt):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 1024)).astype(dt)
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45]
    g = rng.standard_normal(x.shape).astype(dt)
    g[0, :10] = [1, 2, 3, np.nan, np.inf, -np.inf, np.nan, np.inf, -np.inf, np.nan]   # a nan g stays out where y <= 0

    run = functools.partial(_value_and_grad, op, x, g)

    got, names = run_noting_kernels(run)
    assert kernels <= names
    for a, b in zip(got, numpy_path(run)):
        assert np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))


def _edge_data(dt, shape=(64, 1024)):
    """x with nan, +-inf, +-0, a denormal and the activations' corners; g with nan, +-inf,
    -0 and a denormal, some of them where x is at an edge, some where it is clamped."""
    rng = np.random.default_rng(5)
    tiny = np.finfo(dt).smallest_subnormal
    x = (rng.standard_normal(shape) * 4).astype(dt)
    x[0, :14] = [np.nan, np.inf, -np.inf, -0.0, 0.0, tiny, -tiny, -3, 3, 6, -1, 1, 1.5, -20]
    x[1, :8] = [0.0, -0.0, np.nan, 0.0, -0.0, np.nan, -0.5, 2.0]   # hardtanh(-0.5, 2.0)'s bounds
    g = rng.standard_normal(shape).astype(dt)
    g[0, 14:24] = [1, 2, 3, np.nan, np.inf, -np.inf, np.nan, np.inf, -np.inf, -0.0]
    g[1, :12] = [np.nan, np.inf, -np.inf, -0.0, 0.0, tiny, np.nan, np.inf, -np.inf, -0.0, 0.0, tiny]
    g[0, :14] = np.where(np.arange(14) % 2, np.nan, -tiny)
    return x, g


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# the selects of the piecewise activations (ops/activations.py) and abs's sign: NumPy's bits,
# nan payloads and signed zeros included
_SELECTS = {
    "elu": (lambda X: F.elu(X), {"elu", "elu_backward"}),
    "selu": (F.selu, {"elu", "elu_backward"}),
    "celu": (lambda X: F.celu(X, 0.7), {"elu", "elu_backward"}),
    "hardtanh": (lambda X: F.hardtanh(X, -0.5, 2.0), {"hardtanh_backward"}),
    "relu6": (F.relu6, {"hardtanh_backward"}),
    "hardswish": (F.hardswish, {"hardswish", "hardswish_backward"}),
    "hardsigmoid": (F.hardsigmoid, {"hardsigmoid", "hardsigmoid_backward"}),
    "abs": (lambda X: X.abs(), {"abs_backward"}),
}


def _fast_first(cases, fast):
    """(case, dtype) params, all but `fast`'s marked slow: each builds a kernel or two (seconds
    each on a cold cache)."""
    return [pytest.param(c, d, marks=() if (c, d) in fast else pytest.mark.slow)
            for c in cases for d in (np.float32, np.float64)]


@needs_cc
@pytest.mark.parametrize("case,dt", _fast_first(sorted(_SELECTS), {("relu6", np.float32), ("elu", np.float32)}))
def test_activation_selects_run_c_with_numpy_s_bits(case, dt):
    op, kernels = _SELECTS[case]
    x, g = _edge_data(dt)

    run = functools.partial(_value_and_grad, op, x, g)

    with np.errstate(all="ignore"):
        got, names = run_noting_kernels(run)
        ref = numpy_path(run)
    assert kernels <= names, names
    assert all(_same_bits(a, b) for a, b in zip(got, ref)), case


@needs_cc
@pytest.mark.parametrize("case,dt", _fast_first(["logsigmoid", "softplus"], {("softplus", np.float32)}))
def test_sigmoid_slopes_run_c_within_the_sigmoid_kernel_s_tolerance(case, dt):
    # logsigmoid's and softplus's slopes evaluate a sigmoid: in C the sigmoid op's C
    # (codegen/tt_math.h), which is not NumPy's exp to the bit: a few ulps (2 measured), the
    # selects (softplus's threshold) and the nans exact; and against torch in float64
    op, tfn = {"logsigmoid": (F.logsigmoid, TF.logsigmoid),
               "softplus": (lambda X: F.softplus(X, 2.0, 3.0), lambda X: TF.softplus(X, 2.0, 3.0))}[case]
    x, g = _edge_data(dt)

    run = functools.partial(_value_and_grad, op, x, g)

    with np.errstate(all="ignore"):
        (y, gx), names = run_noting_kernels(run)
        yn, gn = numpy_path(run)
    assert {case, case + "_backward"} <= names
    assert _same_bits(y, yn)   # the forward: libm's log1p(exp(..)) from NumPy, the rest in C, the same bits
    eps = np.finfo(dt).eps
    assert np.array_equal(np.isnan(gx), np.isnan(gn))
    fin = np.isfinite(gn)
    assert np.array_equal(gx[~fin & ~np.isnan(gn)], gn[~fin & ~np.isnan(gn)])
    assert np.all(np.abs(gx[fin] - gn[fin]) <= 4 * eps * np.maximum(np.abs(gn[fin]), np.finfo(dt).tiny))
    X = torch.tensor(x.astype(np.float64), requires_grad=True)
    tfn(X).backward(torch.tensor(g.astype(np.float64)))
    ref = X.grad.numpy()
    ok = np.isfinite(ref) & np.isfinite(gx)
    assert np.abs(gx[ok] - ref[ok]).max() <= np.abs(gn[ok] - ref[ok]).max() + 4 * eps


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_where_and_masked_fill_run_c_selects_with_numpy_s_bits(dt):
    x, g = _edge_data(dt)
    y = np.random.default_rng(6).standard_normal(x.shape).astype(dt)
    y[0, :6] = [-np.nan, -np.inf, np.inf, 0.0, -0.0, -np.finfo(dt).smallest_subnormal]
    x.reshape(-1)[7] = np.frombuffer((np.array([0x7fc01234], np.uint32) if dt == np.float32 else
                                      np.array([0x7ff8000000001234], np.uint64)).tobytes(), dt)[0]   # a payload
    m = np.random.default_rng(7).standard_normal(x.shape) > 0
    cases = [(lambda X, Y, M: tt.where(M, X, Y), {"where", "where_backward_a_b"}),
             (lambda X, Y, M: X.masked_fill(M, 0.0), {"where", "where_backward_b"}),
             (lambda X, Y, M: X.masked_fill(M, -0.0), {"where", "where_backward_b"}),
             (lambda X, Y, M: X.masked_fill(M, float("-inf")), {"where", "where_backward_b"}),
             (lambda X, Y, M: X.masked_fill(M, float("nan")), {"where", "where_backward_b"}),
             (lambda X, Y, M: tt.where(M, X, 2.5), {"where", "where_backward_a"})]
    for op, kernels in cases:
        def run():
            X, Y = tt.tensor(x, requires_grad=True), tt.tensor(y, requires_grad=True)
            out = op(X, Y, tt.tensor(m))
            out.backward(tt.tensor(g))
            return out.detach().numpy(), X.grad.numpy(), (Y.grad.numpy() if Y.grad is not None else None)

        got, names = run_noting_kernels(run)
        ref = numpy_path(run)
        assert kernels <= names, names
        assert all((a is None and b is None) or _same_bits(a, b) for a, b in zip(got, ref))
    # a broadcast mask stays on NumPy
    _, names = run_noting_kernels(lambda: tt.where(tt.tensor(m[:1]), tt.tensor(x), tt.tensor(y)))
    assert "where" not in names
    # a fill value that changes every call builds no kernel per value (one, laid out at x's shape)
    X = tt.tensor(x)
    before = len(c_eager._kernels)
    for v in (1.5, -2.25, 7.0):
        assert _same_bits(X.masked_fill(tt.tensor(m), v).numpy(), np.where(m, dt(v), x))
    assert len(c_eager._kernels) == before


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
@pytest.mark.parametrize("shape,dim", [((4, 128, 96), 1), ((300, 2), 0), ((2, 3, 40, 41), 1), ((2, 3, 40, 41), 2),
                                       ((3, 70, 2), -2), ((1, 9, 300), 1)])
def test_softmax_over_a_middle_dim_runs_c_in_numpy_s_order(shape, dim, dt, monkeypatch):
    monkeypatch.setattr(c_eager, "MIN_ELEMENTS", 16)   # the small shapes too
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    x.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dt).smallest_subnormal, 50, -50]
    g = rng.standard_normal(shape).astype(dt)

    run = functools.partial(_value_and_grad, lambda X: F.softmax(X, dim), x, g)

    with np.errstate(all="ignore"):
        (y, gx), names = run_noting_kernels(run)
        yn, gn = numpy_path(run)
        d = dim % len(shape)
        # the backward is NumPy's reference formula on the forward's y, to the bit
        assert _same_bits(gx, (g - (g * y).sum(axis=d, keepdims=True)) * y)
    assert {"softmax_mid", "softmax_mid_backward"} <= names
    # the forward: NumPy's steps but tt_math.h's exp: a few ulps, nans where NumPy's are
    assert np.array_equal(np.isnan(y), np.isnan(yn))
    ok = ~np.isnan(yn)
    assert np.all(np.abs(y[ok] - yn[ok]) <= 4 * np.finfo(dt).eps * np.maximum(yn[ok], np.finfo(dt).tiny))
    xt = torch.tensor(np.where(np.isfinite(x), x, 0).astype(np.float64))
    fin = np.isfinite(x).all(axis=d, keepdims=True) & np.ones_like(x, bool)
    ref = torch.softmax(xt, d).numpy()
    assert fin.any() or shape == (300, 2)   # there both columns hold a nan or an inf
    assert not fin.any() or np.abs(y[fin] - ref[fin]).max() <= np.abs(yn[fin] - ref[fin]).max() + 4 * np.finfo(dt).eps


@needs_cc
def test_softmax_over_a_middle_dim_compiled_gives_eager_s_bits():
    rng = np.random.default_rng(9)
    x, g = (rng.standard_normal((8, 128, 64)).astype(np.float32) for _ in range(2))

    def step(X, G):
        y = F.softmax(X, 1)
        y.backward(G)
        return y.detach()

    X = tt.tensor(x, requires_grad=True)
    (ye, ge), names = run_noting_kernels(lambda: (step(X, tt.tensor(g)).numpy(), X.grad.numpy()))
    assert "softmax_mid" in names
    compiled = tt.compile(step)
    for _ in range(2):
        X.grad = None
        yc = compiled(X, tt.tensor(g)).numpy()
    assert _same_bits(yc, ye) and _same_bits(X.grad.numpy(), ge)


@needs_cc
def test_a_nan_constant_leaves_the_op_to_numpy():
    # C's nan literal would not keep the sign and payload NumPy's arithmetic gives x * nan
    x = np.random.default_rng(12).standard_normal((64, 1024)).astype(np.float32)
    x[0, 0] = -np.nan
    X = tt.tensor(x)
    got, names = run_noting_kernels(lambda: F.leaky_relu(X, float("nan")).numpy())
    assert "leaky_relu" not in names
    assert got.tobytes() == numpy_path(lambda: F.leaky_relu(X, float("nan")).numpy()).tobytes()
