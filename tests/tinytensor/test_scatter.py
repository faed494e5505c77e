"""scatter, scatter_reduce, masked_select and nonzero against PyTorch: values, gradients and
double backward in float64, one line per case (inputs as in test_indexing.py: shapes are random
float64 tensors that require grad, int and bool arrays constant index tensors)."""
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch
from .cases import table_tests
from .oracle import check, with_squares


def ints(*values, shape=None):
    a = np.array(values, dtype=np.int64)
    return a.reshape(shape) if shape else a


def floats(*values, shape):
    return np.array(values, dtype=np.float64).reshape(shape)


UNIQUE0 = ints(0, 2, 1, 2, 1, 0, 2, 0, shape=(2, 4))  # no repeats along dim 0: scatter is deterministic
REPEAT0 = ints(0, 2, 2, 1, 0, 0, 0, 1, shape=(2, 4))  # repeats: reductions must combine them
REPEAT1 = ints(1, 1, 0, 3, 3, 3, 2, 0, 0, shape=(3, 3))
# ties for amax: every group below has entries equal to its maximum, self included
TIE_X = floats(*range(1, 13), shape=(3, 4))
TIE_I = ints(0, 0, 1, 2, 0, 1, 1, 2, shape=(2, 4))
TIE_S = floats(1, 2, 7, 12, 1, 9, 7, 3, shape=(2, 4))
# zeros for prod: a zero in self, a single zero in a group, and a group of a zero and a nonzero
ZERO_X = floats(1, 0, 2, 3, 0.5, 2, 1.5, 0, shape=(2, 4))
ZERO_S = floats(0, 2, 3, 1.5, 0.5, 2, 0, 3, shape=(2, 4))
ZERO_I = ints(0, 1, 0, 1, 1, 1, 1, 0, shape=(2, 4))
MASK = np.random.default_rng(0).uniform(size=(3, 4)) < 0.5


def sr(reduce, include_self=True, dim=0):
    return lambda m, x, i, s: x.scatter_reduce(dim, i, s, reduce, include_self=include_self)


CASES = {
    # scatter: src or a number written at index; x's gradient is cut where written
    "scatter": (lambda m, x, i, s: x.scatter(0, i, s), [(3, 4), UNIQUE0, (2, 4)]),
    "scatter_dim1": (lambda m, x, i, s: m.scatter(x, -1, i, s), [(3, 4), ints(3, 0, 1, 2, 2, 1, shape=(3, 2)), (3, 2)]),
    # src larger than index: torch's backward refuses it, so torch gets the part that is read
    "scatter_big_src": (lambda m, x, i, s: x.scatter(0, i, s if m is tt else s[:2, :4]),
                        [(3, 4), UNIQUE0, (3, 5)]),
    "scatter_value": (lambda m, x, i: x.scatter(0, i, 2.5), [(3, 4), UNIQUE0]),
    "scatter_value_kw": (lambda m, x, i: m.scatter(x, 1, i, value=-1.0), [(2, 3), ints(2, 0, 1, 1, shape=(2, 2))]),
    "scatter_1d": (lambda m, x, i, s: x.scatter(0, i, s), [(5,), ints(4, 0, 2), (3,)]),
    "scatter_3d": (lambda m, x, i, s: x.scatter(1, i, s),
                   [(2, 3, 2), ints(0, 2, 1, 0, 2, 1, 1, 0, shape=(2, 2, 2)), (2, 2, 2)]),
    "scatter_empty_index": (lambda m, x, i, s: x.scatter(0, i, s), [(3, 4), ints(shape=(0, 4)), (0, 4)]),
    # scatter_reduce, each reduction with and without self, over repeated indices
    "sum": (sr("sum"), [(3, 4), REPEAT0, (2, 4)]),
    "sum_no_self": (sr("sum", False), [(3, 4), REPEAT0, (2, 4)]),
    "mean": (sr("mean"), [(3, 4), REPEAT0, (2, 4)]),
    "mean_no_self": (sr("mean", False), [(3, 4), REPEAT0, (2, 4)]),
    "mean_dim1": (sr("mean", False, dim=1), [(3, 4), REPEAT1, (3, 3)]),
    "prod": (sr("prod"), [(3, 4), REPEAT0, (2, 4)]),
    "prod_no_self": (sr("prod", False), [(3, 4), REPEAT0, (2, 4)]),
    "prod_zeros": (sr("prod"), [ZERO_X, ZERO_I, ZERO_S]),
    "prod_zeros_no_self": (sr("prod", False), [ZERO_X, ZERO_I, ZERO_S]),
    "amax": (sr("amax"), [(3, 4), REPEAT0, (2, 4)]),
    "amax_no_self": (sr("amax", False), [(3, 4), REPEAT0, (2, 4)]),
    "amin": (sr("amin"), [(3, 4), REPEAT0, (2, 4)]),
    "amin_dim1_no_self": (sr("amin", False, dim=1), [(3, 4), REPEAT1, (3, 3)]),
    "amax_ties": (sr("amax"), [TIE_X, TIE_I, TIE_S]),
    "amax_ties_no_self": (sr("amax", False), [TIE_X, TIE_I, TIE_S]),
    "amin_ties": (sr("amin"), [-TIE_X, TIE_I, -TIE_S]),
    "amin_ties_no_self": (sr("amin", False), [-TIE_X, TIE_I, -TIE_S]),
    "reduce_1d": (lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, "amax"), [(4,), ints(1, 1, 3, 1), (4,)]),
    "reduce_0d": (lambda m, x, i, s: x.scatter_reduce(0, i, s, "prod", include_self=False), [(), np.array(0), ()]),
    "scatter_0d": (lambda m, x, i, s: x.scatter(0, i, s), [(), np.array(0), ()]),
    # src larger than index: torch's backward refuses it, so torch gets the part that is read
    "sum_big_src": (lambda m, x, i, s: x.scatter_reduce(0, i, s if m is tt else s[:2, :4], "amax"),
                    [(3, 4), REPEAT0, (3, 5)]),
    # scatter(reduce=...) has no gradient in torch; its gradient is scatter_reduce's with self
    "scatter_add_reduce": (lambda m, x, i, s: x.scatter(0, i, s, reduce="add") if m is tt
                           else x.scatter_reduce(0, i, s, "sum"), [(3, 4), REPEAT0, (2, 4)]),
    "scatter_multiply_reduce": (lambda m, x, i, s: x.scatter(0, i, s, reduce="multiply") if m is tt
                                else x.scatter_reduce(0, i, s, "prod"), [(3, 4), REPEAT0, (2, 4)]),
    # masked_select
    "masked_select": (lambda m, x, k: x.masked_select(k), [(3, 4), MASK]),
    "masked_select_bcast_mask": (lambda m, x, k: m.masked_select(x, k), [(2, 3, 4), MASK[:1]]),
    "masked_select_bcast_input": (lambda m, x, k: x.masked_select(k), [(4,), MASK]),
    "masked_select_empty": (lambda m, x, k: x.masked_select(k), [(3, 4), np.zeros((3, 4), bool)]),
    "masked_select_0d": (lambda m, x, k: x.masked_select(k), [(), np.array(True)]),
    "masked_select_cmp": (lambda m, x: x.masked_select(x > 0), [(3, 4)]),
}
test_scatter, test_scatter_float32, test_scatter_cuda = table_tests(
    CASES, ["scatter", "sum", "mean_no_self", "prod", "amax_ties", "masked_select"], check)


def test_prod_with_two_zeros_in_a_group_first_order():
    # torch refuses double backward here (two zeros in one group); first order is defined: 0
    x, i, s = floats(1, 2, shape=(2,)), ints(0, 0, 1), floats(0, 0, 3, shape=(3,))
    fn = lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, "prod")  # noqa: E731
    compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), [x, i, s])


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument_values(reduce):
    x, i, s = np.arange(12.0).reshape(3, 4), REPEAT0, np.arange(1.0, 9.0).reshape(2, 4)
    with warnings.catch_warnings():  # torch deprecates reduce with a tensor src (warns once)
        warnings.simplefilter("ignore")
        want = torch.tensor(x).scatter(0, torch.tensor(i), torch.tensor(s), reduce=reduce)
    got = tt.tensor(x).scatter(0, tt.tensor(i), tt.tensor(s), reduce=reduce)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    want = torch.tensor(x).scatter(0, torch.tensor(i), 3.0, reduce=reduce)
    np.testing.assert_array_equal(tt.tensor(x).scatter(0, tt.tensor(i), 3.0, reduce=reduce).numpy(), want.numpy())


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_integers(reduce, include_self):
    x, s = np.arange(-5, 7).reshape(3, 4), np.array([[7, -3, 2, 5], [4, 1, -8, 3]])
    want = torch.tensor(x).scatter_reduce(0, torch.tensor(REPEAT0), torch.tensor(s), reduce,
                                          include_self=include_self)
    got = tt.tensor(x).scatter_reduce(0, tt.tensor(REPEAT0), tt.tensor(s), reduce, include_self=include_self)
    assert got.dtype is tt.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("call", [
    lambda x, i: x.scatter(0, i, 1.0),
    lambda x, i: x.scatter_reduce(0, i, tt.ones(2, 4), "sum"),
], ids=["scatter", "scatter_reduce"])
def test_index_out_of_bounds(call):
    x = tt.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
        call(x, tt.tensor([[0, 3, 1, 1], [0, 0, 0, 0]]))
    with pytest.raises(IndexError, match=r"index -1 is out of bounds for dimension 0 with size 3"):
        call(x, tt.tensor([[0, -1, 1, 1], [0, 0, 0, 0]]))


def test_scatter_errors_name_the_op_and_shapes():
    x, i = tt.zeros(3, 4), tt.tensor([[0, 1]])
    with pytest.raises(ValueError, match=r"scatter_reduce: reduce must be one of .*'amin', got 'max'"):
        x.scatter_reduce(0, i, tt.ones(1, 2), "max")
    with pytest.raises(ValueError, match=r"scatter: reduce must be 'add' or 'multiply', got 'mean'"):
        x.scatter(0, i, tt.ones(1, 2), reduce="mean")
    with pytest.raises(ValueError, match=r"scatter: index has 1 dimensions but the input has 2"):
        x.scatter(0, tt.tensor([0, 1]), 1.0)
    with pytest.raises(ValueError, match=r"scatter: index \(1, 2\) is larger than src \(1, 1\)"):
        x.scatter(0, i, tt.ones(1, 1))
    with pytest.raises(ValueError, match=r"scatter: index \(1, 5\) is larger than the input \(3, 4\) in dimension 1"):
        x.scatter(0, tt.zeros(1, 5, dtype=tt.int64), 1.0)
    with pytest.raises(TypeError, match=r"scatter: index must be an integer Tensor, got float32"):
        x.scatter(0, tt.zeros(1, 2), 1.0)
    with pytest.raises(TypeError, match=r"masked_select: mask must be a bool Tensor, got int64"):
        x.masked_select(tt.tensor([1, 0, 1, 0]))


NONZERO = {
    "2d": np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]),
    "bool_3d": np.random.default_rng(1).uniform(size=(2, 3, 2)) < 0.5,
    "int_1d": np.array([0, 3, 0, 0, 7]),
    "empty": np.zeros((2, 3)),
    "zero_size": np.zeros((0, 3)),
    "0d": np.array(4.0),
    "0d_zero": np.array(0),
}


@pytest.mark.parametrize("name", NONZERO)
def test_nonzero(name):
    a = NONZERO[name]
    got, want = tt.tensor(a).nonzero(), torch.tensor(a).nonzero()
    assert got.dtype is tt.int64 and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    got_t, want_t = tt.nonzero(tt.tensor(a), as_tuple=True), torch.nonzero(torch.tensor(a), as_tuple=True)
    assert len(got_t) == len(want_t)
    for g, w in zip(got_t, want_t):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
