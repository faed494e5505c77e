"""split_parts (tinytensor/ops/split_parts.py): the pieces of a tensor as one op, against
torch.split in float64 (values, gradients with pieces left unused, double backward), its
error, and under tt.compile at two inputs."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.messages import OpError
from tinytensor.ops.split_parts import split_parts
from tinytensor.testing import gradcheck, gradgradcheck

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("shape,sizes,dim", [((5, 3), (2, 0, 3), 0), ((2, 6), (1, 2, 3), -1), ((4, 2, 3), (4,), 0)])
def test_values_and_gradients_match_torch_split(shape, sizes, dim):
    a = RNG.standard_normal(shape)
    x, xt = tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ours, theirs = split_parts(x, sizes, dim), torch.split(xt, list(sizes), dim)
    assert len(ours) == len(theirs)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    # only the last piece reaches the loss: the others' gradients are zeros
    g = RNG.standard_normal(tuple(theirs[-1].shape))
    (ours[-1] * tt.tensor(g)).sum().backward()
    (theirs[-1] * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_gradcheck_and_double_backward():
    x = tt.tensor(RNG.standard_normal((4, 3)), requires_grad=True)

    def f(x):
        a, b = split_parts(x, (1, 3), 0)
        return (a * a).sum() + (b ** 3).sum()
    gradcheck(f, [x])
    gradgradcheck(f, [x])


def test_sizes_must_add_up():
    with pytest.raises(OpError, match=r"split_parts: sizes \[1, 1\] must be non-negative and add up to the size 3 "
                                      r"of dimension 0 of shape \(3, 2\)"):
        split_parts(tt.zeros(3, 2), (1, 1))


def test_compiled_replay_follows_each_input():
    def step(x):
        a, b = split_parts(x, (2, 1), 0)
        loss = (a.sum(0) * b[0]).sum()
        loss.backward()
        return loss
    f = tt.compile(step, backend="numpy")
    for _ in range(2):
        a = RNG.standard_normal((3, 2))
        x, xe = tt.tensor(a, requires_grad=True), tt.tensor(a, requires_grad=True)
        np.testing.assert_allclose(float(f(x)), float(step(xe)), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-12)


def test_capture_keeps_the_pieces_of_a_multi_output_op_it_is_recording():
    """A long chain of split_parts only: the capture's release of unreachable arrays
    (compiler/capture.py) runs at some split's own recording, when its pieces are on their
    way to the caller and held by nothing else yet; they must not be released there."""
    def step(x):
        for _ in range(150):
            x = split_parts(x, (1, x.shape[0] - 1), 0)[1]
        return x.sum()
    a = RNG.standard_normal((160, 2))
    f = tt.compile(step, backend="numpy")
    for _ in range(2):
        np.testing.assert_allclose(float(f(tt.tensor(a))), float(step(tt.tensor(a))), rtol=1e-12)
