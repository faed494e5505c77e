"""Indexing ops against PyTorch: getitem, setitem, gather, scatter_add, masked_fill,
index_select and embedding; forward, gradient and gradient-of-gradient in float64.

Each case is `fn(m, *inputs)` with `m` the library (tinytensor or torch). Inputs are shapes
(random float64 tensors that require grad) or arrays: int and bool arrays become constant
index tensors of the matching library.
"""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import F, check





def put(x, key, value):
    """setitem recorded on a non-leaf: y = x * 1; y[key] = value."""
    y = x * 1
    y[key] = value
    return y


def ints(*values):
    return np.array(values, dtype=np.int64)


def mask(shape, seed=0):
    return np.random.default_rng(seed).uniform(size=shape) < 0.5


IDX = ints(2, 0, 2, 1, 2)            # repeated entries: gradients must accumulate
M34 = mask((3, 4))
M3 = np.array([True, False, True])
E = np.zeros(0, dtype=np.int64)
IDS = ints(1, 4, 1, 0, 1, 2).reshape(2, 3)  # token ids with repeats
ALONG0 = ints(0, 2, 2, 1, 0, 0, 0, 1).reshape(2, 4)  # gather/scatter indices along dim 0 of (3, 4)

CASES = {
    # basic indexing
    "int": (lambda m, x: x[1], [(3, 4)]),
    "int_neg": (lambda m, x: x[-1], [(3, 4)]),
    "int_int": (lambda m, x: x[1, -2], [(3, 4)]),
    "int_1d": (lambda m, x: x[2], [(4,)]),
    "int_col": (lambda m, x: x[:, -3], [(3, 4, 2)]),
    "slice": (lambda m, x: x[1:], [(3, 4)]),
    "slice_step": (lambda m, x: x[::2, 1::2], [(5, 4)]),
    "slice_neg": (lambda m, x: x[-2:, :-1], [(3, 4)]),
    "slice_step_bounds": (lambda m, x: x[1:-1:2], [(7, 2)]),
    "slice_empty": (lambda m, x: x[2:1], [(3, 4)]),
    "slice_past_end": (lambda m, x: x[1:10], [(3, 4)]),
    "ellipsis": (lambda m, x: x[..., 1], [(2, 3, 4)]),
    "ellipsis_mid": (lambda m, x: x[1, ..., 2], [(2, 3, 4)]),
    "ellipsis_only": (lambda m, x: x[...], [(2, 3)]),
    "none": (lambda m, x: x[None], [(2, 3)]),
    "none_mid": (lambda m, x: x[:, None, 1], [(2, 3)]),
    "none_ellipsis": (lambda m, x: x[..., None, :], [(2, 3)]),
    "scalar_ellipsis": (lambda m, x: x[...], [()]),
    "scalar_none": (lambda m, x: x[None], [()]),
    "zero_dim": (lambda m, x: x[:, 1:], [(0, 3)]),
    # advanced indexing
    "list": (lambda m, x: x[[0, 2]], [(3, 4)]),
    "list_repeat": (lambda m, x: x[[1, 1, 0, 1]], [(3, 4)]),
    "list_neg": (lambda m, x: x[[-1, 0, -1]], [(3, 4)]),
    "array": (lambda m, x, i: x[i], [(3, 4), IDX]),
    "array_2d": (lambda m, x, i: x[i], [(3, 4), ints(0, 2, 2, 1).reshape(2, 2)]),
    "array_col": (lambda m, x, i: x[:, i], [(2, 3), IDX]),
    "array_last": (lambda m, x, i: x[..., i], [(2, 2, 3), IDX]),
    "array_0d": (lambda m, x, i: x[i], [(3, 4), np.array(1)]),
    "array_empty": (lambda m, x, i: x[i], [(3, 4), E]),
    "two_arrays": (lambda m, x, i, j: x[i, j], [(3, 4), ints(0, 2, 2), ints(3, 1, 3)]),
    "two_arrays_bcast": (lambda m, x, i, j: x[i, j], [(3, 4), ints(0, 2).reshape(2, 1), ints(1, 1, 3)]),
    "arrays_split": (lambda m, x, i, j: x[i, :, j], [(3, 2, 4), ints(0, 2, 0), ints(1, 3, 1)]),
    "arrays_adjacent": (lambda m, x, i, j: x[:, i, j], [(2, 3, 4), ints(0, 2, 0), ints(1, 3, 1)]),
    "int_and_array": (lambda m, x, i: x[1, i], [(3, 4), IDX[:3]]),
    "int_array_split": (lambda m, x, i: x[i, :, 1], [(3, 2, 4), IDX]),
    # PyTorch applies ints before arrays (NumPy would move the array dims first here)
    "int_slice_array": (lambda m, x, i: x[1, :, i], [(3, 2, 4), IDX[:3]]),
    "int_none_array": (lambda m, x, i: x[2, None, i], [(3, 4, 5), IDX[:3]]),
    "slice_int_none_array": (lambda m, x, i: x[:, 1, None, i], [(2, 3, 4), IDX]),
    "int_ellipsis_array": (lambda m, x, i: x[0, ..., i], [(2, 3, 4, 3), IDX]),
    "int_slice_mask": (lambda m, x, k: x[1, :, k], [(2, 4, 3), M3]),
    "int0d_slice_array": (lambda m, x, j, i: x[j, :, i], [(3, 2, 4), np.array(1), IDX[:3]]),
    "slice_and_array": (lambda m, x, i: x[1:, i], [(3, 4), IDX]),
    "none_and_array": (lambda m, x, i: x[None, i, 1:], [(3, 4), IDX]),
    "ellipsis_array": (lambda m, x, i: x[..., i, :], [(2, 3, 4), IDX]),
    # boolean masks
    "mask_full": (lambda m, x, k: x[k], [(3, 4), M34]),
    "mask_lead": (lambda m, x, k: x[k], [(3, 4, 2), M34]),
    "mask_1d": (lambda m, x, k: x[k], [(3, 4), M3]),
    "mask_list": (lambda m, x: x[[True, False, True]], [(3, 4)]),
    "mask_col": (lambda m, x, k: x[:, k], [(4, 3), M3]),
    "mask_slice": (lambda m, x, k: x[k, 1:], [(3, 4), M3]),
    "mask_none": (lambda m, x, k: x[np.zeros(3, bool) if m is tt else torch.zeros(3, dtype=torch.bool)],
                  [(3, 4), M3]),
    "mask_cmp": (lambda m, x: x[x > 0], [(3, 4)]),
    "mask_empty_dim": (lambda m, x, k: x[k], [(0, 3), np.zeros(0, dtype=bool)]),
    # gather / scatter_add
    "gather": (lambda m, x, i: x.gather(1, i), [(3, 4), ints(0, 3, 3, 1, 2, 2).reshape(3, 2)]),
    "gather_dim0": (lambda m, x, i: m.gather(x, 0, i), [(3, 4), ALONG0]),
    "gather_small": (lambda m, x, i: x.gather(-1, i), [(3, 4), ints(1, 1, 0, 3).reshape(2, 2)]),
    "gather_3d": (lambda m, x, i: x.gather(1, i), [(2, 3, 2), ALONG0.reshape(2, 2, 2)]),
    "scatter_add": (lambda m, x, i, s: x.scatter_add(0, i, s), [(3, 4), ALONG0, (2, 4)]),
    # src larger than index: torch 2.13's own backward fails on it, so torch gets src[:2, :2]
    "scatter_add_big_src": (lambda m, x, i, s: x.scatter_add(1, i, s if m is tt else s[:2, :2]),
                            [(3, 4), ints(3, 3, 0, 1).reshape(2, 2), (3, 5)]),
    "scatter_add_neg": (lambda m, x, i, s: m.scatter_add(x, -1, i, s), [(2, 3), ALONG0[:, :2], (2, 2)]),
    # masked_fill
    "masked_fill": (lambda m, x, k: x.masked_fill(k, -1.5), [(3, 4), M34]),
    "masked_fill_bcast": (lambda m, x, k: x.masked_fill(k, 0.0), [(2, 3, 4), mask((1, 4))]),
    "masked_fill_lead": (lambda m, x, k: m.masked_fill(x, k, -1e4), [(2, 3, 4), mask((3, 1))]),
    "masked_fill_tensor": (lambda m, x, v, k: x.masked_fill(k, v), [(3, 4), (), M34]),
    "masked_fill_int": (lambda m, x, k: x.masked_fill(k, 2), [(3, 4), M34]),
    "masked_fill_causal": (lambda m, x: x.masked_fill(m.ones(3, 3, dtype=m.bool).triu(1), -1e9),
                           [(2, 3, 3)]),
    # index_select
    "index_select": (lambda m, x, i: x.index_select(0, i), [(3, 4), IDX]),
    "index_select_dim": (lambda m, x, i: m.index_select(x, -1, i), [(2, 3, 4), ints(3, 0, 3)]),
    "index_select_empty": (lambda m, x, i: x.index_select(1, i), [(2, 3), E]),
    # embedding
    "embedding": (lambda m, w, i: F(m).embedding(i, w), [(5, 3), IDS]),
    "embedding_1d": (lambda m, w, i: F(m).embedding(i, w), [(5, 3), IDX]),
    "embedding_pad": (lambda m, w, i: F(m).embedding(i, w, padding_idx=1), [(5, 3), IDS]),
    "embedding_pad_neg": (lambda m, w, i: F(m).embedding(i, w, padding_idx=-1), [(5, 3), ints(4, 4, 0, 3)]),
    # setitem recorded on a non-leaf: gradients for both the tensor and the value
    "set_int": (lambda m, x, v: put(x, 1, v), [(3, 4), (4,)]),
    "set_int_bcast": (lambda m, x, v: put(x, 1, v), [(3, 4), (1,)]),
    "set_value_lead_ones": (lambda m, x, v: put(x, 1, v), [(3, 4), (1, 1, 4)]),
    "set_scalar_value": (lambda m, x, v: put(x, (0, 2), v), [(3, 4), ()]),
    "set_slice": (lambda m, x, v: put(x, (slice(1, 3),), v), [(3, 4), (2, 4)]),
    "set_slice_bcast": (lambda m, x, v: put(x, (slice(None), slice(None, None, 2)), v), [(3, 4), (3, 1)]),
    "set_slice_bcast_lead": (lambda m, x, v: put(x, (slice(0, 2), slice(None)), v), [(2, 3, 4), (4,)]),
    "set_ellipsis": (lambda m, x, v: put(x, (Ellipsis, 0), v), [(2, 3, 4), (3,)]),
    "set_array": (lambda m, x, v: put(x, [2, 0], v), [(3, 4), (2, 4)]),
    "set_array_bcast": (lambda m, x, v: put(x, (slice(None), [3, 1]), v), [(3, 4), (2,)]),
    "set_two_arrays": (lambda m, x, v: put(x, ([0, 2, 1], [3, 3, 0]), v), [(3, 4), (3,)]),
    "set_int_slice_array": (lambda m, x, v: put(x, (1, slice(None), [2, 0]), v), [(2, 3, 4), (3, 2)]),
    "set_mask": (lambda m, x, v, k: put(x, k, v), [(3, 4), (), M34]),
    "set_mask_rows": (lambda m, x, v, k: put(x, k, v), [(3, 4), (4,), M3]),
    "set_python_float": (lambda m, x: put(x, (slice(None), 1), 2.5), [(3, 4)]),
}


FLOAT32 = ["slice_step", "array", "two_arrays_bcast", "mask_lead", "gather", "scatter_add_big_src",
           "masked_fill_bcast", "embedding_pad", "set_slice_bcast", "set_array_bcast"]
test_indexing, test_indexing_float32, test_indexing_cuda = table_tests(CASES, FLOAT32, check)


# ---------------------------------------------------------------- setitem without autograd
SET_CASES = {
    "int": (1, 7.0),
    "neg_slice": ((slice(None), slice(-2, None)), 3.0),
    "step": ((slice(None, None, 2),), np.arange(4.0)),
    "list": ([0, 2], np.ones((2, 4))),
    "arrays": (([0, 1, 2], [3, 2, 1]), np.array([1.0, 2.0, 3.0])),
    "mask": (M34, -1.0),
    "mask_rows": (M3, np.arange(4.0)),
    "ellipsis_none": ((Ellipsis, None, 1), np.array([5.0])),
}


@pytest.mark.parametrize("name", SET_CASES)
def test_setitem_data(name):
    key, value = SET_CASES[name]
    a = np.arange(12.0).reshape(3, 4)
    x, y = tt.tensor(a), torch.tensor(a)
    x[key] = tt.tensor(value) if isinstance(value, np.ndarray) else value
    y[torch.tensor(key) if isinstance(key, np.ndarray) else key] = (
        torch.tensor(value) if isinstance(value, np.ndarray) else value)
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert x._version_number == 1


def test_setitem_int_tensor_value_is_cast():
    x = tt.zeros(2, 3)
    x[0] = tt.tensor([1, 2, 3])
    assert x.dtype == tt.float32 and x.tolist() == [[1, 2, 3], [0, 0, 0]]


def test_setitem_value_requiring_grad_into_constant():
    v = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    x = tt.zeros(3, 2, dtype=tt.float64)
    x[1] = v * 3
    (x * x).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), 18 * v.detach().numpy())


def test_setitem_on_leaf_requiring_grad_raises():
    x = tt.zeros(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"setitem.*leaf.*requires grad"):
        x[0] = 1.0


def test_setitem_on_leaf_under_no_grad_is_allowed():
    x = tt.zeros(3, 4, requires_grad=True)
    with tt.no_grad():
        x[0, 1] = 2.0
    assert x.requires_grad and x.is_leaf and x.detach().numpy()[0, 1] == 2


def test_setitem_after_advanced_getitem_is_allowed():
    # advanced indexing copies: x keeps no view, so recording an in-place write on x is fine
    w = tt.tensor([1.0, 2.0, 3.0], dtype=tt.float64, requires_grad=True)
    x = w * 1
    picked = x[[0, 2]]
    x[1] = 0.0
    (picked.sum() + x.sum()).backward()
    assert picked.tolist() == [1.0, 3.0] and w.grad.tolist() == [2.0, 0.0, 2.0]


def test_setitem_after_save_is_detected():
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    z = (y * y).sum()  # y is saved for backward
    y[0] = 5.0
    with pytest.raises(RuntimeError):
        z.backward()


def test_embedding_padding_row_gets_zero_grad():
    w = tt.randn(4, 3, requires_grad=True)
    F(tt).embedding(tt.tensor([[0, 2], [2, 1]]), w, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[2], 0)
    np.testing.assert_array_equal(w.grad.numpy()[0], 1)


# ---------------------------------------------------------------- bad input
ERRORS = {
    "int_range": (lambda x: x[3], IndexError, r"index 3.*size 3"),
    "int_range_neg": (lambda x: x[-4], IndexError, r"index -4.*size 3"),
    "int_range_dim1": (lambda x: x[0, 4], IndexError, r"index 4.*dimension 1.*size 4"),
    "list_range": (lambda x: x[[0, 5]], IndexError, r"index 5.*size 3"),
    "tensor_range": (lambda x: x[:, tt.tensor([1, -5])], IndexError, r"index -5.*size 4"),
    "too_many": (lambda x: x[0, 0, 0], IndexError, "too many indices"),
    "float_index": (lambda x: x[tt.tensor([0.0])], IndexError, "integer or bool"),
    "mask_shape": (lambda x: x[tt.tensor([True, False])], IndexError, r"mask.*\(2,\).*\(3, 4\)"),
    "mask_shape_2d": (lambda x: x[tt.ones(3, 3, dtype=tt.bool)], IndexError, "mask"),
    "two_ellipsis": (lambda x: x[..., 0, ...], IndexError, "Ellipsis"),
    "gather_range": (lambda x: x.gather(1, tt.tensor([[4]])), IndexError, r"gather.*index 4"),
    "gather_ndim": (lambda x: x.gather(1, tt.tensor([1])), ValueError, "gather"),
    "gather_float": (lambda x: x.gather(1, tt.tensor([[1.0]])), TypeError, "gather"),
    "scatter_src_small": (lambda x: x.scatter_add(0, tt.tensor([[0, 1]]), tt.zeros(1, 1)), ValueError,
                          "scatter_add"),
    "masked_fill_mask": (lambda x: x.masked_fill(tt.ones(3, 4), 0.0), TypeError, "masked_fill"),
    # out of place a bigger mask broadcasts the input, as in torch; in place it cannot
    "masked_fill_bigger_mask": (lambda x: x.detach().masked_fill_(tt.ones(2, 3, 4, dtype=tt.bool), 0.0),
                                RuntimeError, "masked_fill_"),
    "masked_fill_value_1d": (lambda x: x.masked_fill(tt.ones(4, dtype=tt.bool), tt.zeros(4)), ValueError,
                             "masked_fill.*0-d"),
    "index_select_2d": (lambda x: x.index_select(0, tt.tensor([[0]])), TypeError, "index_select"),
    "index_select_range": (lambda x: x.index_select(1, tt.tensor([4])), IndexError, "index 4"),
    "embedding_float_ids": (lambda x: F(tt).embedding(tt.tensor([0.0]), x), TypeError, "embedding"),
    "embedding_range": (lambda x: F(tt).embedding(tt.tensor([3]), x), IndexError, r"index 3.*size 3"),
    "setitem_shape": (lambda x: x.__setitem__(0, tt.zeros(3)), ValueError, r"setitem.*\(3,\).*\(4,\)"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_indexing_errors(name):
    fn, exc, match = ERRORS[name]
    with pytest.raises(exc, match=match):
        fn(tt.zeros(3, 4))
