"""Where torch raises RuntimeError (shape mismatches, conflicting arguments), tinytensor
raises tt.OpError, which is both a RuntimeError and a ValueError: code written against
torch and code written against earlier tinytensor both catch it. Each case is checked
against torch itself, so the table cannot drift from what torch does."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tests.tinytensor.oracle import F as tF


def _pair(shape):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return tt.tensor(a), torch.tensor(a)


CASES = {
    "matmul": lambda m, t: m.matmul(t((2, 3)), t((4, 5))),
    "broadcast": lambda m, t: t((2, 3)) + t((4,)),
    "reshape": lambda m, t: t((2, 3)).reshape(4, 2),
    "permute": lambda m, t: t((2, 3)).permute(0, 0),
    "roll": lambda m, t: m.roll(t((2, 3)), (1, 1), (0,)),
    "gather": lambda m, t: m.gather(t((2, 3)), 1, m.zeros((2, 3, 1), dtype=m.int64)),
    "einsum": lambda m, t: m.einsum("ij,jk->ik", t((2, 3)), t((4, 5))),
    "cat": lambda m, t: m.cat([t((2, 3)), t((2, 4))], 0),
    "sdpa causal and mask": lambda m, t: tF(m).scaled_dot_product_attention(
        t((1, 2, 4)), t((1, 2, 4)), t((1, 2, 4)), attn_mask=m.ones((2, 2), dtype=m.bool),
        is_causal=True),
    "conv channels": lambda m, t: tF(m).conv2d(t((1, 3, 5, 5)), t((4, 2, 3, 3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_raises_what_torch_raises_and_what_tinytensor_raised(name):
    case = CASES[name]
    with pytest.raises(RuntimeError):
        case(torch, lambda s: _pair(s)[1])
    with pytest.raises(tt.OpError) as info:
        case(tt, lambda s: _pair(s)[0])
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    assert str(info.value), name


def test_the_message_still_names_the_op_and_shapes():
    a, b = _pair((2, 3))[0], _pair((4, 5))[0]
    with pytest.raises(RuntimeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\)"):
        a @ b
    with pytest.raises(ValueError, match=r"linear: input shape \(2, 3\) does not match weight"):
        F.linear(a, b)  # code written for tinytensor before still catches ValueError
