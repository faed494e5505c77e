"""Tensor.unfold, F.unfold / F.fold and meshgrid against PyTorch: values, gradients and double
backward in float64 (each case is fn(m, *inputs), m tinytensor or torch; shapes are random inputs)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from .cases import error_tests, table_tests
from .oracle import F as Fm, check


def _grid(m, *xs, indexing):
    return m.meshgrid(*xs, indexing=indexing)


CASES = {
    # Tensor.unfold(dimension, size, step)
    "unfold": (lambda m, x: x.unfold(0, 2, 1), [(5,)]),
    "unfold_step": (lambda m, x: x.unfold(1, 2, 3), [(2, 8, 3)]),
    "unfold_gap": (lambda m, x: x.unfold(-1, 2, 4), [(3, 7)]),       # entries no window reads
    "unfold_whole": (lambda m, x: x.unfold(0, 4, 1), [(4, 2)]),
    "unfold_overlap_twice": (lambda m, x: x.unfold(1, 3, 1).unfold(0, 2, 1), [(3, 5)]),
    "unfold_size0": (lambda m, x: x.unfold(0, 0, 2), [(4,)]),
    "unfold_0d": (lambda m, x: x.unfold(0, 1, 1), [()]),
    # F.unfold: im2col
    "im2col": (lambda m, x: Fm(m).unfold(x, 2), [(2, 3, 4, 5)]),
    "im2col_all": (lambda m, x: Fm(m).unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), [(2, 2, 5, 6)]),
    "im2col_stride_gap": (lambda m, x: Fm(m).unfold(x, 2, stride=3), [(1, 2, 7, 6)]),
    "im2col_unbatched": (lambda m, x: Fm(m).unfold(x, 3, padding=(0, 2)), [(2, 4, 3)]),
    # F.fold: col2im, overlapping blocks summed
    "col2im": (lambda m, c: Fm(m).fold(c, (4, 5), 2), [(2, 12, 12)]),
    "col2im_all": (lambda m, c: Fm(m).fold(c, (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
                   [(2, 12, 15)]),
    "col2im_unbatched": (lambda m, c: Fm(m).fold(c, 4, 3, padding=1, stride=2), [(18, 4)]),
    "fold_of_unfold": (lambda m, x: Fm(m).fold(Fm(m).unfold(x, 3, padding=1) * 2, (4, 4), 3, padding=1),
                       [(1, 2, 4, 4)]),
    # meshgrid
    "meshgrid_ij": (lambda m, a, b: _grid(m, a, b, indexing="ij"), [(3,), (4,)]),
    "meshgrid_xy": (lambda m, a, b: _grid(m, a, b, indexing="xy"), [(3,), (4,)]),
    "meshgrid_xy_3": (lambda m, a, b, c: _grid(m, a, b, c, indexing="xy"), [(2,), (3,), (4,)]),
    "meshgrid_list_0d": (lambda m, a, b: m.meshgrid([a, b], indexing="ij"), [(), (3,)]),
    "meshgrid_one": (lambda m, a: _grid(m, a, indexing="xy"), [(3,)]),
}
test_shape_ops, test_shape_ops_float32, test_shape_ops_cuda = table_tests(
    CASES, ["unfold_step", "im2col_all", "col2im_all", "meshgrid_xy"], check)


def test_meshgrid_default_is_ij():
    a, b = tt.arange(3), tt.arange(2)
    x, y = tt.meshgrid(a, b)
    assert x.shape == (3, 2) and y.tolist() == [[0, 1]] * 3


test_errors = error_tests([
    (lambda: tt.zeros(3).unfold(0, 4, 1), r"unfold: maximum size for tensor at dimension 0 is 3 but size is 4"),
    (lambda: tt.zeros(3).unfold(0, 2, 0), r"unfold: step is 0 but must be > 0"),
    (lambda: F.unfold(tt.zeros(2, 3), 2), r"unfold: expected a 3-d \(unbatched\) or 4-d \(batched\) input"),
    (lambda: F.unfold(tt.zeros(1, 1, 2, 2), 3), r"unfold: .*calculated number of sliding blocks \(0, 0\)"),
    (lambda: F.unfold(tt.zeros(1, 1, 4, 4), 2, stride=0), r"unfold: stride must be positive, got stride=\(0, 0\)"),
    (lambda: F.fold(tt.zeros(1, 6, 4), 3, 2), r"fold: expected size of input's dimension 1 to be divisible by "
                                               r"the product of kernel_size \(2, 2\) \(4\)"),
    (lambda: F.fold(tt.zeros(1, 4, 5), 3, 2), r"fold: .*calculated number of sliding blocks 2 \* 2 = 4, but "
                                               r"got input of shape \(1, 4, 5\)"),
    (lambda: tt.meshgrid(tt.zeros(2, 2)), r"meshgrid: expected 0-d or 1-d tensors, got \(2, 2\) for tensor 0"),
    (lambda: tt.meshgrid(tt.zeros(2), indexing="ji"), r"meshgrid: indexing must be 'ij' or 'xy', got 'ji'"),
])


def test_unfold_dim_out_of_range_names_the_op():
    with pytest.raises(IndexError, match=r"unfold: dimension 2 is out of range"):
        tt.zeros(3, 4).unfold(2, 1, 1)


def test_fold_undoes_unfold_up_to_the_overlap_count():
    # fold(unfold(x)) multiplies each entry by the number of blocks covering it
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
    got = F.fold(F.unfold(tt.tensor(x), 3, stride=2), (5, 5), 3, stride=2).numpy()
    cover = torch.nn.functional.fold(torch.nn.functional.unfold(torch.ones(1, 1, 5, 5), 3, stride=2),
                                     (5, 5), 3, stride=2).numpy()
    np.testing.assert_allclose(got, x * cover, rtol=1e-12)
