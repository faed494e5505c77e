"""Training-mode batch norm as one op with C kernels (ops/batch_norm.py, kernels/
c_batch_norm.py): against torch in float64 (values, gradients, double backward, forward
mode, running statistics), against the NumPy reference path (the decomposition, the C
kernels off) within a stated bound, the same bits at one and two threads, nan and inf as
the reference gives them, and every call the kernels do not take left to the reference."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F, nn
from tinytensor.kernels import c_batch_norm
from tests.eager_c import needs_cc, numpy_path, run_noting_kernels
from .oracle import check

pytestmark = needs_cc

TF = torch.nn.functional
KERNELS = {"batch_norm_forward", "batch_norm_backward"}
# the kernels' sums (double lanes) against the decomposition's (the input's dtype, NumPy's
# pairwise order): this many ulp of the magnitude of what each result sums, at most
# (measured on these cases and seeds 0-2: at most 3.1 in float32, 5.4 in float64, the input
# gradient of 4 values per channel; most under 2.3)
ULPS = 8


def _data(shape, dt, seed=0, scale=3.0, shift=1.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * scale + shift).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    w = rng.uniform(0.5, 1.5, c).astype(dt)
    b = rng.standard_normal(c).astype(dt)
    return x, g, w, b


def _run(x, g, w, b, momentum=0.1, affine=True):
    """(y, dx, dw, db, running mean, running var) of one training call and its backward."""
    X = tt.tensor(x, requires_grad=True)
    W, B = (tt.tensor(v, requires_grad=True) for v in (w, b)) if affine else (None, None)
    rm, rv = tt.tensor(np.linspace(-1, 1, x.shape[1]).astype(x.dtype)), tt.ones(x.shape[1], dtype=X.dtype)
    y = F.batch_norm(X, rm, rv, W, B, training=True, momentum=momentum)
    y.backward(tt.tensor(g))
    grads = [X.grad.numpy()] + ([W.grad.numpy(), B.grad.numpy()] if affine else [])
    return [y.detach().numpy()] + grads + [rm.numpy(), rv.numpy()]


def _bounds(x, g, w, b, dt):
    """Per result, ULPS ulp of the magnitude of its terms: |x - mean| |rstd w| + |b| (and
    the mean's own size, scaled, for its rounding) for y; rstd |w| (|g| + mean|g| + |xhat|
    mean|g xhat|) for dx; the channel sums of |g xhat| (and |g| times the mean's rounding)
    and |g|; the statistics' sums."""
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    dims = (0,) + tuple(range(2, x.ndim))
    sh = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    mu = x64.mean(dims, keepdims=True)
    var = ((x64 - mu) ** 2).mean(dims, keepdims=True)
    rs = 1 / np.sqrt(var + 1e-5)
    xh = (x64 - mu) * rs
    aw = np.abs(w.astype(np.float64)).reshape(sh)
    ag = np.abs(g64)
    e = ULPS * np.finfo(dt).eps
    y = e * ((np.abs(x64 - mu) + np.abs(x64).mean(dims, keepdims=True)) * rs * aw + np.abs(b).reshape(sh))
    dx = e * rs * aw * (ag + ag.mean(dims, keepdims=True) + np.abs(xh) * (ag * np.abs(xh)).mean(dims, keepdims=True))
    rm = e * (0.1 * np.abs(x64).mean(dims) + 1)
    rv = e * (0.1 * n / (n - 1) * ((np.abs(x64) + np.abs(mu)) ** 2).mean(dims) + 1)
    # the weight's gradient also carries the mean's rounding (|mean| ulp, times rstd, on every
    # xhat): with few values per channel that is as large as its sum
    dw = e * ((ag * np.abs(xh)).sum(dims) + (rs * np.abs(x64).mean(dims, keepdims=True)).reshape(-1) * ag.sum(dims))
    return [y, dx, dw, e * ag.sum(dims), rm, rv]


def _torch(x, g, w, b, momentum=0.1):
    X, W, B = (torch.tensor(v.astype(np.float64), requires_grad=True) for v in (x, w, b))
    rm = torch.tensor(np.linspace(-1, 1, x.shape[1]))
    rv = torch.ones(x.shape[1], dtype=torch.float64)
    y = TF.batch_norm(X, rm, rv, W, B, training=True, momentum=momentum)
    y.backward(torch.tensor(g.astype(np.float64)))
    return [y.detach().numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy(), rm.numpy(), rv.numpy()]


SHAPES = [(8, 64, 16, 16),          # a ResNet layer
          (3, 5, 7, 313),           # odd runs: the lanes' tails
          (2, 1, 128, 129),         # one channel
          (1, 8192, 2, 2),          # the fewest values a channel the kernels take has: N*S = 4
          (1, 2, 256, 256),         # long runs, several flushes of the lanes per row
          (4, 16, 8, 8, 9)]         # 5-d (BatchNorm3d)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernels_agree_with_the_numpy_path_and_torch(dt, shape):
    x, g, w, b = _data(shape, dt)
    got, ran = run_noting_kernels(_run, x, g, w, b)
    assert KERNELS <= ran
    ref = numpy_path(_run, x, g, w, b)
    th = _torch(x, g, w, b)
    for name, a, r, t, bound in zip(["y", "dx", "dw", "db", "running_mean", "running_var"],
                                    got, ref, th, _bounds(x, g, w, b, dt)):
        assert a.dtype == dt and a.shape == r.shape, name
        assert (np.abs(a - r) <= bound).all(), (name, np.max(np.abs(a - r) / bound))
        # as close to torch's float64 as the NumPy path is, within the same bound
        assert (np.abs(a - t) <= np.abs(r - t) + bound).all(), name


def test_without_affine_parameters_and_with_a_weight_only():
    x, g, w, b = _data((4, 8, 32, 33), np.float64)
    got, ran = run_noting_kernels(_run, x, g, w, b, 0.1, False)
    assert KERNELS <= ran
    th = _torch(x, g, np.ones_like(w), np.zeros_like(b))
    for a, t in zip(got[:2] + got[2:], th[:2] + th[4:]):
        np.testing.assert_allclose(a, t, rtol=0, atol=1e-12)
    X, W = tt.tensor(x, requires_grad=True), tt.tensor(w, requires_grad=True)
    F.batch_norm(X, None, None, W, None, training=True).backward(tt.tensor(g))
    T, TW = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    TF.batch_norm(T, None, None, TW, None, training=True).backward(torch.tensor(g))
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(W.grad.numpy(), TW.grad.numpy(), rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("shape", [(4, 6, 40, 36), (2, 1, 64, 300)])
def test_values_gradients_and_double_backward_match_torch(shape):
    """compare_with_torch in float64: the values, the gradients of x, weight and bias, and
    the gradients of those (the op's backward in ops, create_graph)."""
    def fn(m, x, w, b):
        rm, rv = m.zeros(shape[1], dtype=x.dtype), m.ones(shape[1], dtype=x.dtype)
        y = (tt.functional if m is tt else TF).batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
        return y, rm, rv
    _, ran = run_noting_kernels(check, fn, [shape, (shape[1],), (shape[1],)])
    assert "batch_norm_forward" in ran


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")   # torch.func's own
def test_forward_mode_matches_torch():
    x, g, w, b = _data((4, 6, 40, 36), np.float64)
    rng = np.random.default_rng(1)
    tx, tw, tb = rng.standard_normal(x.shape), rng.standard_normal(w.shape), rng.standard_normal(b.shape)
    f = lambda lib, Fn: lambda x, w, b: Fn.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    (y, ty), ran = run_noting_kernels(lambda: tt.func.jvp(f(tt, F), tuple(tt.tensor(v) for v in (x, w, b)),
                                                          tuple(tt.tensor(v) for v in (tx, tw, tb))))
    assert "batch_norm_forward" in ran
    Y, TY = torch.func.jvp(f(torch, TF), tuple(torch.tensor(v) for v in (x, w, b)),
                           tuple(torch.tensor(v) for v in (tx, tw, tb)))
    np.testing.assert_allclose(y.numpy(), Y.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ty.numpy(), TY.numpy(), rtol=0, atol=1e-11)


def test_the_bits_do_not_depend_on_the_thread_count():
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    x, g, w, b = _data((8, 64, 32, 33), np.float32)   # past SPLIT_ELEMENTS: split into parts
    assert x.size >= 2 * threads.SPLIT_ELEMENTS
    before = blas.get()
    outs = []
    try:
        for n in (1, 2, 1, 2):
            blas.set(n)
            outs.append(_run(x, g, w, b))
    finally:
        blas.set(before)
    for other in outs[1:]:
        for u, v in zip(outs[0], other):
            assert u.tobytes() == v.tobytes()


def test_nan_and_inf_give_the_reference_pattern():
    x, g, w, b = _data((4, 8, 32, 32), np.float32)
    x[1, 0, 3, 4] = np.nan
    x[2, 1, 0, 0] = np.inf
    x[0, 2, 5, 5], x[3, 2, 6, 6] = np.inf, -np.inf
    x[0, 3, 1, 1] = -np.inf
    g[1, 4, 2, 2] = np.nan
    got, ran = run_noting_kernels(_run, x, g, w, b)
    assert KERNELS <= ran
    ref = numpy_path(_run, x, g, w, b)
    for a, r, bound in zip(got, ref, _bounds(np.nan_to_num(x, posinf=0, neginf=0), g, w, b, np.float32)):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(r))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(r))
        np.testing.assert_array_equal(a[np.isinf(a)], r[np.isinf(r)])
        finite = np.isfinite(r)
        assert finite.any()
        assert (np.abs(a - r)[finite] <= np.broadcast_to(bound, a.shape)[finite] * 10).all()


def _no_kernel(fn, *args):
    out, ran = run_noting_kernels(fn, *args)
    assert not (KERNELS & ran), ran
    return out


@pytest.mark.parametrize("make", [
    lambda x: x[:, :, :, ::2],                                  # not contiguous
    lambda x: x[:1, :2],                                        # fewer than MIN_ELEMENTS
    lambda x: x.reshape(8 * 16, 64 * 16)[:, :64],               # (N, C): BatchNorm1d's layout
    lambda x: x.reshape(1024, 64, 2),                           # spatial runs of 2 < MIN_S
], ids=["strided", "small", "2d", "short_runs"])
def test_calls_the_kernels_do_not_take_run_the_reference(make):
    """`make` takes (8, 64, 16, 16) to the input, as the same ops in both libraries."""
    x, *_ = _data((8, 64, 16, 16), np.float64)
    X, T = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    c = make(x).shape[1]
    rng = np.random.default_rng(2)
    w, b, g = rng.uniform(0.5, 1.5, c), rng.standard_normal(c), rng.standard_normal(make(x).shape)
    W, B = (tt.tensor(v, requires_grad=True) for v in (w, b))
    y = _no_kernel(lambda: F.batch_norm(make(X), None, None, W, B, training=True))
    _no_kernel(lambda: y.backward(tt.tensor(g)))
    TW, TB = (torch.tensor(v, requires_grad=True) for v in (w, b))
    ty = TF.batch_norm(make(T), None, None, TW, TB, training=True)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=1e-12)
    for a, t in ((X, T), (W, TW), (B, TB)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-11)


def test_fusion_off_and_vmap_run_the_reference():
    x, g, w, b = _data((8, 64, 16, 16), np.float64)
    with tt.kernels.use_fusion(False, ops="batch_norm"):
        off = _no_kernel(_run, x, g, w, b)
    on = _run(x, g, w, b)
    for a, r in zip(on, off):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12)
    f = lambda x: F.batch_norm(x, None, None, training=True)  # noqa: E731
    xs = np.stack([x, x[::-1] * 2])
    got = _no_kernel(lambda: tt.func.vmap(f)(tt.tensor(xs)))
    for k in range(2):
        ref = TF.batch_norm(torch.tensor(xs[k]), None, None, training=True)
        np.testing.assert_allclose(got.numpy()[k], ref.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_a_module_step_leaves_torchs_running_statistics_and_eval_is_untouched(momentum):
    """nn.BatchNorm2d training steps (momentum None: the 0-d tensor factor 1/n) then eval, in
    float64, against torch's module."""
    ours = nn.BatchNorm2d(32, momentum=momentum, dtype=tt.float64)
    theirs = torch.nn.BatchNorm2d(32, momentum=momentum, dtype=torch.float64)
    rng = np.random.default_rng(4)
    for step in range(2):
        x = rng.standard_normal((4, 32, 16, 17)) * (step + 1) + step
        (y, ran) = run_noting_kernels(ours, tt.tensor(x))
        assert "batch_norm_forward" in ran
        ty = theirs(torch.tensor(x))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=1e-12)
        for k in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(ours, k).numpy(), getattr(theirs, k).numpy(), rtol=1e-14, atol=1e-15)
    assert ours.num_batches_tracked.item() == 2
    ours.eval(), theirs.eval()
    x = rng.standard_normal((4, 32, 16, 17))
    y = _no_kernel(ours, tt.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("c", marks=pytest.mark.slow)])
def test_a_compiled_step_equals_eager_with_its_running_statistics(backend):
    """tt.compile captures the fused op as itself (kernels/fusion.py CAPTURED: its replay runs
    the same kernels forward and backward, so the numpy backend gives eager's bits) and the
    update of the running statistics from its outputs (replayed at every call)."""
    def make():
        tt.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, dtype=tt.float64),
                             nn.BatchNorm2d(16, dtype=tt.float64))

    def step(model, opt, x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    eager, comp = make(), make()
    opt_e, opt_c = (nn.optim.SGD(m.parameters(), lr=0.1) for m in (eager, comp))
    fast = tt.compile(step, backend=backend)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = tt.tensor(rng.standard_normal((4, 3, 24, 24)))
        le, ran = run_noting_kernels(step, eager, opt_e, x)
        assert "batch_norm_forward" in ran
        lc = fast(comp, opt_c, x)
        exact = backend == "numpy"   # the C backend's own kernels for the convolution: not its bits
        np.testing.assert_allclose(lc.item(), le.item(), rtol=0 if exact else 1e-12)
        for k, v in eager.state_dict().items():
            np.testing.assert_allclose(comp.state_dict()[k].numpy(), v.numpy(), rtol=0 if exact else 1e-11,
                                       atol=0 if exact else 1e-13, err_msg=k)


def test_refuses_what_it_does_not_take():
    x, g, w, b = _data((8, 64, 16, 16), np.float32)
    mu, rs = np.zeros(64, np.float32), np.ones(64, np.float32)
    assert c_batch_norm.forward(x[:, :, :, ::2], w, b, 1e-5) is None                 # not contiguous
    assert c_batch_norm.forward(x, w.astype(np.float64), b, 1e-5) is None            # mixed dtypes
    assert c_batch_norm.forward(x, w[:8], b, 1e-5) is None                           # not one per channel
    assert c_batch_norm.forward(x[:1, :2], w[:2], b[:2], 1e-5) is None               # small
    assert c_batch_norm.forward(x.reshape(1024, 64, 2), w, b, 1e-5) is None          # runs < MIN_S
    assert c_batch_norm.backward(g, x, w, mu.astype(np.float64), rs) is None         # stats' dtype
    assert c_batch_norm.backward(g[:4], x, w, mu, rs) is None                        # shapes
    assert c_batch_norm.forward(x, w, b, 1e-5) is not None


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_fused_op_s_fallbacks_give_the_reference_s_bits(affine, dt):
    # a replay of the recorded op (tt.compile, dynamic=True) at a size the kernels refuse
    # runs these fallbacks; eager at that size runs the reference itself: same bits
    from tinytensor.ops import batch_norm as bn
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5, 6)).astype(dt)
    w, b = (rng.standard_normal(4).astype(dt) for _ in range(2)) if affine else (None, None)
    g = rng.standard_normal(x.shape).astype(dt)
    X = tt.tensor(x, requires_grad=True)
    W, B = (tt.tensor(a, requires_grad=True) for a in (w, b)) if affine else (None, None)
    y = F.batch_norm(X, None, None, W, B, True)
    y.backward(tt.tensor(g))
    fy, mu, _, rstd = bn._reference_forward(x, w, b, 1e-5)
    dx, dw, db = bn._reference_backward(g, x, w, 1e-5)
    assert np.array_equal(fy, y.detach().numpy()) and np.array_equal(dx, X.grad.numpy())
    if affine:
        assert np.array_equal(dw, W.grad.numpy()) and np.array_equal(db, B.grad.numpy())
