"""Matrix and vector products (ops/products.py) against PyTorch: values, gradients and double
backward in float64, one case per line (fn(m, *inputs), m tinytensor or torch); beta = 0
ignoring NaN in input; cdist/dist's gradient at coincident points; errors by name; a
compiled program with addmm."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch, gradgradcheck
from .cases import table_tests
from .oracle import check

CASES = {
    "addmm": (lambda m, i, a, b: m.addmm(i, a, b), [(2, 4), (2, 3), (3, 4)]),
    "addmm_beta_alpha": (lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=-2), [(2, 4), (2, 3), (3, 4)]),
    "addmm_bias_row": (lambda m, i, a, b: m.addmm(i, a, b, alpha=3), [(4,), (2, 3), (3, 4)]),
    "addmm_beta0": (lambda m, i, a, b: m.addmm(i, a, b, beta=0), [(1, 4), (2, 3), (3, 4)]),
    "addmm_method": (lambda m, i, a, b: i.addmm(a, b, beta=2), [(2, 1), (2, 3), (3, 4)]),
    # HF GPT-2's Conv1D: x (B, T, nx) @ weight (nx, nf) + bias, through a 2-d view
    "conv1d_gpt2": (lambda m, x, w, bias: m.addmm(bias, x.reshape(-1, 3), w).reshape(2, 2, 5),
                    [(2, 2, 3), (3, 5), (5,)]),
    "baddbmm": (lambda m, i, a, b: m.baddbmm(i, a, b, beta=0.3, alpha=1.5), [(2, 3, 4), (2, 3, 2), (2, 2, 4)]),
    "baddbmm_bcast": (lambda m, i, a, b: i.baddbmm(a, b), [(3, 1), (2, 3, 2), (2, 2, 4)]),
    "addbmm": (lambda m, i, a, b: m.addbmm(i, a, b, beta=-1, alpha=0.5), [(3, 4), (2, 3, 2), (2, 2, 4)]),
    "addbmm_method": (lambda m, i, a, b: i.addbmm(a, b), [(4,), (3, 3, 2), (3, 2, 4)]),
    "addmv": (lambda m, i, a, v: m.addmv(i, a, v, beta=2, alpha=0.5), [(3,), (3, 4), (4,)]),
    "addmv_method": (lambda m, i, a, v: i.addmv(a, v), [(1,), (3, 4), (4,)]),
    "addr": (lambda m, i, a, b: m.addr(i, a, b, beta=0.5, alpha=2), [(3, 4), (3,), (4,)]),
    "addr_method": (lambda m, i, a, b: i.addr(a, b), [(4,), (3,), (4,)]),
    "addcmul": (lambda m, i, a, b: m.addcmul(i, a, b, value=-0.5), [(3, 4), (1, 4), (3, 1)]),
    "addcmul_method": (lambda m, i, a, b: i.addcmul(a, b), [(4,), (3, 4), (3, 4)]),
    "addcdiv": (lambda m, i, a, b: m.addcdiv(i, a, b + 3, value=2), [(3, 4), (3, 4), (4,)]),
    "addcdiv_method": (lambda m, i, a, b: i.addcdiv(a, b * b + 1), [(3, 1), (3, 4), (3, 4)]),
    "dot": (lambda m, a, b: m.dot(a, b), [(5,), (5,)]),
    "vdot": (lambda m, a, b: a.vdot(b), [(5,), (5,)]),
    "inner": (lambda m, a, b: m.inner(a, b), [(2, 3, 4), (5, 4)]),
    "inner_scalar": (lambda m, a, b: m.inner(a.sum(), b), [(2,), (3, 4)]),
    "outer": (lambda m, a, b: m.outer(a, b), [(3,), (4,)]),
    "ger": (lambda m, a, b: a.ger(b), [(3,), (2,)]),
    "mv": (lambda m, a, v: m.mv(a, v), [(3, 4), (4,)]),
    "mv_method": (lambda m, a, v: a.mv(v), [(2, 3), (3,)]),
    "kron": (lambda m, a, b: m.kron(a, b), [(2, 3), (3, 2)]),
    "kron_ranks": (lambda m, a, b: a.kron(b), [(2,), (2, 1, 3)]),
    "tensordot_int": (lambda m, a, b: m.tensordot(a, b, 2), [(2, 3, 4), (3, 4, 5)]),
    "tensordot_lists": (lambda m, a, b: m.tensordot(a, b, dims=([0, 2], [2, 0])), [(2, 3, 4), (4, 5, 2)]),
    "tensordot_0": (lambda m, a, b: m.tensordot(a, b, 0), [(2, 3), (2,)]),
    "tensordot_bcast": (lambda m, a, b: m.tensordot(a, b, ([1], [0])), [(2, 1), (3, 4)]),
    "trace": (lambda m, a: m.trace(a), [(3, 4)]),
    "trace_method": (lambda m, a: a.trace(), [(4, 2)]),
    "block_diag": (lambda m, a, b, c: m.block_diag(a, b, c.sum()), [(2, 3), (3,), (2,)]),
    "dist": (lambda m, a, b: m.dist(a, b), [(3, 4), (4,)]),
    "dist_p3": (lambda m, a, b: a.dist(b, 3), [(3, 4), (3, 4)]),
    "dist_p1": (lambda m, a, b: m.dist(a, b, 1), [(3, 4), (3, 4)]),
    "dist_p0_5": (lambda m, a, b: m.dist(a, b, 0.5), [(5,), (5,)]),
}
test_products, test_products_float32, test_products_cuda = table_tests(
    CASES, ["addmm_beta_alpha", "baddbmm", "addbmm", "addcdiv", "inner", "kron", "tensordot_lists",
            "dist_p3"], check)

# torch's cdist has no double backward (its _cdist_backward is not differentiable), and its
# dist at inf / -inf norms splits ties differently: first order against torch, second
# order against finite differences
CDIST = {
    "p2": (lambda m, a, b: m.cdist(a, b), [(3, 4), (2, 4)]),
    "p1": (lambda m, a, b: m.cdist(a, b, p=1), [(3, 4), (2, 4)]),
    "p3_batched": (lambda m, a, b: m.cdist(a, b, p=3), [(2, 3, 4), (1, 2, 4)]),
    "p0_5": (lambda m, a, b: m.cdist(a, b, 0.5), [(3, 2), (4, 2)]),
    "p1_5_mm_mode": (lambda m, a, b: m.cdist(a, b, 1.5, "use_mm_for_euclid_dist"), [(3, 2), (4, 2)]),
    "inf": (lambda m, a, b: m.cdist(a, b, math.inf), [(3, 4), (2, 4)]),
    "p0": (lambda m, a, b: m.cdist(a, b, 0), [(3, 4), (2, 4)]),
    "dist_inf": (lambda m, a, b: m.dist(a, b, math.inf), [(3, 4), (4,)]),
    "dist_neg_inf": (lambda m, a, b: m.dist(a, b, -math.inf), [(3, 4), (4,)]),
}


@pytest.mark.parametrize("name", list(CDIST))
def test_distances(name):
    fn, inputs = CDIST[name]
    compare_with_torch(lambda *xs: fn(tt, *xs), lambda *xs: fn(torch, *xs), inputs)
    if name == "p0":    # a count of nonzero differences: constant, no gradient to check
        return
    rng = np.random.default_rng(1)
    xs = [tt.tensor(rng.normal(size=s), requires_grad=True) for s in inputs]
    gradgradcheck(lambda *xs: fn(tt, *xs), xs)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf])
def test_distance_gradient_is_zero_where_points_coincide(p):
    """Rows of x1 equal to rows of x2: torch's gradient is 0 there, not 0/0."""
    a = np.array([[1.0, 2.0], [0.5, -1.0]])
    b = np.array([[1.0, 2.0], [3.0, 0.0]])
    x1, x2 = tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)
    t1, t2 = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = tt.cdist(x1, x2, p), torch.cdist(t1, t2, p)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x1.grad.numpy(), t1.grad.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(x2.grad.numpy(), t2.grad.numpy(), rtol=1e-12, atol=1e-15)
    d = tt.tensor(a, requires_grad=True)
    tt.dist(d, tt.tensor(a), p).backward()
    assert np.isfinite(d.grad.numpy()).all() and not d.grad.numpy().any()


@pytest.mark.parametrize("op, args", [
    ("addmm", [(2, 3), (3, 4)]), ("baddbmm", [(2, 2, 3), (2, 3, 4)]),
    ("addbmm", [(2, 2, 3), (2, 3, 4)]), ("addmv", [(2, 3), (3,)]), ("addr", [(2,), (4,)])])
def test_beta_zero_ignores_nan_and_inf_in_input(op, args):
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=s) for s in args]
    out_shape = getattr(torch, op)(torch.zeros(1, dtype=torch.float64), *map(torch.tensor, mats)).shape
    bad = np.full(out_shape, np.nan)
    bad.flat[0] = np.inf
    inp = tt.tensor(bad, requires_grad=True)
    out = getattr(tt, op)(inp, *[tt.tensor(a, requires_grad=True) for a in mats], beta=0, alpha=2)
    ref = getattr(torch, op)(torch.tensor(bad), *map(torch.tensor, mats), beta=0, alpha=2)
    assert np.isfinite(out.detach().numpy()).all()
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-12)
    g, = tt.grad(out.sum(), [inp], allow_unused=True)
    assert g is None or not g.numpy().any()   # torch: grad * beta = 0


def test_integer_products_keep_the_dtype():
    a = np.arange(6).reshape(2, 3)
    b = np.arange(12).reshape(3, 4) - 5
    for fn in (lambda m, a, b: m.addmm(m.ones(4, dtype=m.int64), a, b, beta=2, alpha=-3),
               lambda m, a, b: m.trace(a), lambda m, a, b: m.kron(a, b),
               lambda m, a, b: m.tensordot(a, b, 1), lambda m, a, b: m.block_diag(a, b)):
        out, ref = fn(tt, tt.tensor(a), tt.tensor(b)), fn(torch, torch.tensor(a), torch.tensor(b))
        assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_addcdiv_computes_in_the_common_dtype():
    """A bfloat16 tensor1 beside float64 input: the whole expression in float64 (torch's
    value), and tensor2's gradient exact (torch's own is ~1e-3 off here)."""
    rng = np.random.default_rng(0)
    i, t1, t2 = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(1, 4)) + 3
    ti, tt1 = torch.tensor(i), torch.tensor(t1).bfloat16()
    tt2 = torch.tensor(t2, dtype=torch.float32)
    x2 = tt.tensor(tt2.numpy(), requires_grad=True)
    out = tt.addcdiv(tt.tensor(i), tt.tensor(tt1.float().numpy()).to(tt.bfloat16), x2, value=3.14)
    ref = torch.addcdiv(ti, tt1, tt2, value=3.14)
    assert out.dtype == tt.float64
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-12)
    out.sum().backward()
    exact = (-3.14 * tt1.double().numpy() / tt2.double().numpy() ** 2).sum(0, keepdims=True)
    np.testing.assert_allclose(x2.grad.numpy(), exact, rtol=1e-6)


def test_real_opinfo_samples_of_addcmul_and_addcdiv():
    """Their conformance entries are known failures for complex samples only: every real
    sample is checked here (addcdiv's bfloat16 gradient case above)."""
    H = pytest.importorskip("tests.tinytensor.opinfo.harness")
    pytest.importorskip("expecttest")
    for name in ("addcmul", "addcdiv"):
        op, fn = H.opinfo(name), H.tinytensor_function(name)
        for s in H.strided(H.samples(name), 16):
            tensors = [t for t in (s.input, *s.args) if isinstance(t, torch.Tensor)]
            if any(t.is_complex() for t in tensors):
                continue
            grad = not (name == "addcdiv" and any(t.dtype == torch.bfloat16 for t in tensors))
            H.check_sample(op, fn, s, "float64", grad=grad)


@pytest.mark.parametrize("call, err, match", [
    (lambda: tt.addmm(tt.zeros(3), tt.zeros(2, 3), tt.zeros(2, 3)), Exception,
     r"addmm: shapes \(2, 3\) and \(2, 3\) cannot be multiplied"),
    (lambda: tt.addmm(tt.zeros(3, 3), tt.zeros(2, 3), tt.zeros(3, 4)), Exception,
     r"addmm: input of shape \(3, 3\) does not broadcast to the product's shape \(2, 4\)"),
    (lambda: tt.addmm(tt.zeros(4), tt.zeros(2, 3, 1), tt.zeros(3, 4)), Exception,
     r"addmm: mat1 must be a matrix"),
    (lambda: tt.baddbmm(tt.zeros(1), tt.zeros(2, 3, 4), tt.zeros(3, 4, 5)), Exception,
     r"baddbmm: batch1 \(2, 3, 4\) and batch2 \(3, 4, 5\) have different batch sizes"),
    (lambda: tt.addmm(tt.zeros(4, dtype=tt.int64), tt.zeros(2, 3, dtype=tt.int64),
                      tt.zeros(3, 4, dtype=tt.int64), beta=0.5), RuntimeError,
     r"addmm: for integral input tensors, argument beta must not be a floating point"),
    (lambda: tt.addcdiv(tt.zeros(2), tt.ones(2, dtype=tt.int64), tt.ones(2, dtype=tt.int64)),
     RuntimeError, r"addcdiv: integer division"),
    (lambda: tt.dot(tt.zeros(2), tt.zeros(3)), Exception, r"dot: vectors of shapes \(2,\) and \(3,\)"),
    (lambda: tt.dot(tt.zeros(2, dtype=tt.float64), tt.zeros(2)), RuntimeError, r"dot: expected both"),
    (lambda: tt.mv(tt.zeros(2, 3), tt.zeros(2)), Exception, r"mv: shapes \(2, 3\) and \(2,\)"),
    (lambda: tt.outer(tt.zeros(2, 2), tt.zeros(2)), Exception, r"outer: input must be a vector"),
    (lambda: tt.inner(tt.zeros(2, 3), tt.zeros(2)), Exception, r"inner: the last dimensions"),
    (lambda: tt.tensordot(tt.zeros(2, 3), tt.zeros(2, 3), 3), Exception, r"tensordot: dims 3 exceeds"),
    (lambda: tt.tensordot(tt.zeros(2, 3), tt.zeros(2, 3), ([0], [1])), Exception,
     r"tensordot: contracted dimensions 0 of shape \(2, 3\) and 1 of shape \(2, 3\) differ"),
    (lambda: tt.trace(tt.zeros(2, 2, 2)), Exception, r"trace: input must be a matrix"),
    (lambda: tt.block_diag(tt.zeros(2, 2, 2)), Exception, r"block_diag: input 0 must have 2 or fewer"),
    (lambda: tt.cdist(tt.zeros(2, 3), tt.zeros(2, 4)), Exception, r"cdist: x1 \(2, 3\) and x2 \(2, 4\)"),
    (lambda: tt.cdist(tt.zeros(2, 3), tt.zeros(2, 3), compute_mode="fast"), ValueError,
     r"cdist: 'fast' is not a valid value for compute_mode"),
    (lambda: tt.cdist(tt.zeros(2, 3), tt.zeros(2, 3), -1), Exception, r"cdist: p must be a non-negative"),
])
def test_errors_name_the_op(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_compiled_gpt2_conv1d_matches_eager():
    """addmm is a matmul plus an add on the tape: tt.compile lowers it, forward and backward,
    and a second input gets its own answer."""
    w = tt.tensor(np.random.default_rng(0).normal(size=(3, 5)), requires_grad=True)
    bias = tt.tensor(np.linspace(-1, 1, 5), requires_grad=True)

    def step(x):
        y = tt.addmm(bias, x.reshape(-1, 3), w, beta=0.5).reshape(2, 2, 5)
        loss = (y * y).sum() + tt.cdist(x[0], x[1]).sum()
        loss.backward()
        return loss

    compiled = tt.compile(step, backend="numpy")
    rng = np.random.default_rng(1)
    for _ in range(2):
        x = rng.normal(size=(2, 2, 3))
        w.grad = bias.grad = None
        got = compiled(tt.tensor(x)).item()
        g_w, g_b = w.grad.numpy().copy(), bias.grad.numpy().copy()
        w.grad = bias.grad = None
        want = step(tt.tensor(x)).item()
        assert got == pytest.approx(want, rel=1e-12)
        np.testing.assert_allclose(g_w, w.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(g_b, bias.grad.numpy(), rtol=1e-12)
