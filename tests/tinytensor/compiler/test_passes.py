import pytest

import tinytensor as tt
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import cse, dce, fold, simplify

from .helpers import assert_bitwise, captured, gpt, interpreted, lm_step


def _prog(step, *args):
    tt.manual_seed(7)
    return captured(step, args)


def _check(pass_, step, *args):
    program, outs, arrays = _prog(step, *args)
    after = pass_.run(program).verify()
    tt.manual_seed(7)  # the same stream as the capture: dropout's masks are redrawn
    assert_bitwise(interpreted(after, arrays), outs)
    return program, after


def test_dce_drops_unused_and_keeps_random_draws():
    def step(x):
        _unused = x.exp() * 3.0
        tt.functional.dropout(x, 0.5)  # unused, but its draw moves the generator
        return x + 1.0
    program, after = _check(dce, step, tt.randn(4))
    assert [i.op for i in after.instrs] == ["dropout_mask", "add"]
    assert len(program.instrs) == 5


def test_cse_merges_equal_ops_and_constants_but_not_draws():
    def step(x):
        a, b = x * 2.0, x * tt.tensor(2.0)  # two constant objects of one value
        m1, m2 = tt.functional.dropout(x, 0.5), tt.functional.dropout(x, 0.5)
        return a + b + m1 + m2
    program, after = _check(cse, step, tt.randn(4))
    ops = [i.op for i in after.instrs]
    assert ops.count("dropout_mask") == 2 and len(after.instrs) == len(program.instrs) - 1
    assert len(after.consts) < len(program.consts)


def test_fold_scalar_constants_never_params():
    w = tt.tensor(2.0, requires_grad=True)

    def step(x):
        c = tt.tensor(3.0) * 4.0 + 1.0  # constants only: folded to 13
        return x * c + w * 5.0
    program, after = _check(fold, step, tt.randn(4))
    assert [i.op for i in program.instrs].count("mul") == 3
    assert [i.op for i in after.instrs] == ["mul", "mul", "add"]  # w * 5.0 stays: w is a param
    assert any(a.item() == 13.0 for a in after.consts.values())


def test_simplify_identities_and_movement_chains():
    def step(x):
        y = x * 1.0 + (-0.0)
        y = y / 1.0 - 0.0
        y = y.reshape(2, 6).reshape(3, 4).reshape(12).reshape(3, 4)
        y = y.permute(1, 0).permute(1, 0)
        y = y.to(tt.float32) + 0.0  # + 0.0 stays: -0.0 + 0.0 is +0.0
        return y.expand(3, 4)
    x = tt.tensor([[-0.0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
    program, after = _check(simplify, step, x)
    after = dce.run(after).verify()
    assert [i.op for i in after.instrs] == ["add"]


def test_simplify_keeps_broadcasting_and_promoting_identities():
    def step(x, ones):
        return x * ones, (x * 1.0).sum()
    program, after = _check(simplify, step, tt.randn(3), tt.ones(4, 3))
    assert [i.op for i in after.instrs] == ["mul", "sum"]


def test_verify_catches_use_before_definition():
    program, _, _ = _prog(lambda x: (x * 2.0).exp(), tt.randn(2))
    broken = program.replace(instrs=program.instrs[::-1])
    with pytest.raises(ValueError, match="before it is defined"):
        broken.verify()


def test_pipeline_on_gpt_step_counts_shrink_and_result_unchanged():
    tt.manual_seed(0)
    program, outs, arrays = _prog(lm_step, gpt(), tt.randint(0, 32, (2, 8)))
    after, counts = pipeline.run(program)
    after.verify()
    n = [c for _, c in counts]
    assert n == sorted(n, reverse=True) and n[-1] < n[0]
    got = interpreted(after, arrays)
    assert_bitwise(got, outs)
