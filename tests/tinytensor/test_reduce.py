"""Reductions against PyTorch: forward, gradient and double backward in float64.

Every case is one line: `fn(m, x)` runs with m = tinytensor and m = torch on the same inputs.
"""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import array as a, case, check_double as check

INF = math.inf


# ------------------------------------------------------------------ dim/keepdim sweep
# (shape, dim, keepdim): dim as None, int, negative int, tuple; size-1, 0-d and size-0 inputs
DIMS = [((3, 4, 5), None, False), ((3, 4, 5), 0, False), ((3, 4, 5), -1, True), ((3, 4, 5), 1, True),
        ((3, 4, 5), (0, 2), False), ((3, 4, 5), (-1, -3), True), ((3, 4, 5), (0, 1, 2), False),
        ((3, 1, 5), 1, False), ((1,), 0, True), ((4,), -1, False), ((), None, False), ((), 0, True),
        ((2, 0, 3), 2, False), ((2, 0, 3), (0, 2), True)]
SWEEP = {
    "sum": lambda m, x, d, k: x.sum() if d is None and not k else x.sum(d, keepdim=k),
    "mean": lambda m, x, d, k: x.mean() if d is None and not k else x.mean(d, keepdim=k),
    "prod": lambda m, x, d, k: x.prod() if d is None else m.prod(x, d, keepdim=k),
    "amax": lambda m, x, d, k: m.amax(x, () if d is None else d, keepdim=k),
    "amin": lambda m, x, d, k: m.amin(x, () if d is None else d, keepdim=k),
    "var": lambda m, x, d, k: x.var(d, keepdim=k),
    "std": lambda m, x, d, k: x.std(d, keepdim=k, unbiased=False),
    "logsumexp": lambda m, x, d, k: m.logsumexp(x, tuple(range(x.ndim)) if d is None else d, keepdim=k),
    "norm": lambda m, x, d, k: x.norm(dim=None if d == (0, 1, 2) else d, keepdim=k),
}
NONEMPTY_ONLY = {"prod", "amax", "amin"}  # torch refuses or differs on size-0 inputs


def _prod_dims_ok(shape, dim):
    return dim is None or isinstance(dim, int)  # torch.prod takes one int dim


@pytest.mark.parametrize("shape,dim,keepdim", DIMS, ids=str)
@pytest.mark.parametrize("name", list(SWEEP))
def test_reduce_dims(name, shape, dim, keepdim):
    if 0 in shape and name in NONEMPTY_ONLY:
        pytest.skip("torch refuses to reduce a size-0 dim here")
    if name == "prod" and not _prod_dims_ok(shape, dim):
        pytest.skip("torch.prod takes a single int dim")
    if name in ("var", "std") and 0 in shape:
        pytest.skip("torch warns on size-0 var")
    check(lambda m, x: SWEEP[name](m, x, dim, keepdim), [shape], low=0.2 if name == "prod" else -2.0)


# tinytensor's own reductions over size-0 dims, where torch also answers
def test_sum_mean_of_empty():
    check(lambda m, x: (x.sum(), x.sum(0), x.mean(1)), [(0, 3)])


# ------------------------------------------------------------------ the rest, one line each
P0 = a([1.5, 0.0, -2.0, 0.5], [0.0, 2.0, 0.0, 1.0], [1.0, 2.0, 3.0, -1.0])  # rows: one zero, two zeros, none
TIES = a([1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [-5.0, 0.5, 4.0, 4.0])
LSE = a([1000.0, 1000.0, -1000.0], [-1000.0, -1000.0, 0.0], [-INF, 1.0, 2.0], [-INF, -INF, 3.0])
CASES = [
    # NumPy aliases axis= and keepdims=
    case("sum_axis", lambda m, x: m.sum(x, axis=1, keepdims=True), [(3, 4)]),
    case("mean_axis", lambda m, x: m.mean(x, axis=(0, 1)), [(3, 4, 2)]),
    case("amax_axis", lambda m, x: m.amax(x, axis=-1, keepdims=True), [(3, 4)]),
    case("axis_aliases", lambda m, x: (m.var(x, axis=1, keepdims=True), m.std(x, axis=0), m.logsumexp(x, axis=1), m.prod(x, axis=1, keepdims=True)), [(3, 4)]),
    case("axis_aliases_max", lambda m, x: (x.max(axis=1, keepdims=True).values, m.amin(x, axis=0), x.norm(dim=1), x.cumsum(axis=1)), [(3, 4)]),
    case("axis_aliases_arg", lambda m, x: (x.argmax(axis=0), x.argmin(axis=1, keepdims=True), x.min(axis=0)[1]), [(3, 4)]),
    case("sum_dim_list", lambda m, x: x.sum(dim=[0, 2]), [(3, 4, 2)]),
    case("sum_empty_dim_tuple", lambda m, x: (m.sum(x, ()), m.amax(x, dim=()), x.mean(())), [(3, 4)]),
    case("sum_dtype", lambda m, x: x.sum(dtype=m.float64), [(3, 4)]),
    # prod with zeros in the reduced slice
    case("prod_zeros_dim1", lambda m, x: x.prod(1), [P0]),
    case("prod_zeros_dim0", lambda m, x: x.prod(0, keepdim=True), [P0]),
    case("prod_zeros_full", lambda m, x: x.prod(), [P0[:1]]),
    case("prod_two_zeros_full", lambda m, x: x.prod(), [P0[1:2]]),
    case("prod_all_zero", lambda m, x: x.prod(-1), [a([0.0, 0.0], [0.0, 3.0])]),
    case("prod_tuple_dims", lambda m, x: m.prod(x, (0, 2)) if m is tt else x.prod(2).prod(0), [(3, 2, 4)], low=0.5),
    case("prod_tuple_dims_zeros", lambda m, x: m.prod(x, (0, 1)) if m is tt else x.prod(1).prod(0), [P0.reshape(2, 2, 3)]),
    case("prod_three_zeros", lambda m, x: x.prod(1), [a([0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 3.0, 2.0])]),
    case("prod_negative", lambda m, x: x.prod(1), [(3, 4)], low=-2.0),
    # max/min with dim: values and indices; gradient goes to the chosen index
    case("max_dim", lambda m, x: x.max(1), [(3, 4)]),
    case("max_dim_keepdim", lambda m, x: x.max(dim=-1, keepdim=True), [(2, 3, 4)]),
    case("min_dim", lambda m, x: m.min(x, 0), [(3, 4)]),
    case("min_dim_keepdim", lambda m, x: x.min(-2, True), [(2, 3, 4)]),
    case("max_values", lambda m, x: x.max(dim=0).values, [(3, 4)]),
    case("min_indices", lambda m, x: x.min(dim=1).indices, [(3, 4)]),
    case("max_dim_ties", lambda m, x: x.max(1), [TIES]),
    case("min_dim_ties", lambda m, x: x.min(0), [TIES]),
    case("max_dim_size1", lambda m, x: x.max(1), [(3, 1)]),
    case("max_0d", lambda m, x: x.max(0), [()]),
    case("max_elementwise", lambda m, x, y: x.max(y), [(3, 4), (4,)]),
    # max()/min() of everything: ties split evenly
    case("max_full", lambda m, x: x.max(), [(3, 4)]),
    case("min_full", lambda m, x: m.min(x), [(3, 4)]),
    case("max_full_ties", lambda m, x: x.max(), [TIES]),
    case("min_full_ties", lambda m, x: x.min(), [TIES]),
    case("amax_ties", lambda m, x: m.amax(x, 1), [TIES]),
    case("amin_ties", lambda m, x: m.amin(x, (0, 1)), [TIES]),
    case("amax_0d", lambda m, x: m.amax(x, 0), [()]),
    # argmax/argmin (first index on ties)
    case("argmax", lambda m, x: x.argmax(), [(3, 4)]),
    case("argmax_dim", lambda m, x: m.argmax(x, 1), [(3, 4)]),
    case("argmax_keepdim", lambda m, x: x.argmax(-1, keepdim=True), [(2, 3, 4)]),
    case("argmin_dim", lambda m, x: m.argmin(x, dim=0), [(3, 4)]),
    case("argmax_ties", lambda m, x: (x.argmax(1), x.argmin(1), x.argmax(), x.argmin()), [TIES]),
    case("argmax_0d", lambda m, x: (x.argmax(), x.argmax(0)), [()]),
    # var/std: unbiased and correction
    case("var_unbiased_false", lambda m, x: x.var(1, unbiased=False), [(3, 4)]),
    case("var_unbiased_true", lambda m, x: m.var(x, 0, unbiased=True, keepdim=True), [(3, 4)]),
    case("var_correction0", lambda m, x: x.var(dim=1, correction=0), [(3, 4)]),
    case("var_correction2", lambda m, x: x.var(dim=(0, 1), correction=2), [(3, 4)]),
    case("var_full", lambda m, x: x.var(), [(3, 4)]),
    case("std_full", lambda m, x: x.std(), [(3, 4)]),
    case("std_dim", lambda m, x: m.std(x, -1, keepdim=True), [(3, 4)]),
    case("std_correction", lambda m, x: x.std(dim=0, correction=0), [(3, 4)]),
    case("std_constant_row", lambda m, x: (x.std(1), x.std(1, correction=0)), [a([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])]),
    case("var_one_element", lambda m, x: x.var(1, unbiased=False), [(3, 1)]),
    case("var_no_dof", lambda m, x: (x.var(1, correction=3), x.std(1, correction=4)), [(2, 3)], grad=False),
    case("var_one_element_unbiased", lambda m, x: x.var(1), [(3, 1)], double_backward=False),
    # logsumexp with large and -inf entries
    case("logsumexp", lambda m, x: x.logsumexp(1), [(3, 4)]),
    case("logsumexp_tuple", lambda m, x: m.logsumexp(x, (0, 2), keepdim=True), [(3, 4, 2)]),
    case("logsumexp_large", lambda m, x: m.logsumexp(x, 1), [LSE]),
    case("logsumexp_large_dim0", lambda m, x: m.logsumexp(x, 0), [LSE]),
    case("logsumexp_empty", lambda m, x: m.logsumexp(x, 1), [(2, 0)]),
    case("logsumexp_all_neg_inf", lambda m, x: m.logsumexp(x, 1), [a([-INF, -INF], [0.0, 1.0])]),
    # norm
    case("norm_2", lambda m, x: x.norm(), [(3, 4)]),
    case("norm_1", lambda m, x: x.norm(p=1), [(3, 4)]),
    case("norm_inf", lambda m, x: x.norm(p=INF), [(3, 4)]),
    case("norm_3", lambda m, x: x.norm(p=3), [(3, 4)]),
    case("norm_2_dim", lambda m, x: m.norm(x, 2, 1), [(3, 4)]),
    case("norm_1_dim_keepdim", lambda m, x: x.norm(1, dim=0, keepdim=True), [(3, 4)]),
    case("norm_inf_dim", lambda m, x: x.norm(INF, dim=-1), [(3, 4)]),
    case("norm_3_dim", lambda m, x: x.norm(3, dim=(0, 1)), [(3, 4, 2)]),
    case("norm_inf_ties", lambda m, x: x.norm(INF, dim=1), [a([1.0, -3.0, 3.0], [2.0, 2.0, -1.0])]),
    case("norm_zero_vector", lambda m, x: x.norm(dim=1), [a([0.0, 0.0], [3.0, 4.0])], double_backward=False),
    case("norm_1_zero_vector", lambda m, x: x.norm(1, dim=1), [a([0.0, 0.0], [3.0, -4.0])]),
    case("norm_inf_zero_vector", lambda m, x: x.norm(INF, dim=1), [a([0.0, 0.0], [3.0, -4.0])]),
    case("norm_3_zero_vector", lambda m, x: x.norm(3, dim=1), [a([0.0, 0.0], [3.0, -4.0])], double_backward=False),
    case("norm_fro", lambda m, x: x.norm("fro"), [(3, 4)]),
    # cumsum
    case("cumsum_0", lambda m, x: x.cumsum(0), [(3, 4)]),
    case("cumsum_neg", lambda m, x: m.cumsum(x, -1), [(2, 3, 4)]),
    case("cumsum_1d", lambda m, x: m.cumsum(x, dim=0), [(5,)]),
    case("cumsum_0d", lambda m, x: m.cumsum(x, 0), [()]),
    case("cumsum_empty", lambda m, x: m.cumsum(x, 1), [(2, 0)]),
    # compositions: a reduction's gradient feeding another reduction
    case("softmax_by_hand", lambda m, x: (x - x.logsumexp(1, keepdim=True)).exp().sum(0), [(3, 4)]),
    case("normalize", lambda m, x: x / x.norm(dim=-1, keepdim=True), [(3, 4)]),
    case("standardize", lambda m, x: (x - x.mean(0)) / x.std(0), [(5, 3)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_op(fn, inputs, kw):
    check(fn, inputs, **kw)


def test_norm_zero_vector_gradient_is_zero():
    x = tt.zeros(3, dtype=tt.float64, requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))


# ------------------------------------------------------------------ integer and bool inputs, forward only
INTS = a([1, 5, -2], [3, 3, 0], dtype=np.int32)
INT_CASES = [
    case("sum_int32", lambda m, x: (x.sum(), x.sum(0), x.sum(1, keepdim=True)), [INTS]),
    case("sum_bool", lambda m, x: (x > 1).sum(1), [INTS]),
    case("prod_int", lambda m, x: (x.prod(), x.prod(1)), [INTS]),
    case("max_int", lambda m, x: (x.max(), x.max(1), x.amin(0)), [INTS]),
    case("argmax_int", lambda m, x: (x.argmax(), x.argmin(1)), [INTS]),
    case("mean_dtype", lambda m, x: x.mean(dtype=m.float64), [INTS]),
    case("cumsum_int", lambda m, x: x.cumsum(1), [INTS]),
    case("all_any", lambda m, x: (x.all(), x.any(), x.all(1), (x > 0).any(0), (x > 0).all(1, keepdim=True)), [INTS]),
    case("all_any_axis", lambda m, x: (m.all(x > 0, axis=1), m.any(x > 4, axis=0, keepdims=True)), [INTS]),
]


@pytest.mark.parametrize("fn,inputs,kw", INT_CASES)
def test_int_reduce(fn, inputs, kw):
    check(fn, inputs, grad=False, **kw)


# ------------------------------------------------------------------ float32
F32_CASES = [
    case("sum_mean", lambda m, x: x.sum(1) + x.mean(1), [(3, 4)]),
    case("prod", lambda m, x: x.prod(0), [(3, 4)]),
    case("max_min", lambda m, x: x.max(1).values - x.amin(1), [(3, 4)]),
    case("var_std", lambda m, x: x.var(0) + x.std(0, correction=0), [(3, 4)]),
    case("logsumexp", lambda m, x: m.logsumexp(x, -1), [(3, 4)]),
    case("logsumexp_large", lambda m, x: m.logsumexp(x, 1), [LSE]),
    case("norm", lambda m, x: x.norm(dim=1) + x.norm(1, dim=1), [(3, 4)]),
    case("cumsum", lambda m, x: x.cumsum(1), [(3, 4)]),
]


@pytest.mark.parametrize("fn,inputs,kw", F32_CASES)
def test_float32(fn, inputs, kw):
    out = check(fn, inputs, dtype="float32", double_backward=False, **kw)
    assert out.dtype is tt.float32


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("fn", [lambda x: x.amax(1), lambda x: x.max(1), lambda x: x.argmax(1),
                                lambda x: x.max()], ids=["amax", "max", "argmax", "max_full"])
def test_empty_extreme_raises(fn):
    with pytest.raises((ValueError, IndexError, RuntimeError)):
        fn(tt.zeros(2, 0))


def test_dim_out_of_range():
    with pytest.raises(IndexError, match="sum"):
        tt.zeros(2, 3).sum(2)


HALF_ACCUMULATING = [
    ("sum", lambda t: t.sum(1)),
    ("mean", lambda t: t.mean()),
    ("mean_dim", lambda t: t.mean(1)),
    ("var", lambda t: t.var(1)),
    ("std", lambda t: t.std()),
    ("norm", lambda t: t.norm(dim=1)),
    ("cumsum", lambda t: t.cumsum(1)[:, -1]),
]


@pytest.mark.parametrize("name,f", HALF_ACCUMULATING, ids=[c[0] for c in HALF_ACCUMULATING])
def test_float16_reductions_accumulate_in_float32_like_torch(name, f):
    # 40000 halves of 2.0: the float16 running sum would stop growing at 4096 or overflow
    # at 65504 (mean inf, var nan), while torch accumulates in float32
    a = np.full((2, 40000), 2.0, dtype=np.float16)
    a[1, ::2] = -1.5
    x, tx = tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = f(x), f(tx)
    assert y.dtype == tt.float16
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), ty.detach().numpy(), rtol=2e-3)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), tx.grad.numpy(), rtol=2e-3, atol=1e-6)
