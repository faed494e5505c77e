"""The index family (index_add/copy/fill/reduce/put, take, put, take_along_dim,
masked_scatter, *_scatter, as_strided, fill) and the search family (searchsorted,
bucketize, unravel_index, argwhere, unique, unique_consecutive) against PyTorch: values,
gradients and double backward in float64, one line per case (shapes are random float64
tensors that require grad; int and bool arrays are constant index tensors); then the
in-place forms, the data-dependent ops under tt.compile, and the errors."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.compiler.capture import CaptureError
from .cases import table_tests
from .oracle import check


def ints(*values, shape=None):
    a = np.array(values, dtype=np.int64)
    return a.reshape(shape) if shape else a


MASK = np.random.default_rng(0).uniform(size=(3, 4)) < 0.5
REP = ints(2, 0, 2)          # a repeated index: accumulating ops add both
CASES = {
    "index_add": (lambda m, x, i, s: x.index_add(0, i, s), [(3, 4), REP, (3, 4)]),
    "index_add_alpha_dim1": (lambda m, x, i, s: m.index_add(x, 1, i, s, alpha=-2.0), [(2, 3), REP, (2, 3)]),
    "index_add_0d": (lambda m, x, i, s: x.index_add(0, i, s), [(), np.array(0), ()]),
    "index_copy": (lambda m, x, i, s: x.index_copy(1, i, s), [(2, 4), ints(3, 0), (2, 2)]),
    "index_fill_repeat": (lambda m, x, i, v: x.index_fill(1, i, v), [(2, 4), ints(1, 3, 1), ()]),
    "index_fill_number": (lambda m, x, i: m.index_fill(x, 0, i, 2.5), [(3, 2), ints(2)]),
    "index_reduce_prod": (lambda m, x, i, s: x.index_reduce(0, i, s, "prod"), [(3, 4), REP, (3, 4)]),
    "index_reduce_amax_no_self": (lambda m, x, i, s: x.index_reduce(1, i, s, "amax", include_self=False),
                                  [(2, 3), REP, (2, 3)]),
    "index_reduce_mean": (lambda m, x, i, s: x.index_reduce(0, i, s, "mean"), [(3, 4), REP, (3, 4)]),
    "index_put": (lambda m, x, i, v: m.index_put(x, (i,), v), [(4, 3), ints(3, 0), (2, 3)]),
    "index_put_accumulate": (lambda m, x, i, j, v: x.index_put((i, j), v, accumulate=True),
                             [(3, 4), REP, ints(1, 1, 1), (3,)]),
    "index_put_broadcast": (lambda m, x, i, v: x.index_put((i,), v, accumulate=True),
                            [(3, 4), REP, (1, 4)]),
    "take": (lambda m, x, i: m.take(x, i), [(3, 4), ints(0, -1, 5, 5, shape=(2, 2))]),
    "put": (lambda m, x, i, s: x.put(i, s), [(3, 4), ints(11, 0, -2), (3,)]),
    "put_accumulate": (lambda m, x, i, s: m.put(x, i, s, accumulate=True), [(3, 4), ints(1, 1, 7, 1, shape=(2, 2)), (2, 2)]),
    "take_along_dim": (lambda m, x, i: m.take_along_dim(x, i, 1), [(3, 4), ints(3, -1, 0, 2, shape=(1, 4))]),
    "take_along_dim_none": (lambda m, x, i: m.take_along_dim(x, i), [(3, 4), ints(11, 0, 4)]),
    "take_along_dim_bcast": (lambda m, x, i: x.take_along_dim(i, dim=0), [(3, 1), ints(2, 0, 1, 2, shape=(2, 2))]),
    "masked_scatter": (lambda m, x, k, s: x.masked_scatter(k, s), [(3, 4), MASK, (4, 4)]),
    "masked_scatter_bcast": (lambda m, x, k, s: m.masked_scatter(x, k, s), [(4,), MASK, (12,)]),
    "select_scatter": (lambda m, x, s: m.select_scatter(x, s, 1, -1), [(3, 4), (3,)]),
    "slice_scatter": (lambda m, x, s: x.slice_scatter(s, dim=1, start=1, end=None, step=2), [(3, 5), (3, 2)]),
    "diagonal_scatter": (lambda m, x, s: m.diagonal_scatter(x, s, 1), [(3, 4), (3,)]),
    "diagonal_scatter_dims": (lambda m, x, s: x.diagonal_scatter(s, -1, 2, 0), [(3, 2, 4), (2, 3)]),
    "as_strided": (lambda m, x: x.as_strided((2, 3), (1, 2), 1), [(3, 3)]),
    "fill": (lambda m, x, v: m.fill(x, v), [(2, 3), ()]),
}
test_index_ops, test_index_ops_float32, test_index_ops_cuda = table_tests(
    CASES, ["index_add", "index_put_accumulate", "take_along_dim", "masked_scatter"], check)


def test_as_strided_scatter_gradient_by_finite_differences():
    # torch's own input gradient is wrong here (OpInfo xfails it): check ours numerically
    x0 = np.random.default_rng(1).normal(size=(3, 3))
    s0 = np.random.default_rng(2).normal(size=(2, 2))
    w = np.random.default_rng(3).normal(size=(3, 3))

    def f(x, s):
        return (tt.as_strided_scatter(x, s, (2, 2), (2, 1), 1) * tt.tensor(w)).sum()
    x, s = tt.tensor(x0, requires_grad=True), tt.tensor(s0, requires_grad=True)
    gx, gs = tt.grad(f(x, s), [x, s])
    want = torch.as_strided_scatter(torch.tensor(x0), torch.tensor(s0), (2, 2), (2, 1), 1)
    np.testing.assert_array_equal(tt.as_strided_scatter(x, s, (2, 2), (2, 1), 1).detach().numpy(), want.numpy())
    for arr, g in ((x0, gx), (s0, gs)):
        num = np.zeros_like(arr)
        for k in np.ndindex(arr.shape):
            for sign in (1, -1):
                a = arr.copy()
                a[k] += sign * 1e-6
                args = (tt.tensor(a), tt.tensor(s0)) if arr is x0 else (tt.tensor(x0), tt.tensor(a))
                num[k] += sign * f(*args).item() / 2e-6
        np.testing.assert_allclose(g.numpy(), num, atol=1e-6)
    assert not gx.numpy()[0, 1:].any() and gx.numpy()[0, 0] == w[0, 0]  # positions 1..4 overwritten


@pytest.mark.parametrize("name,call", [
    ("index_add_", lambda x, i: x.index_add_(0, i, x.new_ones(3, 4))),
    ("index_copy_", lambda x, i: x.index_copy_(0, i[:2], x.new_ones(2, 4) * 7)),
    ("index_fill_", lambda x, i: x.index_fill_(1, i, -1.0)),
    ("index_reduce_", lambda x, i: x.index_reduce_(0, i, x.new_ones(3, 4) * 3, "prod")),
    ("index_put_", lambda x, i: x.index_put_((i,), x.new_ones(4), accumulate=True)),
    ("put_", lambda x, i: x.put_(i, x.new_ones(3) * 5)),
    ("masked_scatter_", lambda x, i: x.masked_scatter_(x > 5, x.new_ones(12) * -3)),
    ("scatter_", lambda x, i: x.scatter_(0, i.reshape(1, 3), x[:1, :3] * 2)),
    ("scatter_value_", lambda x, i: x.scatter_(1, i.reshape(3, 1), 8.0)),
    ("scatter_add_", lambda x, i: x.scatter_add_(0, i.reshape(1, 3), x[:1, :3] * 2)),
    ("scatter_reduce_", lambda x, i: x.scatter_reduce_(0, i.reshape(1, 3), x[:1, :3] + 1, "amax")),
])
def test_inplace_forms_match_torch(name, call):
    a, i = np.arange(12.0).reshape(3, 4), np.array([2, 0, 2])
    x, tx = tt.tensor(a), torch.tensor(a)
    out = call(x, tt.tensor(i))
    want = call(tx, torch.tensor(i))
    assert out is x and x._version[0] == 1
    np.testing.assert_array_equal(x.numpy(), want.numpy())


def test_inplace_index_add_records_for_autograd():
    w = tt.tensor(np.arange(4.0), requires_grad=True)
    y = w * 1.0
    y.index_add_(0, tt.tensor([1, 1]), w[:2] * 2)
    y.sum().backward()
    tw = torch.arange(4.0, dtype=torch.float64, requires_grad=True)
    ty = tw * 1.0
    ty.index_add_(0, torch.tensor([1, 1]), tw[:2] * 2)
    ty.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())


def test_setitem_with_tensor_indices_matches_torch():
    a = np.arange(12.0).reshape(3, 4)
    x, tx = tt.tensor(a), torch.tensor(a)
    for t, m in ((x, tt), (tx, torch)):
        t[m.tensor([2, 0]), m.tensor([1, 3])] = m.tensor([-1.0, -2.0], dtype=m.float64)
        t[:, m.tensor([0])] = 9.0
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


# ---------------------------------------------------------------- the search family
SEARCH = {
    "1d": (np.array([1.0, 3, 3, 5, 7]), np.array([[0.0, 3], [6, 9]])),
    "batched": (np.sort(np.random.default_rng(4).normal(size=(2, 3, 5)), -1),
                np.random.default_rng(5).normal(size=(2, 3, 4))),
    "nan": (np.array([1.0, 2, np.nan]), np.array([np.nan, 1.5, 2])),
    "int": (np.array([1, 4, 9]), np.array([0, 4, 10])),
    "empty_batch": (np.zeros((0, 3)), np.zeros((0, 2))),
    "empty_rows": (np.zeros((2, 0)), np.zeros((2, 3))),
}


@pytest.mark.parametrize("name", SEARCH)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(name, right):
    seq, vals = SEARCH[name]
    got = tt.searchsorted(tt.tensor(seq), tt.tensor(vals), right=right)
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right)
    assert got.dtype is tt.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if seq.ndim == 1:
        got = tt.bucketize(tt.tensor(vals), tt.tensor(seq), right=right, out_int32=True)
        want = torch.bucketize(torch.tensor(vals), torch.tensor(seq), right=right, out_int32=True)
        assert got.dtype is tt.int32
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_searchsorted_sorter_side_and_scalar():
    seq = np.array([5.0, 1, 3])
    sorter = np.array([1, 2, 0])
    got = tt.searchsorted(tt.tensor(seq), tt.tensor([2.0, 5.0]), side="right", sorter=tt.tensor(sorter))
    want = torch.searchsorted(torch.tensor(seq), torch.tensor([2.0, 5.0]), side="right",
                              sorter=torch.tensor(sorter))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tt.searchsorted(tt.tensor([1.0, 2.0]), 1.5).shape == ()


@pytest.mark.parametrize("kw", [{}, {"return_inverse": True, "return_counts": True},
                                {"dim": 1, "return_inverse": True},
                                {"dim": 0, "return_counts": True}])
@pytest.mark.parametrize("op", ["unique", "unique_consecutive"])
def test_unique(op, kw):
    a = np.array([[2.0, 1, 2, np.nan], [2, 1, 2, np.nan], [0, 0, 0, 5]])
    got, want = getattr(tt, op)(tt.tensor(a), **kw), getattr(torch, op)(torch.tensor(a), **kw)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_unravel_index_and_argwhere():
    i = np.array([[0, 7], [-1, 11]])
    got, want = tt.unravel_index(tt.tensor(i), (3, 4)), torch.unravel_index(torch.tensor(i), (3, 4))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    a = np.array([[0.0, 1], [2, 0]])
    np.testing.assert_array_equal(tt.tensor(a).argwhere().numpy(), torch.tensor(a).argwhere().numpy())


# ---------------------------------------------------------------- under tt.compile
def test_compiled_searchsorted_masked_scatter_and_unravel_follow_each_call():
    seq = tt.tensor([0.0, 1, 2, 3])

    def f(v, m, s):
        r, c = tt.unravel_index(tt.searchsorted(seq, v), (2, 3))
        return r, c, tt.zeros(3, 4, dtype=tt.float64).masked_scatter(m, s), tt.bucketize(v, seq)
    cf = tt.compile(f)
    rng = np.random.default_rng(0)
    for _ in range(2):   # two different inputs: nothing of the first call is frozen
        v, m, s = rng.uniform(-1, 4, size=5), rng.uniform(size=(3, 4)) < 0.5, rng.normal(size=12)
        args = (tt.tensor(v), tt.tensor(m), tt.tensor(s))
        for g, w in zip(cf(*args), f(*args)):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_compiled_index_add_and_take_along_dim_follow_the_index():
    def f(x, i):
        return x.index_add(0, i, x * 2).take_along_dim(i.reshape(3, 1), dim=0)
    cf = tt.compile(f)
    x = tt.tensor(np.arange(12.0).reshape(3, 4))
    for i in ([0, 0, 1], [2, 1, 2]):
        np.testing.assert_array_equal(cf(x, tt.tensor(i)).numpy(), f(x, tt.tensor(i)).numpy())


@pytest.mark.parametrize("op", ["unique", "unique_consecutive", "argwhere"])
def test_data_dependent_lengths_are_refused_under_compile_by_name(op):
    cf = tt.compile(lambda x: getattr(tt, op)(x * 1.0))
    with pytest.raises(CaptureError, match=op):
        cf(tt.tensor([1.0, 1.0, 2.0]))


# ---------------------------------------------------------------- errors
def test_errors_name_the_op_and_shapes():
    x = tt.zeros(3, 4)
    with pytest.raises(Exception, match=r"index_add: source of shape \(2, 4\) does not match the input \(3, 4\)"):
        x.index_add(0, tt.tensor([0, 1, 2]), tt.ones(2, 4))
    with pytest.raises(IndexError, match=r"index_copy: index 3 is out of bounds for dimension 0 with size 3"):
        x.index_copy(0, tt.tensor([3]), tt.ones(1, 4))
    with pytest.raises(RuntimeError, match=r"masked_scatter: the mask has 12 True entries but source has only 2"):
        x.masked_scatter(tt.ones(3, 4, dtype=tt.bool), tt.ones(2))
    with pytest.raises(Exception, match=r"take_along_dim: input \(3, 4\) and indices \(2, 2\) do not broadcast"):
        tt.take_along_dim(x, tt.tensor([[0, 1], [1, 0]]), 0)
    with pytest.raises(Exception, match=r"select_scatter: src of shape \(3,\) does not match"):
        tt.select_scatter(x, tt.ones(3), 0, 0)
    with pytest.raises(IndexError, match=r"unravel_index: index 12 is out of range for shape \(3, 4\)"):
        tt.unravel_index(tt.tensor([12]), (3, 4))
    with pytest.raises(Exception, match=r"searchsorted: sorted_sequence of shape \(2, 3\) needs input"):
        tt.searchsorted(tt.zeros(2, 3), tt.zeros(3, 1))


# ---------------------------------------------------------------- tensor plumbing (issue 25)
def test_to_positional_flags_and_memory_formats():
    x = tt.tensor(np.arange(24.0).reshape(1, 2, 3, 4))
    y = x.to("cpu", tt.float64, False, True)   # (device, dtype, non_blocking, copy)
    assert y is not x and np.array_equal(y.numpy(), x.numpy())
    assert x.to(tt.float64, False, False) is x
    cl = x.to(memory_format=torch.channels_last)   # torch's constant, taken by name
    want = torch.tensor(x.numpy()).to(memory_format=torch.channels_last)
    assert tuple(s // 8 for s in cl.data.strides) == want.stride()
    np.testing.assert_array_equal(cl.numpy(), x.numpy())
    assert x.float(memory_format=tt.contiguous_format).dtype is tt.float32
    assert x.permute(0, 3, 1, 2).contiguous(memory_format=tt.contiguous_format).data.flags.c_contiguous
    with pytest.raises(Exception, match=r"to: memory_format=channels_last needs a 4-d tensor, got shape \(2, 3\)"):
        tt.zeros(2, 3).to(memory_format=tt.channels_last)
    w = tt.tensor(np.ones((1, 2, 2, 2)), requires_grad=True)
    (w.to(memory_format=tt.channels_last) * 3).sum().backward()
    assert np.array_equal(w.grad.numpy(), np.full((1, 2, 2, 2), 3.0))


def test_zero_dim_inputs_broadcast_masked_fill_and_legacy_cat():
    x = np.array(3.0)
    got = [tt.gather(tt.tensor(x), 0, tt.tensor(0)), tt.index_select(tt.tensor(x), 0, tt.tensor([0])),
           tt.scatter_add(tt.tensor(x), 0, tt.tensor(0), tt.tensor(2.0)), tt.topk(tt.tensor(x), 1)[0],
           tt.masked_fill(tt.arange(3.0), tt.ones(2, 3, dtype=tt.bool), 1.0),
           tt.cat([tt.zeros(0), tt.ones(2, 2)], 1)]
    t = torch.tensor(x)
    want = [torch.gather(t, 0, torch.tensor(0)), torch.index_select(t, 0, torch.tensor([0])),
            torch.scatter_add(t, 0, torch.tensor(0), torch.tensor(2.0, dtype=torch.float64)),
            torch.topk(t, 1)[0], torch.masked_fill(torch.arange(3.0), torch.ones(2, 3, dtype=torch.bool), 1.0),
            torch.cat([torch.zeros(0), torch.ones(2, 2)], 1)]
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(RuntimeError, match="masked_fill_"):
        tt.arange(3.0).masked_fill_(tt.ones(2, 3, dtype=tt.bool), 1.0)
