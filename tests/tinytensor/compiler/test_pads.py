"""passes/pads.py: the backward of splitting an array into parts (zero pads of each part's
gradient, added) becomes one cat, with the bits of the padded sum (-0.0 included)."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler.codegen import c
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import dce, pads

from .helpers import assert_bitwise, captured, gpt, lm_step


def _split_step(widths, dim=-1, take=None):
    """x -> the parts of x along `dim` (widths), each through its own op, summed as a loss."""
    def step(x):
        parts = tt.split(x, widths, dim)
        used = parts if take is None else [parts[k] for k in take]
        loss = sum(((p * float(k + 2)).tanh() * (k + 1.0)).sum() for k, p in enumerate(used))
        loss.backward()
        return loss
    return step


def _ops(program):
    return [i.op for i in program.instrs]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_parts_gradients_become_one_cat_with_the_padded_sums_bits(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 5, 12)).astype(dtype)
    x = tt.tensor(a, requires_grad=True)
    program, outs, arrays = captured(_split_step([4, 5, 3]), (x,))
    assert _ops(program).count("index_add") == 3
    after = dce.run(pads.run(program)).verify()
    assert "index_add" not in _ops(after) and _ops(after).count("cat") == 1
    from tinytensor.compiler import interpret
    assert_bitwise(interpret.run(after, arrays), interpret.run(program, arrays))
    assert_bitwise(interpret.run(after, arrays), outs)


def test_negative_zeros_of_a_part_come_out_as_the_padded_sum_gives_them():
    # a part's gradient of -0.0: the pads' sum gives +0.0 there (-0.0 + 0.0), and so must the cat
    def step(x):
        p, q = tt.split(x, [2, 2], -1)
        loss = (p * -0.0).sum() + (q * 3.0).sum()
        loss.backward()
        return loss
    x = tt.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    program, outs, arrays = captured(step, (x,))
    after = pads.run(program).verify()
    assert "cat" in _ops(after)
    from tinytensor.compiler import interpret
    got = interpret.run(after, arrays)
    assert_bitwise(got, interpret.run(program, arrays))
    assert not np.signbit(got[-1]).any()


def test_parts_that_leave_a_gap_or_are_read_twice_stay_pads():
    rng = np.random.default_rng(1)
    x = tt.tensor(rng.standard_normal((3, 10)).astype(np.float32), requires_grad=True)
    # parts 0 and 2 only: their ranges are not adjacent, nothing to merge
    program, _, _ = captured(_split_step([3, 4, 3], take=[0, 2]), (x,))
    assert pads.run(program) is program

    def step(x):   # a pad read by the sum and by another op: it is still needed as it is
        p, q = tt.split(x, [5, 5], -1)
        loss = (p.tanh().sum() + q.exp().sum())
        loss.backward()
        return loss
    program, _, _ = captured(step, (x,))
    assert _ops(pads.run(program)).count("cat") == 1


def test_adjacent_parts_short_of_the_whole_dim_become_one_pad_of_their_cat():
    rng = np.random.default_rng(2)
    x = tt.tensor(rng.standard_normal((4, 9)).astype(np.float32), requires_grad=True)
    program, outs, arrays = captured(_split_step([2, 3, 4], take=[1, 2]), (x,))
    after = dce.run(pads.run(program)).verify()
    assert _ops(after).count("index_add") == 1 and _ops(after).count("cat") == 1
    from tinytensor.compiler import interpret
    assert_bitwise(interpret.run(after, arrays), outs)


def test_a_gpt_steps_qkv_split_backward_is_a_cat_and_c_keeps_the_bits():
    m = gpt()
    ids = tt.tensor(np.random.default_rng(3).integers(0, 32, (2, 8)))
    program, outs, arrays = captured(lm_step, (m, ids))
    def qkv_pads(p):   # pads into the c_attn output's shape (2, 8, 3 * 16)
        return [i for i in p.instrs if i.op == "index_add" and tuple(i.outputs[0].shape) == (2, 8, 48)]
    after, _ = pipeline.run(program)
    assert len(qkv_pads(program)) == 3 * 2 and not qkv_pads(after)   # 3 parts a layer, 2 layers
    assert sum(i.op == "cat" for i in after.instrs) == 2
    got = c.build(pipeline.lower(after, "c"), threads=1)(arrays)
    for g, w in zip(got, outs):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
