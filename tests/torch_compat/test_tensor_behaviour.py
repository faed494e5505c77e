"""Tensor behaviour torch scripts rely on (issue 30): formatting a 0-d tensor, view never
copying, pin_memory/non_blocking accepted, manual_seed reproducible."""
import numpy as np
import pytest
import torch

import tinytensor as tt


@pytest.mark.parametrize("spec", [".4f", "", "8.2e", "+.1%", ">10.3g"])
def test_format_of_a_0d_tensor_as_torchs(spec):
    v = np.float32(1.23456789)
    assert format(tt.tensor(v), spec) == format(torch.tensor(v), spec)
    assert f"{tt.tensor(3)}" == f"{torch.tensor(3)}"


def test_format_of_a_bigger_tensor_as_torchs():
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{tt.ones(2):.4f}"
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{torch.ones(2):.4f}"
    assert f"{tt.ones(2)}" == str(tt.ones(2))


# (how to make the tensor from a (2, 3, 4) one, the shape to view it as)
VIEWS = [
    (lambda x: x, (6, 4)),
    (lambda x: x.transpose(1, 2), (2, 12)),          # merges dims that are not adjacent in memory
    (lambda x: x.transpose(1, 2), (2, 4, 3)),        # same shape, different order: allowed
    (lambda x: x.transpose(0, 1), (3, 8)),
    (lambda x: x.transpose(0, 1), (3, 2, 2, 2)),     # splits the last dim only: a view
    (lambda x: x[:, :, 1:3], (2, 3, 2, 1)),          # split of a contiguous run
    (lambda x: x[:, :, 1:3], (6, 2)),                # merges two rows with a gap between
    (lambda x: x[:, 1:2], (2, 4)),                   # drops a size-1 dim
    (lambda x: x.permute(2, 0, 1), (4, 6)),
    (lambda x: x.permute(2, 0, 1), (2, 2, 6)),
]


@pytest.mark.parametrize("make,shape", VIEWS)
def test_view_succeeds_or_refuses_exactly_where_torch_does(make, shape):
    data = np.arange(24.0).reshape(2, 3, 4)
    a, b = make(tt.tensor(data)), make(torch.tensor(data))
    try:
        want = b.view(shape)
    except RuntimeError as e:
        assert "view size is not compatible" in str(e)
        with pytest.raises(RuntimeError, match=r"view size is not compatible .* Use \.reshape"):
            a.view(shape)
        return
    got = a.view(shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    got[(0,) * len(shape)] = -1.0  # a view: the write reaches the tensor it came from
    assert a.numpy().min() == -1.0


def test_view_of_a_transposed_tensor_names_shapes_and_strides():
    with pytest.raises(RuntimeError, match=r"\(view: shape \(4, 3\) with strides \(1, 4\) -> \(12,\)\)"):
        tt.zeros(3, 4).t().view(12)
    assert tt.zeros(3, 4).t().reshape(12).shape == (12,)  # reshape copies instead


def test_pin_memory_and_non_blocking_are_accepted():
    x = tt.ones(3)
    assert x.pin_memory() is x and not x.is_pinned()
    assert x.to("cpu", non_blocking=True) is x
    y = x.to(tt.float64, non_blocking=True)
    assert y.dtype is tt.float64


def test_manual_seed_repeats_the_stream():
    tt.manual_seed(1234)
    a = (tt.randn(5).numpy(), tt.randint(0, 100, (4,)).numpy())
    tt.manual_seed(1234)
    b = (tt.randn(5).numpy(), tt.randint(0, 100, (4,)).numpy())
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
