"""An adversarial pass at the eager C kernels (issue 29): kernels/c_eager.py, c_rows.py,
c_softmax.py, c_cross_entropy.py, c_attention.py, c_optim.py, compiler/eager_gemm.py.

Each test states what it attacks. A C path must give what the NumPy path gives
(c_eager.set_enabled(False)), bitwise or within the tolerance its module names, and agree
with torch in float64. The tests marked xfail(strict=True) are breaks found here: each
reason names the bug and the source line believed at fault, so that whoever fixes it
flips the mark. The others cover cases no earlier test did (grep'd): odd row lengths with
inf/nan/subnormal rows, double backward through ops whose forward ran C, a forked child
of a process whose pool ran eager kernels, thread counts for the later kernels, an
in-place change between two eager matmuls of one cached gemm job."""
import os
import select
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.kernels import c_attention, c_eager
from tests.eager_c import needs_cc, numpy_path, run_noting_kernels

pytestmark = needs_cc

TF = torch.nn.functional
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- breaks (xfail, strict)
def test_max_pool2d_window_of_padding_only_is_not_a_silent_wrong_value():
    x = np.random.default_rng(0).standard_normal((2, 2048, 4, 4))   # past MIN_ELEMENTS
    kw = dict(kernel_size=2, dilation=5, padding=1)
    X = tt.tensor(x, requires_grad=True)
    try:
        (y, i), ran = run_noting_kernels(lambda: F.max_pool2d(X, return_indices=True, **kw))
        y.backward(tt.ones_like(y))
    except (ValueError, IndexError, NotImplementedError):
        return   # a refusal is an answer: never a silent wrong one
    assert "max_pool2d" in ran
    T = torch.tensor(x, requires_grad=True)
    ty = TF.max_pool2d(T, **kw)
    ty.backward(torch.ones_like(ty))
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())   # -inf
    np.testing.assert_array_equal(X.grad.numpy(), T.grad.numpy())           # no gradient


_HUGE_ROW = textwrap.dedent("""
    import numpy as np, tinytensor as tt
    from tinytensor import functional as F
    n = 14 << 20   # one row of 14M float32: the row kernels' stack arrays pass 8 MiB
    x = np.zeros((1, n), np.float32)
    x[0, ::1000] = 1.0
    y = {op}.numpy()
    print("ok", float(y.astype(np.float64).sum()))
""")


@pytest.mark.parametrize("op, where", [
    ("F.softmax(tt.tensor(x), -1)", "kernels/c_softmax.py `int64_t lo_[C / 32 + 2], len[...]; leaf[...]`"),
    ("F.layer_norm(tt.tensor(x), (n,))", "compiler/codegen/rows.py:303-305, the generated row kernel's "
                                         "`lo[n / 32 + 2], len[...]; leaf[...]`"),
], ids=["softmax", "layer_norm"])
def test_a_very_long_row_does_not_crash_the_row_kernels(op, where):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TINYTENSOR_EAGER_KERNELS", None)
    p = subprocess.run([sys.executable, "-c", _HUGE_ROW.format(op=op)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("ok"), f"{where}: rc {p.returncode} {p.stderr[-300:]}"


def _adamw_with_grad_as_param(c_on, steps=3):
    from tinytensor import nn
    w = tt.tensor(np.random.default_rng(0).standard_normal((64, 48)), requires_grad=True)
    opt = nn.optim.AdamW([w], lr=1e-2, weight_decay=0.1)
    prev = c_eager.set_enabled(c_on)
    try:
        for _ in range(steps):
            w.grad = w.detach()   # the gradient is the parameter's own array
            assert np.shares_memory(w.grad.numpy(), w.detach().numpy())
            opt.step()
    finally:
        c_eager.set_enabled(prev)
    return w.detach().numpy()


def test_adamw_whose_gradient_is_its_parameter_gives_the_numpy_step_s_bits():
    before = c_eager.calls.get("adam", 0)
    got = _adamw_with_grad_as_param(True)
    assert c_eager.calls.get("adam", 0) == before + 3
    want = _adamw_with_grad_as_param(False)
    w = torch.tensor(np.random.default_rng(0).standard_normal((64, 48)), requires_grad=True)
    opt = torch.optim.AdamW([w], lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        w.grad = w.detach()
        opt.step()
    np.testing.assert_allclose(want, w.detach().numpy(), rtol=0, atol=1e-15)   # NumPy = torch
    assert got.tobytes() == want.tobytes()


def _gelu_grad(x):
    X = tt.tensor(x, requires_grad=True)
    with np.errstate(all="ignore"):
        F.gelu(X).backward(tt.tensor(np.ones_like(x)))
    return X.grad.numpy()


def test_float32_exact_gelu_gradient_at_infinity_is_the_numpy_path_s():
    x = np.random.default_rng(0).standard_normal(40000).astype(np.float32)
    x[:2] = [np.inf, -np.inf]
    got, ran = run_noting_kernels(_gelu_grad, x)
    assert "gelu_erf_slope" in ran
    want = numpy_path(_gelu_grad, x)
    T = torch.tensor(x[:2].astype(np.float64), requires_grad=True)
    TF.gelu(T).backward(torch.ones(2, dtype=torch.float64))
    assert np.isnan(want[:2]).all() and np.isnan(T.grad.numpy()).all()
    assert np.isnan(got[:2]).all()
    # elsewhere within the float kernel's stated bound of the NumPy path (float64 inside): 2 ulp
    # of the slope's larger term, cdf or x pdf, both below 1.1 (the slope itself crosses 0)
    np.testing.assert_allclose(got[2:], want[2:], rtol=0, atol=2 * np.spacing(np.float32(1.1)))


def test_float64_exact_gelu_of_a_huge_value_is_the_value_on_thenumpy_path():
    x = np.random.default_rng(0).standard_normal(40000)
    x[:3] = [1e308, np.finfo(np.float64).max, -1e308]
    c = F.gelu(tt.tensor(x)).numpy()
    want = TF.gelu(torch.tensor(x[:3])).numpy()
    np.testing.assert_array_equal(c[:3], want)           # the C path: torch's values
    np.testing.assert_array_equal(numpy_path(lambda: F.gelu(tt.tensor(x)).numpy())[:3], want)


def test_causal_attention_with_a_nan_key_gives_the_numpy_path_s_nan_pattern(monkeypatch):
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1)   # the tests run one thread
    rng = np.random.default_rng(0)
    q, v, g = (rng.standard_normal((2, 4, 64, 32)) for _ in range(3))
    k = rng.standard_normal((2, 4, 64, 32))
    k[0, 0, 5, 1] = np.nan

    def run():
        Q, K, V = (tt.tensor(a, requires_grad=True) for a in (q, k, v))
        o = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
        o.backward(tt.tensor(g))
        return [a.numpy() for a in (o.detach(), Q.grad, K.grad, V.grad)]
    got, ran = run_noting_kernels(run)
    # the C backward stops at the causal edge (no 0 * nan): it steps aside for non-finite input
    assert "attention_forward" in ran and "attention_backward" not in ran
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1 << 30)
    want = run()
    for a, b in zip(got, want):
        assert np.array_equal(np.isnan(a), np.isnan(b))



@pytest.mark.parametrize("kw", [dict(lr=np.float64(1e-2)), dict(lr=1e-2, betas=(np.float64(0.9), np.float64(0.999))),
                                dict(lr=1e-2, weight_decay=np.float64(0.1))])
def test_adamw_with_numpy_float64_hyperparameters_gives_the_numpy_step_s_bits(kw):
    from tinytensor import nn

    def run(c_on):
        rng = np.random.default_rng(0)
        w = tt.tensor(rng.standard_normal((64, 48)).astype(np.float32), requires_grad=True)
        opt = nn.optim.AdamW([w], **kw)
        prev = c_eager.set_enabled(c_on)
        try:
            for _ in range(3):
                w.grad = tt.tensor(rng.standard_normal((64, 48)).astype(np.float32))
                opt.step()
        finally:
            c_eager.set_enabled(prev)
        return w.detach().numpy()
    got, ran = run_noting_kernels(run, True)
    # the C step computes in float32: it must step aside for NumPy's float64 arithmetic
    assert "adam" not in ran
    assert got.tobytes() == run(False).tobytes()
    kw = {k: float(v) if k != "betas" else tuple(map(float, v)) for k, v in kw.items()}
    assert "adam" in run_noting_kernels(run, True)[1]   # and only for those: with Python floats it runs


# both passes take NumPy's max's lanes from codegen/rows.numpy_max_lanes (c_softmax had 8 written in)
def test_softmax_row_pass_gives_the_generated_kernel_s_bytes_for_a_negative_nan():
    import importlib
    from tinytensor.kernels import c_softmax
    S = importlib.import_module("tinytensor.ops.softmax")
    x = np.random.default_rng(0).standard_normal((4000, 9)).astype(np.float32)
    x[0, 4] = -np.nan
    got = c_softmax.forward(x)
    want = c_eager.run("softmax", lambda t: S._forward_op(False)(t, -1), [x], ("rn",))[0]
    assert got.tobytes() == want.tobytes()


def test_the_kernels_refuse_non_native_byte_order():
    from tinytensor.kernels import c_rows
    x = np.random.default_rng(0).standard_normal((136, 256)).astype(">f4")
    got = c_rows.elementwise("gelu_erf", x)
    if got is not None:
        np.testing.assert_allclose(got, TF.gelu(torch.tensor(x.astype(np.float64))).numpy(), rtol=1e-5, atol=1e-6)



# the C probabilities step aside where a row's stats are not finite (ops/attention.py c_probs)
def test_causal_flash_attention_with_an_infinite_query_gives_the_numpy_path_s_nan_pattern(monkeypatch):
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1 << 30)   # not the small-head kernels: flash blocks
    rng = np.random.default_rng(0)
    q, g = rng.standard_normal((1, 2, 200, 16)), rng.standard_normal((1, 2, 200, 16))
    k, v = rng.standard_normal((1, 2, 300, 16)), rng.standard_normal((1, 2, 300, 16))
    q[0, 0, 3, :] = np.inf

    def run():
        Q, K, V = (tt.tensor(a, requires_grad=True) for a in (q, k, v))
        with np.errstate(all="ignore"):
            o = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
            o.backward(tt.tensor(g))
        return [a.numpy() for a in (o.detach(), Q.grad, K.grad, V.grad)]
    got, ran = run_noting_kernels(run)
    assert "flash_fwd" in ran and "flash_bwd" not in ran   # the backward stepped aside
    for a, b in zip(got, numpy_path(run)):
        assert np.array_equal(np.isnan(a), np.isnan(b))


# ---------------------------------------------------------------- regression tests (pass)
def _special_rows(shape, dt, seed):
    """Rows of every kind a row kernel must carry through: all -inf, one +inf, all +inf, a
    nan, zeros with a -0.0, subnormals, the largest finite values either sign, a -inf."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    fi = np.finfo(dt)
    x[0] = -np.inf
    x[1, 0] = np.inf
    x[2] = np.inf
    x[3, shape[-1] // 2] = np.nan
    x[4] = 0.0
    x[4, -1] = -0.0
    x[5] = fi.tiny / 4
    x[6] = fi.max
    x[7, 0] = -np.inf
    x[8] = -fi.max
    return x, rng.standard_normal(shape).astype(dt)


_ROW_OPS = {
    "softmax": lambda t: F.softmax(t, -1),
    "log_softmax": lambda t: F.log_softmax(t, -1),
    "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
    "rms_norm": lambda t: F.rms_norm(t, (t.shape[-1],)),
    "cumsum": lambda t: tt.cumsum(t, -1),
}


def _fwd_bwd(fn, x, g):
    X = tt.tensor(x, requires_grad=True)
    with np.errstate(all="ignore"):
        y = fn(X)
        y.backward(tt.tensor(g))
    return y.detach().numpy(), X.grad.numpy()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(40000, 1), (4000, 9), (37, 1001), (10, 4099)])
def test_row_kernels_on_odd_row_lengths_and_special_rows_match_thenumpy_path(shape, dt):
    """Row lengths of 1, below a vector, odd, past a pairwise block (the existing tests use
    256), 4000/37/10 rows (not a multiple of cumsum's 8-row blocks), rows of inf, nan,
    subnormals and the largest values: the same nan and inf places, finite values within
    a few ulp of the row's scale (cumsum bit for bit), forward and backward."""
    x, g = _special_rows(shape, dt, seed=shape[-1])
    eps = np.finfo(dt).eps
    for name, fn in _ROW_OPS.items():
        got, ran = run_noting_kernels(_fwd_bwd, fn, x, g)
        assert name in ran, (name, ran)
        want = numpy_path(_fwd_bwd, fn, x, g)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype == dt
            assert np.array_equal(np.isnan(a), np.isnan(b)), name
            assert np.array_equal(np.isposinf(a), np.isposinf(b)) and np.array_equal(np.isneginf(a), np.isneginf(b)), name
            fin = np.isfinite(a)
            if name == "cumsum":
                assert a[fin].tobytes() == b[fin].tobytes()
                continue
            rows = np.isfinite(x).all(-1) & (np.abs(x).max(-1) < 1e4)   # moderate rows: ulp bound
            scale = np.maximum(1.0, np.abs(np.where(np.isfinite(b), b, 0)).max(-1, keepdims=True))
            err = np.where(fin & rows[:, None], np.abs(a - b) / scale, 0)
            assert err.max() <= 64 * eps, (name, err.max())


def _double_backward_cases(rng):
    w = np.linspace(-1.5, 1.5, 256)
    t = rng.integers(0, 256, 136)
    return {
        "gelu": (F.gelu, TF.gelu, {"gelu_erf_slope"}),
        "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), {"gelu_tanh"}),
        "softmax": (lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1), {"softmax", "softmax_backward"}),
        "log_softmax": (lambda x: F.log_softmax(x, -1), lambda x: torch.log_softmax(x, -1), {"log_softmax"}),
        "layer_norm": (lambda x: F.layer_norm(x, (256,), tt.tensor(w), tt.tensor(w[::-1].copy())),
                       lambda x: TF.layer_norm(x, (256,), torch.tensor(w), torch.tensor(w[::-1].copy())), {"layer_norm"}),
        "cross_entropy": (lambda x: F.cross_entropy(x, tt.tensor(t), label_smoothing=0.1),
                          lambda x: TF.cross_entropy(x, torch.tensor(t), label_smoothing=0.1), {"cross_entropy"}),
        "silu": (F.silu, TF.silu, {"silu"}),
        "erf": (lambda x: x.erf(), torch.erf, {"erf"}),
    }


def test_double_backward_through_ops_whose_forward_ran_c_matches_torch():
    """The existing double-backward tests run below MIN_ELEMENTS (NumPy): here the forward
    (and the first backward where it is a kernel) run C, float64 against torch."""
    rng = np.random.default_rng(0)
    x, g, u = (rng.standard_normal((136, 256)) for _ in range(3))
    for name, (fn, tfn, kernels) in _double_backward_cases(rng).items():
        def ours():
            X = tt.tensor(x, requires_grad=True)
            y = fn(X)
            (gx,) = tt.grad(y, [X], grad_outputs=[tt.tensor(g)] if y.ndim else None, create_graph=True)
            (ggx,) = tt.grad((gx * tt.tensor(u)).sum(), [X])
            return gx.detach().numpy(), ggx.numpy()
        (gx, ggx), ran = run_noting_kernels(ours)
        assert kernels <= ran, (name, ran)
        T = torch.tensor(x, requires_grad=True)
        ty = tfn(T)
        (tgx,) = torch.autograd.grad(ty, [T], grad_outputs=[torch.tensor(g)] if ty.ndim else None, create_graph=True)
        (tggx,) = torch.autograd.grad((tgx * torch.tensor(u)).sum(), [T])
        np.testing.assert_allclose(gx, tgx.detach().numpy(), rtol=1e-12, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(ggx, tggx.numpy(), rtol=1e-12, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("causal", [True, False])
def test_double_backward_through_c_attention_matches_torch(monkeypatch, causal):
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1)   # the tests run one thread
    rng = np.random.default_rng(1)
    q, k, v, g, u = (rng.standard_normal((2, 4, 64, 32)) for _ in range(5))
    Q, K, V = (tt.tensor(a, requires_grad=True) for a in (q, k, v))
    o, ran = run_noting_kernels(lambda: F.scaled_dot_product_attention(Q, K, V, is_causal=causal))
    assert "attention_forward" in ran
    gs = tt.grad(o, [Q, K, V], grad_outputs=[tt.tensor(g)], create_graph=True)
    gg = tt.grad(sum((a * tt.tensor(u)).sum() for a in gs), [Q, K, V])
    TQ, TK, TV = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    s = TQ @ TK.transpose(-2, -1) / 32 ** 0.5   # torch's fused kernels have no double backward
    if causal:
        s = s.masked_fill(~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf"))
    to = torch.softmax(s, -1) @ TV
    tgs = torch.autograd.grad(to, [TQ, TK, TV], grad_outputs=[torch.tensor(g)], create_graph=True)
    tgg = torch.autograd.grad(sum((a * torch.tensor(u)).sum() for a in tgs), [TQ, TK, TV])
    for a, b in zip(gs + gg, tgs + tgg):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-11, atol=1e-12)


def _two_threads_or_skip():
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (os.cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    return blas


def _many_kernels(seed=0):
    """Outputs of the later kernels on inputs past SPLIT_ELEMENTS (split over the pool):
    cross-entropy forward and backward, log_softmax, cumsum, topk, max_pool2d, a matmul."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1088, 256)).astype(np.float32)   # 278528 > SPLIT_ELEMENTS
    t = rng.integers(0, 256, 1088)
    t[::7] = -100
    X = tt.tensor(x, requires_grad=True)
    F.cross_entropy(X, tt.tensor(t), label_smoothing=0.1).backward()
    L = tt.tensor(x, requires_grad=True)
    F.log_softmax(L, -1).backward(tt.tensor(x[::-1].copy()))
    out = [X.grad.numpy(), L.grad.numpy(), tt.cumsum(tt.tensor(x), -1).numpy(),
           tt.tensor(x).topk(9, -1)[1].numpy(),
           F.max_pool2d(tt.tensor(x.reshape(4, 17, 64, 64)), 3, stride=2, padding=1).numpy(),
           (tt.tensor(x[:512]) @ tt.tensor(x[:256].T.copy())).numpy()]
    return out


def test_later_kernels_give_the_same_bits_on_one_and_two_threads():
    """The existing thread test covers softmax, gelu and layer_norm: these are the later
    kernels (split by rows, never inside a sum). Not the matmul: at one thread it is NumPy's,
    at two a gemm job split by rows, which c_pool.py says keeps BLAS's bits only on some
    CPUs' kernels (here, Zen 5, it differs by ~2 ulp)."""
    blas = _two_threads_or_skip()
    before = blas.get()
    outs = []
    try:
        for n in (1, 2):
            blas.set(n)
            outs.append(_many_kernels())
    finally:
        blas.set(before)
    for a, b in zip(outs[0][:-1], outs[1][:-1]):
        assert a.tobytes() == b.tobytes()


def test_a_forked_child_of_a_process_whose_pool_ran_eager_kernels_computes_them_right():
    """Eager kernels keep their pool (_Kernel.pools) and gemm jobs (eager_gemm._jobs) across
    calls: in a child forked after the pool's workers started, those objects outlive the
    workers; the child must still compute every part, with the parent's bits, and not hang."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    blas = _two_threads_or_skip()
    before = blas.get()
    blas.set(2)
    try:
        want = _many_kernels(seed=3)      # the parent's pool is up, its jobs and kernels cached
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: no workers came along
            ok = 0
            try:
                got = _many_kernels(seed=3)
                ok = int(all(a.tobytes() == b.tobytes() for a, b in zip(got, want)))
            finally:
                os.write(w, bytes([ok]))
                os._exit(0)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 60)
        if not ready:
            os.kill(pid, 9)
        got = os.read(r, 1) if ready else b"hang"
        os.close(r)
        os.waitpid(pid, 0)
        assert got == b"\x01", got
    finally:
        blas.set(before)


def test_an_eager_matmul_after_its_inputs_change_in_place_reads_the_new_values(monkeypatch):
    """eager_gemm keeps one job per shape and skips re-pointing it when the pointers and
    strides are the last call's (GemmJob.set `_last`): an in-place change between two calls
    (same pointers) must still give the new product, and a new array (the heap hands back
    the freed address) too."""
    from tinytensor.compiler.codegen import threads
    if threads.blas() is None:
        pytest.skip("needs NumPy's OpenBLAS")
    monkeypatch.setattr(threads, "default_threads", lambda: 2)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((256, 300)), rng.standard_normal((300, 200))
    A, B = tt.tensor(a), tt.tensor(b)
    before = c_eager.calls.get("matmul", 0)
    first = (A @ B).numpy().copy()
    A.numpy()[...] = a[::-1]        # the same buffer, new values
    second = (A @ B).numpy()
    third = (tt.tensor(a * 2.0) @ B).numpy()
    assert c_eager.calls.get("matmul", 0) == before + 3
    for got, x in ((first, a), (second, a[::-1]), (third, a * 2.0)):
        np.testing.assert_allclose(got, x @ b, rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")   # torch.func's own
def test_forward_mode_through_ops_whose_forward_ran_c_matches_torch():
    """tt.func.jvp at C sizes (the existing jvp tests run below MIN_ELEMENTS), float64."""
    import tinytensor.func as tfunc
    rng = np.random.default_rng(2)
    x, t = rng.standard_normal((136, 256)), rng.standard_normal((136, 256))
    w = np.linspace(-1.0, 1.0, 256)
    cases = {"gelu_erf_slope": (F.gelu, TF.gelu),
             "softmax": (lambda a: F.softmax(a, -1), lambda a: torch.softmax(a, -1)),
             "log_softmax": (lambda a: F.log_softmax(a, -1), lambda a: torch.log_softmax(a, -1)),
             "layer_norm": (lambda a: F.layer_norm(a, (256,), tt.tensor(w)), lambda a: TF.layer_norm(a, (256,), torch.tensor(w))),
             "cumsum": (lambda a: tt.cumsum(a, -1), lambda a: torch.cumsum(a, -1))}
    for kernel, (fn, tfn) in cases.items():
        (y, jt), ran = run_noting_kernels(tfunc.jvp, fn, (tt.tensor(x),), (tt.tensor(t),))
        assert kernel in ran, (kernel, ran)
        ty, tjt = torch.func.jvp(tfn, (torch.tensor(x),), (torch.tensor(t),))
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-13, atol=1e-13, err_msg=kernel)
        np.testing.assert_allclose(jt.numpy(), tjt.numpy(), rtol=1e-12, atol=1e-13, err_msg=kernel)


@pytest.mark.parametrize("W", [2048, 2100])
def test_max_pool2d_rows_of_more_than_1024_windows_take_the_checked_loop_with_the_same_winners(W):
    """The C winners' fast loop keeps a row of windows in 1024-entry stack buffers (`OW <=
    1024`): W = 2048 (1024 windows, the fast loop) and 2100 (1050, the checked loop), with a
    nan and a run of -inf, give the NumPy path's winners, values and gradient bit for bit."""
    rng = np.random.default_rng(W)
    x = rng.standard_normal((1, 2, 16, W))
    x[0, 0, 3, 100] = np.nan
    x[0, 1, :, :50] = -np.inf

    def run():
        X = tt.tensor(x, requires_grad=True)
        y, i = F.max_pool2d(X, 2, stride=2, return_indices=True)
        y.backward(tt.ones_like(y))
        return y.detach().numpy(), i.numpy(), X.grad.numpy()
    got, ran = run_noting_kernels(run)
    assert "max_pool2d" in ran
    for a, b in zip(got, numpy_path(run)):
        assert a.tobytes() == b.tobytes()
    _, ti = TF.max_pool2d(torch.tensor(x), 2, stride=2, return_indices=True)
    np.testing.assert_array_equal(got[1][0, 1], ti.numpy()[0, 1])   # the channel without nan


def test_switching_the_kernels_between_forward_and_backward_keeps_the_gradients(monkeypatch):
    """What a C forward saves (cross-entropy's stats, attention's stats, the GELU's slope, the
    norms' mean and 1/std) must serve a NumPy backward and the reverse: the kernels switched
    off or on between the two (as a kernel that fails to build, or c_eager.set_enabled, does)."""
    monkeypatch.setattr(c_attention, "MIN_THREADS", 1)   # the tests run one thread
    rng = np.random.default_rng(4)
    x = rng.standard_normal((136, 256)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, 256).astype(np.float32)
    t = rng.integers(0, 256, 136)
    heads = lambda a: a.reshape(2, 4, 68, 64)   # noqa: E731
    cases = {"gelu_erf_slope": F.gelu,
             "log_softmax": lambda a: F.log_softmax(a, -1),
             "layer_norm": lambda a: F.layer_norm(a, (256,), tt.tensor(w), tt.tensor(w)),
             "cross_entropy": lambda a: F.cross_entropy(a, tt.tensor(t), label_smoothing=0.1, reduction="none"),
             "attention_forward": lambda a: F.scaled_dot_product_attention(heads(a), heads(a), heads(a), is_causal=True)}
    eps = np.finfo(np.float32).eps
    for kernel, fn in cases.items():
        grads = {}
        for fwd, bwd in ((False, False), (True, False), (False, True), (True, True)):
            X = tt.tensor(x, requires_grad=True)
            prev = c_eager.set_enabled(fwd)
            try:
                y, ran = run_noting_kernels(fn, X)
                assert (kernel in ran) == fwd, (kernel, ran)
                c_eager.set_enabled(bwd)
                y.backward(tt.ones_like(y))
            finally:
                c_eager.set_enabled(prev)
            grads[fwd, bwd] = X.grad.numpy()
        ref = grads[False, False]
        for key, got in grads.items():
            np.testing.assert_allclose(got, ref, rtol=0, atol=64 * eps * max(1.0, np.abs(ref).max()), err_msg=f"{kernel} {key}")
