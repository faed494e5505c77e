"""Optimizers refuse hyperparameters that would silently poison every parameter."""
import math

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt


def _params():
    return [tt.zeros(3, requires_grad=True)]


@pytest.mark.parametrize("make", [
    lambda v: nn.optim.SGD(_params(), lr=v),
    lambda v: nn.optim.SGD(_params(), lr=0.1, momentum=v),
    lambda v: nn.optim.SGD(_params(), lr=0.1, dampening=v),
    lambda v: nn.optim.Adam(_params(), lr=v),
    lambda v: nn.optim.Adam(_params(), eps=v),
    lambda v: nn.optim.AdamW(_params(), weight_decay=v),
], ids=["sgd-lr", "sgd-momentum", "sgd-dampening", "adam-lr", "adam-eps", "adamw-weight_decay"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, np.float64("nan"), "0.1"])
def test_non_finite_negative_or_non_numeric_values_are_refused(make, value):
    with pytest.raises(ValueError, match=r"invalid .*; it must be a finite number >= 0") as info:
        make(value)
    assert "np." not in str(info.value)


def test_a_param_group_added_later_is_checked_too():
    opt = nn.optim.AdamW(_params(), lr=1e-3)
    with pytest.raises(ValueError, match=r"AdamW: invalid learning rate \(lr\) nan"):
        opt.add_param_group({"params": [tt.zeros(2, requires_grad=True)], "lr": math.nan})


def test_valid_values_still_train():
    p = tt.tensor([1.0, -2.0], requires_grad=True)
    opt = nn.optim.SGD([p], lr=0.5, momentum=0.0)
    (p * p).sum().backward()
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
