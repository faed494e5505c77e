"""kernels/c_norm.py, the eager backward of layer_norm and rms_norm in one C pass: against
the NumPy path (its reference: the same arithmetic, NumPy's order of additions) and torch in
float64, the same bits at one and two threads, and the double backward (the ops' formula)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.kernels import c_eager, c_norm
from tests.eager_c import needs_cc

pytestmark = needs_cc

TF = torch.nn.functional
# the kernel's sums (LANES lanes per row, ROWS-row blocks for the columns) against NumPy's
# (pairwise rows, einsum's columns): this many ulp of the summed terms' magnitude, at most
ULPS = 8


def _data(rows, C, dt, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, C)) * 3 + 1).astype(dt)
    x[0, :4] = [0.0, -0.0, 20.0, -20.0]
    x[1, :] = 0.5          # a constant row: xhat 0, 1/std 1/sqrt(eps)
    g, w, b = (rng.standard_normal(s).astype(dt) for s in ((rows, C), C, C))
    return x, g, w, b


def _grads(x, g, w, b, rms, affine=True):
    X = tt.tensor(x, requires_grad=True)
    W = tt.tensor(w, requires_grad=True) if affine else None
    B = tt.tensor(b, requires_grad=True) if affine and not rms else None
    C = x.shape[-1]
    y = F.rms_norm(X, (C,), W, eps=1e-5) if rms else F.layer_norm(X, (C,), W, B)
    y.backward(tt.tensor(g))
    return [t.grad.numpy() for t in (X, W, B) if t is not None]


def _numpy_path(*args, **kw):
    prev = c_eager.set_enabled(False)
    try:
        return _grads(*args, **kw)
    finally:
        c_eager.set_enabled(prev)


def _torch(x, g, w, b, rms, affine=True):
    X = torch.tensor(x.astype(np.float64), requires_grad=True)
    W = torch.tensor(w.astype(np.float64), requires_grad=True) if affine else None
    B = torch.tensor(b.astype(np.float64), requires_grad=True) if affine and not rms else None
    C = x.shape[-1]
    y = TF.rms_norm(X, (C,), W, eps=1e-5) if rms else TF.layer_norm(X, (C,), W, B)
    y.backward(torch.tensor(g.astype(np.float64)))
    return [t.grad.numpy() for t in (X, W, B) if t is not None]


def _bound(x, g, w, rms, dt):
    """Per gradient, ULPS ulp of the magnitude of what it sums: |dx|'s row terms (|gy| |xhat|,
    |gy|, scaled by 1/std), and the columns of |g xhat| and |g| for the weight and bias."""
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    mu = 0 if rms else x64.mean(1, keepdims=True)
    rs = 1 / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    xh = (x64 - mu) * rs
    gy = np.abs(g64 * w)
    row = rs * (gy + np.abs(xh) * (gy * np.abs(xh)).mean(1, keepdims=True) + gy.mean(1, keepdims=True))
    eps = np.finfo(dt).eps
    return [ULPS * eps * row, ULPS * eps * np.abs(g64 * xh).sum(0), ULPS * eps * np.abs(g64).sum(0)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("rows,C", [(200, 256), (1000, 77)])   # blocks with a partial last one; C past the lanes
def test_the_kernel_agrees_with_the_numpy_path_and_torch(dt, rms, rows, C):
    x, g, w, b = _data(rows, C, dt)
    name = "rms_norm_backward" if rms else "layer_norm_backward"
    before = c_eager.calls.get(name, 0)
    got = _grads(x, g, w, b, rms)
    assert c_eager.calls.get(name, 0) == before + 1
    ref = _numpy_path(x, g, w, b, rms)
    th = _torch(x, g, w, b, rms)
    for a, r, t, bound in zip(got, ref, th, _bound(x, g, w, rms, dt)):
        assert a.dtype == dt and a.shape == r.shape
        assert (np.abs(a - r) <= bound).all()
        # as close to torch's float64 as the NumPy path is, within the same bound
        assert (np.abs(a - t) <= np.abs(r - t) + bound).all()


def test_without_affine_parameters_the_input_gradient_alone():
    x, g, w, b = _data(300, 128, np.float64)
    got, = _grads(x, g, w, b, False, affine=False)
    th, = _torch(x, g, w, b, False, affine=False)
    np.testing.assert_allclose(got, th, rtol=0, atol=1e-12)


def test_the_bits_do_not_depend_on_the_thread_count():
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    x, g, w, b = _data(4 * threads.SPLIT_ELEMENTS // 256 + 37, 256, np.float32)   # split into parts
    before = blas.get()
    outs = []
    try:
        for n in (1, 2, 1, 2):
            blas.set(n)
            outs.append(_grads(x, g, w, b, False))
    finally:
        blas.set(before)
    for other in outs[1:]:
        for u, v in zip(outs[0], other):
            assert u.tobytes() == v.tobytes()


@pytest.mark.parametrize("rms", [False, True])
def test_double_backward_matches_torch(rms):
    """The backward's own backward (create_graph: the ops' formula, not the kernel)."""
    x, g, w, b = _data(160, 256, np.float64)
    C = x.shape[-1]

    def second(lib, Fn, mk):
        X, W = mk(x), mk(w)
        B = mk(b) if not rms else None
        y = Fn.rms_norm(X, (C,), W, eps=1e-5) if rms else Fn.layer_norm(X, (C,), W, B)
        gx, gw = lib.autograd.grad((y * mk(g, False)).sum(), [X, W], create_graph=True)
        (gx * gx).sum().add((gw * gw).sum()).backward()
        return X.grad.numpy(), W.grad.numpy()
    got = second(tt, F, lambda a, r=True: tt.tensor(a, requires_grad=r))
    th = second(torch, TF, lambda a, r=True: torch.tensor(a, requires_grad=r))
    for a, t in zip(got, th):
        np.testing.assert_allclose(a, t, rtol=1e-10, atol=1e-10)


def test_refuses_what_it_does_not_take():
    x, g, w, _ = _data(200, 256, np.float32)
    mu, rs = np.zeros(200, np.float32), np.ones(200, np.float32)
    assert c_norm.backward(g, x[:, ::2], w[::2], mu, rs, False) is None          # not contiguous
    assert c_norm.backward(g.astype(np.float64), x, w, mu, rs, False) is None    # mixed dtypes
    assert c_norm.backward(g, x, w, mu.astype(np.float64), rs, False) is None    # stats' dtype
    assert c_norm.backward(g[:8], x[:8], w, mu[:8], rs[:8], False) is None       # small: NumPy's


def test_a_broadcast_gradient_takes_the_kernel():
    """A .sum() loss hands the norm a broadcast (non-contiguous) gradient: laid out, not refused
    (the NumPy path ran before)."""
    x, _, w, b = _data(300, 256, np.float64)
    before = c_eager.calls.get("layer_norm_backward", 0)
    X, W = tt.tensor(x, requires_grad=True), tt.tensor(w, requires_grad=True)
    F.layer_norm(X, (256,), W, tt.tensor(b)).sum().backward()
    assert c_eager.calls.get("layer_norm_backward", 0) == before + 1
    T, TW = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    TF.layer_norm(T, (256,), TW, torch.tensor(b)).sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(W.grad.numpy(), TW.grad.numpy(), rtol=0, atol=1e-10)
