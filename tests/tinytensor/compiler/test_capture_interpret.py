import re

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler import CaptureError
from tinytensor.compiler.capture import capture

from .helpers import (assert_bitwise, captured, gpt, interpreted, lm_step, mlp, mse_step)


def _mlp_args():
    tt.manual_seed(1)
    return (mlp(), tt.randn(8, 16), tt.randn(8, 4))


def test_capture_roles_inputs_and_grad_outputs():
    m, x, y = _mlp_args()
    program, result, meta = capture(mse_step, (m, x, y))
    assert [v.kind for v in program.inputs] == ["input", "input"] + ["param"] * 4
    assert [v.name for v in program.inputs[2:]] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    roles = [i.role for i in program.instrs]
    assert roles[0] == "forward" and roles[-1] == "backward" and "backward" in roles
    assert roles == sorted(roles, key=["forward", "backward"].index)  # forward, then backward
    assert len(program.outputs) == 1 + 4 and len(meta.grads) == 4
    assert result.grad_fn is None and all(p.grad.grad_fn is None for p in m.parameters())
    assert all(c.ndim == 0 for c in program.consts.values())  # only Python numbers baked


@pytest.mark.parametrize("fusion", [True, False])
def test_interpreter_equals_capture_bitwise_softmax_norm_xent(fusion):
    tt.manual_seed(2)
    w = tt.randn(12, requires_grad=True)
    x, t = tt.randn(6, 12), tt.randint(0, 12, (6,))

    def step(x, t):
        h = tt.functional.layer_norm(x * w, (12,))
        loss = tt.functional.cross_entropy(tt.softmax(h, dim=-1) * 3.0, t)
        loss.backward()
        return loss
    with tt.kernels.use_fusion(fusion):
        program, outs, arrays = captured(step, (x, t))
    assert_bitwise(interpreted(program, arrays), outs)


def test_interpreter_equals_capture_bitwise_mlp_and_gpt():
    for step, args in ((mse_step, _mlp_args()), (lm_step, (gpt(drop=0.1), tt.randint(0, 32, (2, 8))))):
        tt.manual_seed(5)
        program, outs, arrays = captured(step, args)
        tt.manual_seed(5)  # the interpreter redraws dropout's masks from the same stream
        assert_bitwise(interpreted(program, arrays), outs)


def test_index_tensor_is_an_input_not_a_frozen_attribute():
    tt.manual_seed(0)
    w = tt.randn(10, 3, requires_grad=True)

    def step(ids):
        loss = (w[ids] * w[ids]).sum()
        loss.backward()
        return loss
    program, _, meta = capture(step, (tt.tensor([1, 2, 3]),))
    other = tt.tensor([4, 4, 9])
    got = interpreted(program, [other.data, w.data])
    assert got[0] == (w.data[[4, 4, 9]] ** 2).sum()


def test_existing_grad_is_read_at_each_call():
    m, x, y = _mlp_args()
    mse_step(m, x, y)  # every parameter has a .grad now
    before = [p.grad.data.copy() for p in m.parameters()]
    program, result, meta = capture(mse_step, (m, x, y))
    assert [k for k, _ in meta.bindings].count("grad") == 4
    assert all(np.array_equal(p.grad.data, 2 * b) for p, b in zip(m.parameters(), before))


def test_manual_parameter_update_inside_is_a_clear_error():
    # an nn.optim step is captured (test_optimizer_capture.py); raw in-place math is not
    m, x, y = _mlp_args()

    def step(m, x, y):
        loss = mse_step(m, x, y)
        with tt.no_grad():
            m[0].weight.sub_(0.1 * m[0].weight.grad)
        return loss
    with pytest.raises(CaptureError, match=r"step changed parameter 0.weight in place outside an "
                                           r"nn.optim optimizer step"):
        capture(step, (m, x, y))


def test_inplace_op_on_a_used_tensor_is_a_clear_error():
    x = tt.randn(4)

    def step(x):
        y = x * 2.0
        x.add_(1.0)
        return y + x
    # refused at the op, naming it and the line (the replay would not repeat the write)
    with pytest.raises(CaptureError, match=r"in-place op add_ .* at .*test_capture_interpret.py:\d+ "
                                           r"\(`x.add_\(1.0\)`\)"):
        capture(step, (x,))


READS = {  # one per line: the error must quote the line that reads the value
    "item()": lambda s: s.item(),
    "bool()": lambda s: bool(s > 0),
    "float()": lambda s: float(s),
    "int()": lambda s: int(s),
    ".numpy()": lambda s: s.numpy(),
    ".tolist()": lambda s: s.tolist(),
}


@pytest.mark.parametrize("read", list(READS))
def test_data_dependent_python_names_the_line(read):
    def step(x):
        s = (x * 2.0).sum()
        return s, READS[read](s)
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.strip().startswith(f'"{read}"'))
    with pytest.raises(CaptureError, match=rf"\({re.escape(read)}\) at .*test_capture_interpret.py:{line} \(`"):
        capture(step, (tt.randn(3),))


def test_reading_a_python_constant_back_is_allowed():
    def step(x):
        c = tt.tensor(3.0)
        return x * float(c)
    program, result, _ = capture(step, (tt.ones(2),))
    assert result.tolist() == [3.0, 3.0]


def test_dropout_is_a_recorded_draw_and_replays_like_eager():
    x = tt.ones(64)

    def step(x):
        return tt.functional.dropout(x, 0.5, training=True)
    tt.manual_seed(3)
    program, r, meta = capture(step, (x,))
    assert [i.op for i in program.instrs] == ["dropout_mask", "mul"]
    tt.manual_seed(4)
    eager = step(x).data
    tt.manual_seed(4)
    assert_bitwise(interpreted(program, [x.data]), [eager])


def test_unrecorded_random_draw_is_a_clear_error():
    def step(x):
        return x + tt.randn(3)
    with pytest.raises(CaptureError, match="drew random numbers outside a recorded op"):
        capture(step, (tt.ones(3),))


def test_compiled_instructions_give_run_instr_s_arrays():
    # compile_instr decides per instruction which of run_instr's checks it needs: its
    # function must still give run_instr's arrays, as a list (a runner replaces items in
    # it) and 0-d results as arrays, not NumPy scalars, on plain and fused programs
    from tinytensor.compiler.interpret import compile_instr, run_instr
    from tinytensor.compiler.passes import fuse
    program, _, arrays = captured(lm_step, (gpt(), tt.randint(0, 32, (2, 8))))
    for prog in (program, fuse.run(program)):
        env = {v.id: a for v, a in zip(prog.inputs, arrays)}
        env.update((v.id, a) for v, a in prog.consts.items())
        zero_d = 0
        for ins in prog.instrs:
            ins_arrays = [env[v.id] for v in ins.inputs]
            got = compile_instr(ins)(ins_arrays)
            assert type(got) is list, ins.op
            assert all(type(a) is np.ndarray for a in got), ins.op
            assert_bitwise(got, run_instr(ins, ins_arrays))
            zero_d += any(a.ndim == 0 for a in got)
            env.update(zip((v.id for v in ins.outputs), got))
        assert zero_d  # the loss and its gradient's seed: the case the check is for
