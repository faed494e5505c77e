"""The GELU's slope as one op (ops/elementwise.py GeluErfSlope, GeluTanhSlope, recorded by
Gelu.backward): on the tape of a differentiable backward, and differentiable itself, its
second and third derivatives and its forward-mode derivative against torch in float64."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import func

APPROXIMATE = ["none", "tanh"]
# for x << 0, 1 + erf (torch's exact slope) cancels: a few eps; and the tanh GELU's 1 - t*t
# (in both libraries' derivatives) rounds to 0 below x ~ -7 where the value is ~1e-14
ATOL = {"none": 1e-14, "tanh": 1e-12}


def _x():
    # both sides of the slope's zero (x ~ -0.75), the far left where 1 + erf cancels, 0
    x = np.concatenate([np.linspace(-9, 5, 57), [-0.7517916, 0.0, -1e-8, 3e-9]])
    return x, np.random.default_rng(0).standard_normal(x.shape)


def _derivatives(lib, x, g, approximate, order):
    """d^k/dx^k of sum(g * gelu(x)) for k = 1..order, each by the backward of the last."""
    if lib is tt:
        t = tt.tensor(x, requires_grad=True)
        out = (F.gelu(t, approximate=approximate) * tt.tensor(g)).sum()
        grad = tt.grad
    else:
        t = torch.tensor(x, requires_grad=True)
        out = (torch.nn.functional.gelu(t, approximate=approximate) * torch.tensor(g)).sum()
        grad = torch.autograd.grad
    got = []
    for _ in range(order):
        (d,) = grad(out, [t], create_graph=True)
        got.append(d.detach().numpy().copy())
        out = d.sum()
    return got


@pytest.mark.parametrize("approximate", APPROXIMATE)
def test_second_and_third_derivatives_match_torch(approximate):
    x, g = _x()
    ours, theirs = _derivatives(tt, x, g, approximate, 3), _derivatives(torch, x, g, approximate, 3)
    for k, (a, b) in enumerate(zip(ours, theirs), 1):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=ATOL[approximate], err_msg=f"order {k}")


@pytest.mark.parametrize("approximate, op", [("none", "gelu_erf_slope"), ("tanh", "gelu_tanh_slope")])
def test_the_slope_is_one_op_on_a_differentiable_backward(approximate, op):
    x = tt.tensor(np.linspace(-3, 3, 7), requires_grad=True)
    with tt.record() as tape:
        tt.grad(F.gelu(x, approximate=approximate).sum(), [x], create_graph=True)
    names = [node.name for node in tape]
    assert names.count(op) == 1 and not {"erf", "tanh", "exp"} & set(names), names


@pytest.mark.parametrize("approximate", APPROXIMATE)
def test_forward_mode_over_the_slope_matches_torch(approximate):
    x, v = _x()
    ours = func.jvp(func.grad(lambda t: F.gelu(t, approximate=approximate).sum()), (tt.tensor(x),), (tt.tensor(v),))[1]
    theirs = torch.func.jvp(torch.func.grad(lambda t: torch.nn.functional.gelu(t, approximate=approximate).sum()),
                            (torch.tensor(x),), (torch.tensor(v),))[1]
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=ATOL[approximate])
