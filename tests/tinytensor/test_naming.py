"""Names that say what they do: a trailing underscore always means in place (issue 28)."""
import numpy as np

import tinytensor as tt
import tinytensor.ops as ops


def test_out_of_place_ops_have_no_trailing_underscore():
    # abs_ and round_ were out-of-place ops while add_ writes into its tensor
    assert not hasattr(ops, "abs_") and not hasattr(ops, "round_")
    x = tt.tensor([-1.5, 0.5, 2.5])
    for fn, want in ((ops.absolute, [1.5, 0.5, 2.5]), (ops.round_half_even, [-2.0, 0.0, 2.0])):
        y = fn(x)
        assert y is not x and np.array_equal(y.numpy(), want)
        assert np.array_equal(x.numpy(), [-1.5, 0.5, 2.5])   # x untouched
    assert tt.abs is ops.absolute and tt.absolute is ops.absolute and tt.round is ops.round_half_even
    assert tt.Tensor.abs is ops.absolute and tt.Tensor.round is ops.round_half_even


def test_every_public_op_with_a_trailing_underscore_writes_in_place():
    x = tt.tensor([1.0, -2.0, 3.0])
    for name in ("add_", "sub_", "mul_", "div_", "clamp_", "zero_", "fill_"):
        y = x.clone()
        args = {"add_": (1.0,), "sub_": (1.0,), "mul_": (2.0,), "div_": (2.0,), "clamp_": (0.0, 1.0),
                "zero_": (), "fill_": (5.0,)}[name]
        out = getattr(ops, name)(y, *args)
        assert out is y and y._version[0] == 1, name
