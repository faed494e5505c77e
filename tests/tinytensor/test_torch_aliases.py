"""torch's other names for ops tinytensor has (unsafe_chunk, unsafe_split, as_strided_copy,
clone(memory_format=), zero_) and nonzero_static, against torch; nonzero_static through
tt.compile at two inputs (its values are data, its shape is not)."""
import numpy as np
import pytest
import torch

import tinytensor as tt

from .cases import check_double


@pytest.mark.parametrize("name, fn", [
    ("unsafe_chunk", lambda m, x: m.unsafe_chunk(x, 3, 1)),
    ("unsafe_split", lambda m, x: m.unsafe_split(x, 2, 0)),
    ("as_strided_copy", lambda m, x: m.as_strided_copy(x, (2, 2), (1, 3), 1)),
    ("clone", lambda m, x: m.clone(x) * 2.0),
])
def test_against_torch_with_double_backward(name, fn):
    check_double(fn, [(5, 6)])


def test_clone_takes_torch_memory_formats():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    got = tt.tensor(x).clone(memory_format=torch.channels_last)
    want = torch.tensor(x).clone(memory_format=torch.channels_last)
    itemsize = got.numpy().itemsize
    assert tuple(s // itemsize for s in got.data.strides) == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(Exception, match="clone"):
        tt.tensor(x[0]).clone(memory_format=torch.channels_last)


def test_zero_():
    x = tt.tensor(np.arange(6.0))
    assert tt.zero_(x) is x and not x.numpy().any()


@pytest.mark.parametrize("size, fill", [(0, -1), (2, -1), (5, 7), (9, -3)])
def test_nonzero_static_against_torch(size, fill):
    x = np.array([[0, 1.5, 0], [2, 0, -1]])
    got = tt.nonzero_static(tt.tensor(x), size=size, fill_value=fill)
    want = torch.nonzero_static(torch.tensor(x), size=size, fill_value=fill)
    assert got.dtype == tt.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_nonzero_static_is_rerun_by_a_compiled_function():
    f = tt.compile(lambda x: tt.nonzero_static(x, size=3) * 1, backend="numpy")
    for x in (np.array([0.0, 2.0, 0.0, 1.0]), np.array([3.0, 0.0, 0.0, 0.0])):
        want = torch.nonzero_static(torch.tensor(x), size=3).numpy()
        np.testing.assert_array_equal(f(tt.tensor(x)).numpy(), want)


def test_nonzero_static_names_itself_in_errors():
    with pytest.raises(ValueError, match="nonzero_static: size"):
        tt.nonzero_static(tt.tensor([1.0]), size=-1)


def test_renorm_in_place_matches_torch_and_its_gradient():
    x = np.random.default_rng(1).standard_normal((3, 4)) * 3
    a, b = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = a * 1.0, b * 1.0
    assert ya.renorm_(2, 0, 1.5) is ya
    yb.renorm_(2, 0, 1.5)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-12)
    ya.sum().backward(), yb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)
