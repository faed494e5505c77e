"""The NumPy-style shape composites (ops/stacking.py), the creation functions of
creation_more.py, resize_, mH/H, broadcast_shapes with ints and pad 'replicate' with
negative pads, against PyTorch: values, gradients and double backward in float64 (each
case is fn(m, *inputs), m tinytensor or torch; shapes are random inputs)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import check, F

CASES = {
    "atleast_1d": (lambda m, x: m.atleast_1d(x.sum()), [(3,)]),
    "atleast_2d_many": (lambda m, x, y: m.atleast_2d(x, y.sum()), [(3,), (2,)]),
    "atleast_3d_list": (lambda m, x, y: m.atleast_3d([x, y]), [(3, 2), (4,)]),
    "hstack_1d": (lambda m, x, y: m.hstack([x, y]), [(3,), (2,)]),
    "hstack_2d": (lambda m, x, y: m.hstack((x, y)), [(3, 2), (3, 1)]),
    "vstack": (lambda m, x, y: m.vstack([x, y]), [(3,), (2, 3)]),
    "row_stack": (lambda m, x, y: m.row_stack([x, y]), [(2, 3), (1, 3)]),
    "dstack": (lambda m, x, y: m.dstack([x, y]), [(2, 3), (2, 3, 2)]),
    "column_stack": (lambda m, x, y, z: m.column_stack([x, y, z]), [(3,), (3, 2), (3, 1)]),
    "column_stack_0d": (lambda m, x, y: m.column_stack([x.sum(), y.sum()]), [(3,), (2,)]),
    "tensor_split_sections": (lambda m, x: m.tensor_split(x, 3, 1), [(2, 7)]),
    "tensor_split_indices": (lambda m, x: x.tensor_split([1, 6, 2, -1], dim=-1), [(2, 5)]),
    "tensor_split_tensor": (lambda m, x: m.tensor_split(x, m.tensor([1, 3])), [(5, 2)]),
    "hsplit": (lambda m, x: m.hsplit(x, 2), [(3, 4)]),
    "hsplit_1d_indices": (lambda m, x: x.hsplit([2, 3]), [(5,)]),
    "vsplit": (lambda m, x: m.vsplit(x, [1]), [(3, 4)]),
    "dsplit": (lambda m, x: m.dsplit(x, 3), [(2, 1, 6)]),
    "split_with_sizes": (lambda m, x: m.split_with_sizes(x, [1, 0, 3], -1), [(2, 4)]),
    "ravel": (lambda m, x: m.ravel(x.mT), [(3, 4)]),
    "fliplr": (lambda m, x: m.fliplr(x), [(3, 4, 2)]),
    "flipud": (lambda m, x: x.flipud(), [(3, 4)]),
    "rot90": (lambda m, x: m.rot90(x), [(3, 4)]),
    "rot90_k2": (lambda m, x: m.rot90(x, 2, [1, 2]), [(2, 3, 4)]),
    "rot90_k3_neg": (lambda m, x: x.rot90(-1, [2, 0]), [(2, 3, 4)]),
    "rot90_k4": (lambda m, x: m.rot90(x, 4), [(2, 3)]),
    "cartesian_prod": (lambda m, x, y: m.cartesian_prod(x, y), [(3,), (2,)]),
    "cartesian_prod_one": (lambda m, x: m.cartesian_prod(x), [(3,)]),
    "combinations": (lambda m, x: m.combinations(x), [(4,)]),
    "combinations_r3_repl": (lambda m, x: m.combinations(x, 3, with_replacement=True), [(3,)]),
    "combinations_r0": (lambda m, x: m.combinations(x, 0), [(3,)]),
    "diagflat": (lambda m, x: m.diagflat(x, -1), [(2, 2)]),
    "constant_pad_nd": (lambda m, x: m.constant_pad_nd(x, [1, -1, 2, 0], 0.5), [(2, 3)]),
    "sum_to_size": (lambda m, x: x.sum_to_size(3, 1), [(2, 3, 4)]),
    "alias_copy": (lambda m, x: m.alias_copy(x), [(3,)]),
    "diagonal_copy": (lambda m, x: m.diagonal_copy(x, 1), [(3, 4)]),
    "expand_copy": (lambda m, x: m.expand_copy(x, (2, 3, 4)), [(3, 1)]),
    "narrow_copy_neg_start": (lambda m, x: m.narrow_copy(x, 1, -3, 2), [(2, 5)]),
    "permute_copy": (lambda m, x: m.permute_copy(x, (2, 0, 1)), [(2, 3, 4)]),
    "squeeze_copy": (lambda m, x: m.squeeze_copy(x, 1), [(2, 1, 3)]),
    "t_copy": (lambda m, x: m.t_copy(x), [(2, 3)]),
    "transpose_copy": (lambda m, x: m.transpose_copy(x, 0, -1), [(2, 3, 4)]),
    "unbind_copy": (lambda m, x: m.unbind_copy(x, 1), [(2, 3)]),
    "unfold_copy": (lambda m, x: m.unfold_copy(x, 1, 2, 1), [(2, 4)]),
    "unsqueeze_copy": (lambda m, x: m.unsqueeze_copy(x, -1), [(2, 3)]),
    "view_copy": (lambda m, x: m.view_copy(x, (3, -1)), [(2, 3, 2)]),
    "split_with_sizes_copy": (lambda m, x: m.split_with_sizes_copy(x, [2, 1]), [(3, 2)]),
    "mH": (lambda m, x: x.mH, [(2, 3, 4)]),
    "H": (lambda m, x: x.H, [(3, 4)]),
    "pad_replicate_negative": (lambda m, x: F(m).pad(x, (-4, 5, 2, -3), mode="replicate"),
                               [(2, 2, 4, 4)]),
}
test_stacking, test_stacking_float32, test_stacking_cuda = table_tests(
    CASES, ["hstack_2d", "tensor_split_indices", "rot90", "cartesian_prod", "combinations",
            "pad_replicate_negative"], check)


@pytest.mark.parametrize("call", [
    lambda m: m.tril_indices(4, 3),
    lambda m: m.tril_indices(3, 5, -1),
    lambda m: m.triu_indices(4, 6, 2),
    lambda m: m.triu_indices(0, 3, dtype=m.int32),
    lambda m: m.logspace(-2, 3, 11),
    lambda m: m.logspace(0, 1, 1, base=2.0),
    lambda m: m.logspace(1, -2, 7, base=3.0, dtype=m.float32),
    lambda m: m.logspace(m.tensor(0), m.tensor(2), 5, dtype=m.int64),
    lambda m: m.scalar_tensor(3),
    lambda m: m.scalar_tensor(2.5, dtype=m.float32),
    lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).resize_(3),
    lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).resize_as_(m.zeros(1, 3)),
])
def test_made_as_torch(call):
    a, e = call(tt), call(torch)
    if isinstance(e, torch.Size):
        assert a == tuple(e)
        return
    assert str(a.dtype).removeprefix("tinytensor.") == str(e.dtype).removeprefix("torch."), (a.dtype, e.dtype)
    np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-14)


def test_broadcast_shapes_takes_ints_as_numpy_does():
    assert tt.broadcast_shapes(5, (3, 1), [1, 1, 1]) == np.broadcast_shapes(5, (3, 1), (1, 1, 1))


def test_empty_forms_have_torch_shapes_and_dtypes():
    x = tt.zeros(2, dtype=tt.float32)
    for t, shape, dtype in [(tt.empty_strided((2, 3), (1, 2)), (2, 3), tt.float32),
                            (tt.empty_permuted((2, 3, 4), (2, 0, 1), dtype=tt.float64), (2, 3, 4),
                             tt.float64),
                            (x.new_empty(3, 1), (3, 1), tt.float32),
                            (x.new_empty_strided((4,), (2,), dtype=tt.int64), (4,), tt.int64)]:
        assert t.shape == shape and t.dtype == dtype


def test_resize_grows_with_zeros_and_bumps_the_version():
    x = tt.tensor([1.0, 2.0])
    v = x._version_number
    x.resize_(2, 2)
    assert x.tolist() == [[1.0, 2.0], [0.0, 0.0]] and x._version_number == v + 1


@pytest.mark.parametrize("call, err, match", [
    (lambda: tt.tensor_split(tt.tensor(1.0), 2), Exception, r"tensor_split: expected at least a 1-dim"),
    (lambda: tt.tensor_split(tt.zeros(3), 0), Exception, r"tensor_split: number of sections"),
    (lambda: tt.hsplit(tt.zeros(2, 3), 2), Exception, r"hsplit: dimension 1 of shape \(2, 3\)"),
    (lambda: tt.vsplit(tt.zeros(3), 1), Exception, r"vsplit: requires a tensor with at least 2"),
    (lambda: tt.dsplit(tt.zeros(3, 2), 1), Exception, r"dsplit: requires a tensor with at least 3"),
    (lambda: tt.fliplr(tt.zeros(3)), Exception, r"fliplr: input must be at least 2-d"),
    (lambda: tt.rot90(tt.zeros(2, 2), 1, [0, -2]), Exception, r"rot90: expected rotation dims"),
    (lambda: tt.cartesian_prod(tt.zeros(2, 2)), Exception, r"cartesian_prod: expected 1-d"),
    (lambda: tt.combinations(tt.zeros(2, 2)), Exception, r"combinations: expected a 1-d"),
    (lambda: tt.zeros(2, 3).sum_to_size(3, 3), Exception, r"sum_to_size: size \(3, 3\)"),
    (lambda: tt.split_with_sizes(tt.zeros(4), [1, 2]), Exception, r"split_with_sizes: split_sizes"),
    (lambda: tt.zeros(2, requires_grad=True).resize_(3), RuntimeError, r"resize_: cannot resize"),
    (lambda: tt.zeros(2, 2, 2).H, RuntimeError, r"H: tensor.H is only supported on matrices"),
    (lambda: tt.tril_indices(-1, 2), ValueError, r"tril_indices: row and col"),
    (lambda: tt.empty_permuted((2, 3), (0, 0)), ValueError, r"empty_permuted: physical_layout"),
])
def test_errors_name_the_op(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_combinations_and_tensor_split_compile_with_new_sizes():
    """The index arrays follow the sizes: a compiled step gives each call's own answer."""
    f = tt.compile(lambda x: tt.combinations(x).sum(1) + 0 * tt.tensor_split(x, 2)[0].sum())
    for n in (4, 5):
        x = tt.arange(float(n))
        expect = torch.combinations(torch.arange(float(n))).sum(1).numpy()
        np.testing.assert_allclose(f(x).numpy(), expect)


def test_tensor_split_at_computed_indices_is_refused_under_compile():
    """The pieces' sizes follow the index values: a replay would freeze the first call's."""
    f = tt.compile(lambda x, i: tt.tensor_split(x, i * 1)[0].sum())
    with pytest.raises(Exception, match=r"reads a tensor.s value into Python \(tensor_split\)"):
        f(tt.arange(5.0), tt.tensor([2]))
