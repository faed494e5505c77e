"""Tensor basics against PyTorch: creation functions, fields, conversions, repr, seeding."""
import numpy as np
import pytest
import torch

import tinytensor as tt


def same_meta(a, b):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert f"torch.{a.dtype.name}" == str(b.dtype), (a.dtype, b.dtype)


# one line per case: f(m) builds the tensor with module m (tinytensor or torch)
CREATION = [
    ("tensor_int", lambda m: m.tensor([1, 2, 3])),
    ("tensor_float", lambda m: m.tensor([1.0, 2])),
    ("tensor_bool", lambda m: m.tensor([True, False])),
    ("tensor_scalar", lambda m: m.tensor(3.5)),
    ("tensor_nested", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor_np_f64", lambda m: m.tensor(np.ones((2, 2)))),
    ("tensor_np_i32", lambda m: m.tensor(np.arange(3, dtype=np.int32))),
    ("tensor_dtype", lambda m: m.tensor([1, 2], dtype=m.float64)),
    ("tensor_f16", lambda m: m.tensor([1.5], dtype=m.float16)),
    ("tensor_empty", lambda m: m.tensor([])),
    ("zeros", lambda m: m.zeros(2, 3)),
    ("zeros_tuple", lambda m: m.zeros((2, 3))),
    ("zeros_scalar", lambda m: m.zeros(())),
    ("zeros_int", lambda m: m.zeros(4, dtype=m.int32)),
    ("ones", lambda m: m.ones(3, 1)),
    ("ones_bool", lambda m: m.ones(2, dtype=m.bool)),
    ("ones_f64", lambda m: m.ones([2, 2], dtype=m.float64)),
    ("full_int", lambda m: m.full((2,), 3)),
    ("full_float", lambda m: m.full((2, 2), 3.5)),
    ("full_bool", lambda m: m.full((2,), True)),
    ("full_dtype", lambda m: m.full((2,), 2.7, dtype=m.int64)),
    ("arange", lambda m: m.arange(5)),
    ("arange_start", lambda m: m.arange(2, 7)),
    ("arange_step", lambda m: m.arange(1, 10, 3)),
    ("arange_neg", lambda m: m.arange(5, 0, -2)),
    ("arange_float", lambda m: m.arange(0, 1, 0.25)),
    ("arange_float_end", lambda m: m.arange(2.5)),
    ("arange_dtype", lambda m: m.arange(4, dtype=m.float64)),
    ("linspace", lambda m: m.linspace(0, 1, 5)),
    ("linspace_neg", lambda m: m.linspace(-3, 3, 7, dtype=m.float64)),
    ("linspace_one", lambda m: m.linspace(2, 5, 1)),
    ("eye", lambda m: m.eye(3)),
    ("eye_rect", lambda m: m.eye(2, 4)),
    ("eye_int", lambda m: m.eye(2, dtype=m.int64)),
    ("zeros_like", lambda m: m.zeros_like(m.ones(2, 3, dtype=m.float64))),
    ("ones_like_int", lambda m: m.ones_like(m.arange(3))),
    ("ones_like_dtype", lambda m: m.ones_like(m.arange(3), dtype=m.float32)),
    ("full_like", lambda m: m.full_like(m.arange(3), 7)),
    ("full_like_float_into_int", lambda m: m.full_like(m.arange(3), 2.5)),
    ("full_like_float", lambda m: m.full_like(m.zeros(2), 2.5)),
    ("numpy_scalar_f64", lambda m: m.tensor(np.float64(2.5))),  # keeps its NumPy dtype
    ("numpy_scalar_i32", lambda m: m.tensor(np.int32(3))),
    ("numpy_scalar_f16", lambda m: m.as_tensor(np.float16(1.5))),
]


@pytest.mark.parametrize("name,f", CREATION, ids=[c[0] for c in CREATION])
def test_creation_matches_torch(name, f):
    a, b = f(tt), f(torch)
    same_meta(a, b)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert a.is_leaf and not a.requires_grad and a.device == "cpu"


RANDOM = [
    ("empty", lambda m: m.empty(2, 3)),
    ("empty_like", lambda m: m.empty_like(m.ones(2, 2, dtype=m.float64))),
    ("rand", lambda m: m.rand(2, 3)),
    ("rand_f64", lambda m: m.rand((4,), dtype=m.float64)),
    ("randn", lambda m: m.randn(3, 2)),
    ("randn_f16", lambda m: m.randn(5, dtype=m.float16)),
    ("randint", lambda m: m.randint(0, 5, (3, 4))),
    ("randint_high_only", lambda m: m.randint(5, (3,))),
    ("randint_dtype", lambda m: m.randint(0, 5, (3,), dtype=m.int32)),
    ("randint_float", lambda m: m.randint(0, 5, (3,), dtype=m.float32)),
    ("rand_like", lambda m: m.rand_like(m.ones(2, 2, dtype=m.float16))),
    ("randn_like", lambda m: m.randn_like(m.ones(2, 2))),
    ("randint_like", lambda m: m.randint_like(m.ones(2, 2), 0, 4)),
    ("randint_like_int", lambda m: m.randint_like(m.arange(5), 10)),
]


@pytest.mark.parametrize("name,f", RANDOM, ids=[c[0] for c in RANDOM])
def test_random_creation_shape_and_dtype_match_torch(name, f):
    same_meta(f(tt), f(torch))


def test_random_value_ranges():
    u = tt.rand(10_000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    n = tt.randn(10_000, dtype=tt.float64).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    r = tt.randint(-3, 4, (10_000,)).numpy()
    assert r.min() == -3 and r.max() == 3
    h = tt.rand(200_000, dtype=tt.float16).numpy()  # ~25 of these round to 1.0 unless kept below
    assert h.min() >= 0 and h.max() < 1


@pytest.mark.parametrize("f", [
    lambda: tt.rand(5), lambda: tt.randn(2, 3), lambda: tt.randint(0, 100, (6,)),
    lambda: tt.randn_like(tt.zeros(4)), lambda: tt.rand(3, dtype=tt.float16),
])
def test_manual_seed_reproducibility(f):
    tt.manual_seed(1234)
    a = [f().numpy() for _ in range(2)]
    tt.manual_seed(1234)
    b = [f().numpy() for _ in range(2)]
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], a[1])  # the stream moves on
    tt.manual_seed(4321)
    assert not np.array_equal(f().numpy(), a[0])


def test_from_numpy_shares_memory():
    a = np.arange(4.0)
    t = tt.from_numpy(a)
    assert t.dtype == tt.float64 and t.shape == (4,)
    a[0] = 10
    assert t.tolist() == [10.0, 1.0, 2.0, 3.0]
    t.add_(1)
    assert a.tolist() == [11.0, 2.0, 3.0, 4.0]
    assert np.shares_memory(t.numpy(), a)
    with pytest.raises(TypeError, match="from_numpy"):
        tt.from_numpy([1, 2])


def test_tensor_copies_but_as_tensor_shares():
    a = np.arange(3.0)
    t, s = tt.tensor(a), tt.as_tensor(a)
    a[0] = 5
    assert t.tolist() == [0.0, 1.0, 2.0] and s.tolist() == [5.0, 1.0, 2.0]
    u = tt.tensor(t)
    u.add_(1)
    assert t.tolist() == [0.0, 1.0, 2.0]


def test_default_dtype():
    assert tt.get_default_dtype() == tt.float32
    tt.set_default_dtype(tt.float64)
    try:
        assert tt.tensor([1.0]).dtype == tt.float64 and tt.zeros(2).dtype == tt.float64
        assert tt.arange(0.0, 1.0, 0.5).dtype == tt.float64 and tt.tensor([1]).dtype == tt.int64
    finally:
        tt.set_default_dtype(tt.float32)
    assert tt.ones(1).dtype == tt.float32


# ------------------------------------------------------------------ fields
def test_fields_match_torch():
    data = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    a, b = tt.tensor(data), torch.tensor(data)
    assert a.shape == tuple(b.shape) and isinstance(a.shape, tuple)
    assert a.ndim == b.ndim == a.dim() == 3
    assert a.size() == tuple(b.size()) and a.size(1) == b.size(1) and a.size(-1) == b.size(-1)
    assert a.numel() == b.numel() == 24 and len(a) == len(b) == 2
    assert a.dtype == tt.float32 and str(a.dtype) == "tinytensor.float32"
    assert a.device == tt.device("cpu") and a.device == "cpu" and str(a.device) == "cpu"
    assert not a.requires_grad and a.grad is None and a.is_leaf and a.grad_fn is None
    assert a.T.shape == (4, 3, 2) and a.mT.shape == tuple(b.mT.shape) == (2, 4, 3)
    np.testing.assert_array_equal(a.mT.numpy(), b.mT.numpy())
    m = tt.tensor(data[0])
    np.testing.assert_array_equal(m.T.numpy(), torch.tensor(data[0]).T.numpy())
    assert a.is_floating_point() and not tt.arange(2).is_floating_point()


def test_grad_fields_after_backward():
    x = tt.ones(2, 2, requires_grad=True)
    y = x * 3
    assert x.is_leaf and x.requires_grad and not y.is_leaf and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.shape == (2, 2) and x.grad.dtype == tt.float32 and not x.grad.requires_grad
    assert x.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_len_of_scalar_raises():
    with pytest.raises(TypeError, match="0-d"):
        len(tt.tensor(1.0))


def test_iteration_and_membership_match_torch():
    with pytest.raises(TypeError, match="0-d"):
        list(tt.tensor(1.0))  # not silently empty
    with pytest.raises(TypeError, match="0-d"):
        list(torch.tensor(1.0))
    rows = list(tt.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
    assert 3 in tt.tensor([[1, 2], [3, 4]]) and 5 not in tt.tensor([[1, 2], [3, 4]])


# ------------------------------------------------------------------ conversions
def test_numpy_item_tolist():
    a = tt.tensor([[1.5, 2.0], [3.0, 4.0]])
    n = a.numpy()
    assert isinstance(n, np.ndarray) and n.dtype == np.float32 and n.shape == (2, 2)
    assert a.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert tt.tensor(2.5).tolist() == 2.5
    s = a.sum()
    assert isinstance(s.numpy(), np.ndarray) and s.numpy().shape == ()  # 0-d array, not a scalar
    assert s.item() == 10.5 and isinstance(s.item(), float)
    i = tt.tensor([7]).item()
    assert i == 7 and isinstance(i, int)
    assert tt.tensor(True).item() is True
    assert float(tt.tensor(2.0)) == 2.0 and int(tt.tensor(3)) == 3
    with pytest.raises(ValueError, match=r"one-element.*\(2, 2\)"):
        a.item()
    with pytest.raises(RuntimeError, match="detach"):
        tt.ones(2, requires_grad=True).numpy()
    assert tt.ones(2, requires_grad=True).detach().numpy().tolist() == [1.0, 1.0]
    np.testing.assert_array_equal(np.asarray(a), n)


def test_zero_dim_results_hold_arrays():
    # NumPy ufuncs return scalars for 0-d inputs; tensors must still hold arrays
    s = tt.tensor([1.0, 2.0]).sum()
    for t in (s, s.exp(), -s, s * 2, tt.tensor([1.0, 2.0])[0], abs(s)):
        assert isinstance(t.numpy(), np.ndarray), type(t.data)
    s.add_(1)
    assert s.item() == 4.0


CASTS = [
    ("to_f64", lambda t: t.to(_f64(t))),
    ("to_dtype_kw", lambda t: t.to(dtype=_mod(t).float16)),
    ("to_device_dtype", lambda t: t.to("cpu", _mod(t).float64)),
    ("float", lambda t: t.long().float()),
    ("half", lambda t: t.half()),
    ("double", lambda t: t.double()),
    ("long", lambda t: t.long()),
    ("int", lambda t: t.int()),
    ("bool", lambda t: t.bool()),
    ("type_as", lambda t: t.type_as(t.long())),
]


def _mod(t):
    return tt if isinstance(t, tt.Tensor) else torch


def _f64(t):
    return _mod(t).float64


@pytest.mark.parametrize("name,f", CASTS, ids=[c[0] for c in CASTS])
def test_dtype_conversions_match_torch(name, f):
    data = [[-1.7, 0.0, 2.5], [3.9, -0.2, 1.0]]
    a, b = f(tt.tensor(data)), f(torch.tensor(data))
    same_meta(a, b)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_to_same_dtype_or_device_returns_self():
    a = tt.ones(2)
    assert a.to(tt.float32) is a and a.to("cpu") is a and a.to(device="cpu") is a
    assert a.cpu() is a and a.to(tt.device("cpu")) is a
    c = a.to(tt.float32, copy=True)
    assert c is not a and c.tolist() == [1.0, 1.0]
    b = a.to(tt.zeros(1, dtype=tt.float64))
    assert b.dtype == tt.float64
    assert a.to("cpu", non_blocking=True) is a  # torch training loops pass it


def test_to_is_differentiable():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x.double() * 2
    assert y.dtype == tt.float64
    y.sum().backward()
    assert x.grad.dtype == tt.float32 and x.grad.tolist() == [2.0, 2.0]


# ------------------------------------------------------------------ repr
REPRS = [
    ("float", lambda m: m.tensor([1.0, 2.5, 3.0])),
    ("float_whole", lambda m: m.tensor([1.0, 2.0, 3.0])),
    ("float_neg", lambda m: m.tensor([-1.25, 2.0])),
    ("matrix", lambda m: m.tensor([[1.5, 2.0], [3.0, 4.0]])),
    ("int", lambda m: m.tensor([1, 2, 3])),
    ("int32", lambda m: m.tensor([1, 2], dtype=m.int32)),
    ("bool", lambda m: m.tensor([True, False])),
    ("scalar", lambda m: m.tensor(3.5)),
    ("float64", lambda m: m.tensor([1.0, 2.0], dtype=m.float64)),
    ("float16", lambda m: m.tensor([1.0, 2.0], dtype=m.float16)),
    ("requires_grad", lambda m: m.tensor([1.0, 2.0], requires_grad=True)),
    ("small_sci", lambda m: m.tensor([1e-5, 1.0])),
    ("big_sci", lambda m: m.tensor([1e9, 1.0])),
    ("nonfinite", lambda m: m.tensor([float("nan"), float("inf"), 1.0])),
    ("empty", lambda m: m.zeros(0)),
    ("empty_2d", lambda m: m.zeros(2, 0)),
]


@pytest.mark.parametrize("name,f", REPRS, ids=[c[0] for c in REPRS])
def test_repr_matches_torch(name, f):
    assert repr(f(tt)).replace("tinytensor.", "torch.") == repr(f(torch))
    assert str(f(tt)) == repr(f(tt))


def test_repr_shows_grad_fn():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<mul>)"
    assert repr((x * 2).sum()) == "tensor(6., grad_fn=<sum>)"
    assert repr((x * 2).double()) == "tensor([2., 4.], dtype=tinytensor.float64, grad_fn=<cast>)"


# ------------------------------------------------------------------ grad eligibility
@pytest.mark.parametrize("make", [
    lambda: tt.tensor([1, 2], requires_grad=True),
    lambda: tt.arange(3, requires_grad=True),
    lambda: tt.ones(2, dtype=tt.bool, requires_grad=True),
    lambda: tt.zeros(2, dtype=tt.int32).requires_grad_(),
    lambda: tt.full((2,), 1, requires_grad=True),
])
def test_integer_and_bool_tensors_cannot_require_grad(make):
    with pytest.raises(RuntimeError, match="only floating-point tensors can require gradients"):
        make()


@pytest.mark.parametrize("dtype", [tt.float16, tt.float32, tt.float64])
def test_float_tensors_can_require_grad(dtype):
    assert tt.zeros(2, dtype=dtype, requires_grad=True).requires_grad
    assert tt.arange(0.0, 2.0, dtype=dtype, requires_grad=True).requires_grad


def test_new_creation_methods_follow_the_source_dtype_and_device():
    x = tt.zeros(2, dtype=tt.float64)
    assert x.new_zeros(3, 2).dtype is tt.float64 and x.new_zeros(3, 2).shape == (3, 2)
    assert x.new_ones((2,)).tolist() == [1.0, 1.0]
    assert x.new_full((2, 2), 7).tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert x.new_tensor([1, 2]).dtype is tt.float64
    assert x.new_zeros(2, dtype=tt.int32).dtype is tt.int32


def test_multinomial_samples_follow_the_weights_and_the_seed():
    w = tt.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    tt.manual_seed(1)
    a = tt.multinomial(w, 2000, replacement=True)
    assert a.shape == (2, 2000) and a.dtype is tt.int64
    counts = np.bincount(a.numpy()[0], minlength=3) / 2000
    assert counts[0] == 0 and abs(counts[2] - 0.75) < 0.04
    assert (a.numpy()[1] == 0).all()
    tt.manual_seed(1)
    assert tt.multinomial(w, 2000, replacement=True).tolist() == a.tolist()
    b = w[0].multinomial(2)
    assert sorted(b.tolist()) == [1, 2]
    with pytest.raises(ValueError, match="without replacement"):
        tt.multinomial(w, 2)


def test_inference_mode_is_no_grad():
    x = tt.ones(2, requires_grad=True)
    with tt.inference_mode():
        assert not (x * 2).requires_grad
