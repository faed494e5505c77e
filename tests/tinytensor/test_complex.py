"""Complex tensors (issue 23): dtypes, promotion, printing, ops and torch's gradient
convention, each against torch in complex128 (values, first and second order)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.complex_check import check, crandn, rrandn

Z = crandn(3, 4)
W = crandn(3, 4, seed=2)
R = rrandn(3, 4)

CASES = {
    "add": (lambda m, a, b: a + b, Z, W),
    "sub": (lambda m, a, b: a - b, Z, W),
    "mul": (lambda m, a, b: a * b, Z, W),
    "div": (lambda m, a, b: a / b, Z, W),
    "mul_real": (lambda m, a, b: a * b, Z, R),
    "add_real_scalar_bcast": (lambda m, a, b: b[0] + a * 2.5, Z, R),
    "div_real_by_complex": (lambda m, a, b: b / a, Z, R),
    "mul_python_complex": (lambda m, a: a * (1 - 2j) + 3j, Z),
    "neg": (lambda m, a: -a, Z),
    "exp": (lambda m, a: m.exp(a), Z),
    "log": (lambda m, a: m.log(a), Z),
    "sqrt": (lambda m, a: m.sqrt(a), Z),
    "sin": (lambda m, a: m.sin(a), Z),
    "cos": (lambda m, a: m.cos(a), Z),
    "tanh": (lambda m, a: m.tanh(a), Z),
    "log1p": (lambda m, a: m.log1p(a), Z),
    "rsqrt": (lambda m, a: m.rsqrt(a), Z),
    "tan": (lambda m, a: m.tan(a * 0.3), Z),
    "sinh_cosh": (lambda m, a: m.sinh(a) * m.cosh(a * 0.5), Z),
    "expm1": (lambda m, a: m.expm1(a), Z),
    "cumsum": (lambda m, a: m.cumsum(a, 1), Z),
    "square": (lambda m, a: a ** 2, Z),
    "cube": (lambda m, a: a ** 3, Z),
    "sum": (lambda m, a: a.sum(), Z),
    "sum_dim": (lambda m, a: a.sum(1, keepdim=True), Z),
    "mean": (lambda m, a: a.mean(0), Z),
    "matmul": (lambda m, a, b: a @ b.mT, Z, W),
    "matmul_batched": (lambda m, a, b: a.reshape(3, 2, 2) @ b.reshape(3, 2, 2), Z, W),
    "matmul_real_complex": (lambda m, a, b: b.to(a.dtype) @ a.T, Z, R),
    "einsum": (lambda m, a, b: m.einsum("ij,kj->ik", a, b), Z, W),
    "reshape_permute": (lambda m, a: a.reshape(2, 2, 3).permute(2, 0, 1) * 1j, Z),
    "transpose_index": (lambda m, a: a.transpose(0, 1)[1:, ::2], Z),
    "advanced_index": (lambda m, a: a[[0, 2, 2], [1, 3, 0]], Z),
    "cat_stack": (lambda m, a, b: m.cat([a, m.stack([b[0], b[1]])], 0), Z, W),
    "flip_roll": (lambda m, a: m.roll(m.flip(a, [1]), 1, 0), Z),
    "expand": (lambda m, a: a[:, :1].expand(3, 5), Z),
    "where": (lambda m, a, b: m.where(b > 0, a, a * 2j), Z, R),
    "abs": (lambda m, a: m.abs(a), Z),
    "angle": (lambda m, a: m.angle(a), Z),
    "angle_real": (lambda m, a: m.angle(a - 0.5), R),
    "real": (lambda m, a: a.real * 3, Z),
    "imag": (lambda m, a: a.imag * 3, Z),
    "real_imag_fn": (lambda m, a: m.real(a) * m.imag(a), Z),
    "conj": (lambda m, a: m.conj(a) * a.exp(), Z),
    "conj_method": (lambda m, a: a.conj() * 2, Z),
    "conj_physical": (lambda m, a: m.conj_physical(a), Z),
    "resolve_conj": (lambda m, a: m.resolve_neg(m.resolve_conj(a.conj())), Z),
    "sgn": (lambda m, a: m.sgn(a), Z),
    "sgn_real": (lambda m, a: m.sgn(a), R),
    "complex": (lambda m, a, b: m.complex(a, b * 2), R, rrandn(3, 4, seed=5)),
    "complex_bcast": (lambda m, a, b: m.complex(a, b), R, rrandn(4, seed=5)),
    "polar": (lambda m, a, b: m.polar(a.abs(), b), R, rrandn(3, 4, seed=5)),
    "view_as_real": (lambda m, a: m.view_as_real(a) * 2, Z),
    "view_as_complex": (lambda m, a: m.view_as_complex(a.reshape(3, 2, 2)), R),
    "view_as_real_strided": (lambda m, a: m.view_as_real(a.T), Z),
    "mH": (lambda m, a: a.mH, Z),
    "cast_to_complex": (lambda m, a: a.to(torch.complex128 if m is torch else tt.complex128) * 1j, R),
    "cdouble": (lambda m, a: a.cdouble() * (1 + 1j), R),
    "abs_of_product": (lambda m, a, b: (a * b).abs().sum(), Z, W),
    "vdot": (lambda m, a, b: m.vdot(a[0], b[1]), Z, W),
    "isreal_where": (lambda m, a: m.where(m.isreal(a * a.real.round()), a, -a), Z),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_against_torch(name):
    fn, *arrays = CASES[name]
    check(fn, *arrays)


def test_zero_is_handled_as_torch():
    """|z| and sgn at 0: torch's first-order choice (0), not nan. (Second order at 0 is nan in
    torch, 0 here: not compared.)"""
    z = np.array([0j, 1 + 1j, -2j])
    check(lambda m, a: m.abs(a), z, double=False)
    check(lambda m, a: m.sgn(a), z, double=False)


def test_rope_as_in_llama_reference():
    """Meta's reference LLaMA rotary embedding, written as it is there, runs unchanged and
    matches torch, gradient included."""
    def precompute_freqs_cis(m, dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (m.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = m.arange(end, device=freqs.device)
        freqs = m.outer(t, freqs).float() if hasattr(m, "outer") else t[:, None].float() * freqs[None, :]
        return m.polar(m.ones_like(freqs), freqs)  # complex64

    def reshape_for_broadcast(freqs_cis, x):
        ndim = x.ndim
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(m, xq, xk, freqs_cis):
        xq_ = m.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = m.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = m.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = m.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)   # (B, T, heads, head_dim)
    k = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)
    results = []
    for m in (tt, torch):
        xq, xk = m.tensor(q, requires_grad=True), m.tensor(k, requires_grad=True)
        fc = precompute_freqs_cis(m, 8, 5)
        oq, ok = apply_rotary_emb(m, xq, xk, fc)
        ((oq * oq.detach().sin()).sum() + (ok ** 3).sum()).backward()
        results.append([oq, ok, xq.grad, xk.grad])
    for a, b in zip(*results):
        assert a.dtype.name == "float32" and b.dtype == torch.float32
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a, b, expected", [
    ("float32", "complex64", "complex64"), ("float64", "complex64", "complex128"),
    ("int64", "complex64", "complex64"), ("complex64", "complex128", "complex128"),
    ("bool", "complex128", "complex128"), ("float16", "complex64", "complex64")])
def test_promotion_dimensioned(a, b, expected):
    x, y = tt.ones(2, dtype=a), tt.ones(2, dtype=b)
    assert (x + y).dtype is getattr(tt, expected)
    assert tt.result_type(x, y) is getattr(tt, expected)
    if a != "float16":   # torch's float16 + complex64 agrees; chalf cases are not compared
        assert str((torch.ones(2, dtype=getattr(torch, a)) + torch.ones(2, dtype=getattr(torch, b))
                    ).dtype) == f"torch.{expected}"


@pytest.mark.parametrize("dim_dtype, zero_dim, expected", [
    ("float32", "complex128", "complex64"), ("float64", "complex64", "complex128"),
    ("int64", "complex128", "complex128"), ("complex64", "float64", "complex64"),
    ("float64", 1j, "complex128"), ("float32", 1j, "complex64"), ("int32", 2j, "complex64")])
def test_promotion_zero_dim_and_scalars(dim_dtype, zero_dim, expected):
    def run(m):
        x = m.ones(2, dtype=getattr(m, dim_dtype))
        s = zero_dim if isinstance(zero_dim, complex) else m.tensor(1, dtype=getattr(m, zero_dim))
        return str((x + s).dtype).split(".")[-1]
    assert run(tt) == run(torch) == expected


def test_creation():
    assert tt.tensor(1j).dtype is tt.complex64 and tt.tensor([1, 2j]).dtype is tt.cfloat
    assert tt.tensor([1 + 1j], dtype=tt.cdouble).dtype is tt.complex128
    assert tt.zeros(2, 3, dtype=tt.complex64).dtype is tt.complex64
    assert tt.ones(2, dtype="complex128").numpy().tolist() == [1 + 0j, 1 + 0j]
    assert tt.float64.is_complex is False and tt.complex128.is_complex
    assert tt.complex128.to_real() is tt.float64 and tt.is_complex(tt.tensor([1j]))
    assert not tt.tensor([1.0]).is_complex() and tt.tensor([1j]).is_complex()
    old = tt.get_default_dtype()
    tt.set_default_dtype(tt.float64)
    try:
        assert tt.tensor(1j).dtype is tt.complex128
    finally:
        tt.set_default_dtype(old)


def test_randn_and_rand_complex_as_torch():
    """randn: each part N(0, 1/2), so E|z|^2 = 1; rand: each part uniform on [0, 1)."""
    tt.manual_seed(0)
    z = tt.randn(20000, dtype=tt.complex64).numpy()
    assert z.dtype == np.complex64
    assert abs(z.real.var() - 0.5) < 0.03 and abs(z.imag.var() - 0.5) < 0.03
    assert abs(np.mean(z.real * z.imag)) < 0.02
    u = tt.rand(5000, dtype=tt.complex128).numpy()
    assert u.real.min() >= 0 and u.real.max() < 1 and u.imag.min() >= 0 and abs(u.imag.mean() - 0.5) < 0.03


def test_chalf_refused_with_reason():
    for name in ("complex32", "chalf"):
        with pytest.raises(TypeError, match="NumPy has no complex32"):
            tt.zeros(2, dtype=name)


@pytest.mark.parametrize("values, dtype", [
    ([1 + 2j, 3 - 1j], "complex64"), ([[1 + 2j, 3.5 - 1j], [0, 1e-5j]], "complex128"),
    ([0.3120 + 1.3151j, -0.3496 + 0.9223j], "complex64"), ([1.5 + 2j], "complex64"),
    ([complex("nan") + 1j, 2 - 3.25j], "complex128"), ([1e10 + 1j, -3j], "complex64")])
def test_printing_as_torch(values, dtype):
    a = tt.tensor(values, dtype=dtype)
    b = torch.tensor(values, dtype=getattr(torch, dtype))
    assert repr(a).replace("tinytensor.", "torch.") == repr(b)


def test_real_view_writes_through():
    """x.real and x.imag are views, as torch: an in-place write changes x."""
    x = tt.tensor([1 + 2j, 3 - 1j], dtype=tt.complex128)
    x.real.mul_(10) if hasattr(x.real, "mul_") else None
    assert x.numpy().tolist() == [10 + 2j, 30 - 1j]


@pytest.mark.parametrize("op", [
    lambda x: x.max(), lambda x: x < x, lambda x: x.clamp(0, 1), lambda x: x.floor(),
    lambda x: x.sign(), lambda x: x.sort(), lambda x: tt.maximum(x, x), lambda x: x.argmax(),
    lambda x: x.relu(), lambda x: x.sigmoid()])
def test_unsupported_ops_refuse_by_name(op):
    x = tt.tensor([1 + 2j, 3 - 1j])
    with pytest.raises((TypeError, RuntimeError), match="complex"):
        op(x)


def test_equality_works():
    x = tt.tensor([1 + 2j, 3 - 1j])
    assert (x == tt.tensor([1 + 2j, 3 + 1j])).tolist() == [True, False]
    assert (x != x).tolist() == [False, False]


def test_backward_of_complex_scalar_refused():
    x = tt.tensor([1 + 2j], requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar"):
        x.sum().backward()
    x.abs().sum().backward()   # a real loss is fine
    np.testing.assert_allclose(x.grad.numpy(), np.array([1 + 2j]) / abs(1 + 2j), rtol=1e-6)


def test_complex_and_polar_refuse_mixed_dtypes():
    with pytest.raises(TypeError, match="complex: expected both real and imag"):
        tt.complex(tt.ones(2), tt.ones(2, dtype=tt.float64))
    with pytest.raises(RuntimeError, match="view_as_complex"):
        tt.view_as_complex(tt.ones(3, 3))
    with pytest.raises(RuntimeError, match="imag"):
        tt.imag(tt.ones(2))


def test_real_of_real_is_itself_and_conj_of_real_too():
    x = tt.ones(3)
    assert tt.real(x) is x and tt.conj(x) is x and not x.is_conj()


def test_compile_refuses_complex_by_name():
    """The compiler's IR and kernels are real-valued: a complex step is refused with a
    CaptureError naming the op, the dtype and the user's line, never compiled wrong."""
    from tinytensor.compiler.capture import CaptureError

    def step(x):
        return tt.view_as_real(tt.polar(x, x * 2)).sum()   # complex made inside the step

    def step2(z):
        return (z * z).abs().sum()                          # complex argument

    x = tt.ones(3)
    with pytest.raises(CaptureError, match=r"op 'polar' at .*test_complex.py.*complex64"):
        tt.compile(step)(x)
    with pytest.raises(CaptureError, match=r"op 'mul' .*complex128"):
        tt.compile(step2)(tt.tensor([1 + 1j], dtype=tt.complex128))
    assert tt.compile(lambda x: (x * 2).sum())(x).item() == 6.0   # real steps still compile
