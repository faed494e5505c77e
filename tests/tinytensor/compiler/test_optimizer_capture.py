"""opt.zero_grad(); loss.backward(); opt.step() inside a compiled function: the update is
captured as ops (role "optimizer"), the replay writes the new parameters and state into
their own arrays, and the step count, learning rate and state are read at each call."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.kernels import fusion

from .helpers import gpt, lm_loss, mlp, train_run as _train, training_step




def _loss(m, *batch):
    if len(batch) == 1:
        return m(batch[0], labels=batch[0]).loss
    x, y = batch
    return ((m(x) - y) ** 2).mean()


train_step = training_step(_loss)


def _mlp_batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(tt.tensor(rng.standard_normal((8, 16)).astype(np.float32)),
             tt.tensor(rng.standard_normal((8, 4)).astype(np.float32))) for _ in range(n)]


def _gpt_batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(tt.tensor(rng.integers(0, 32, (2, 16))),) for _ in range(n)]


OPTIMIZERS = [
    (nn.optim.AdamW, dict(weight_decay=0.1)),
    (nn.optim.Adam, dict(weight_decay=0.01, amsgrad=True)),
    (nn.optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.01)),
    (nn.optim.SGD, dict(momentum=0.9, dampening=0.1)),
]


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("opt_cls,opts", OPTIMIZERS, ids=lambda o: getattr(o, "__name__", ""))
def test_mlp_20_steps_bitwise_equal_to_eager(backend, opt_cls, opts):
    # the MLP's ops round the same compiled and eager, and so does the update: in ops, a
    # Python float meets a float32 array as a float32, as in the optimizer's array math
    if backend == "c" and opt_cls is not nn.optim.AdamW:
        pytest.skip("one optimizer is enough for the C backend")
    batches = _mlp_batches(20)
    eager = _train(mlp, opt_cls, batches, train_step, opts)
    step = tt.compile(train_step, backend=backend)
    compiled = _train(mlp, opt_cls, batches, step, opts)
    assert compiled[0] == eager[0]
    for a, b in zip(compiled[1], eager[1]):
        assert a.tobytes() == b.tobytes()
    assert len(step.programs) == 1  # zero_grad inside: the .grads on entry are not in the key
    # the optimizer state ends as eager's: same keys, step counts and moments
    s_c, s_e = compiled[3].state_dict()["state"], eager[3].state_dict()["state"]
    assert s_c.keys() == s_e.keys()
    for i in s_e:
        assert s_c[i].keys() == s_e[i].keys()
        for k, v in s_e[i].items():
            w = s_c[i][k]
            assert (w.data.tobytes() == v.data.tobytes()) if isinstance(v, tt.Tensor) else w == v


def test_program_holds_the_update_as_optimizer_ops_with_step_dependent_inputs():
    m = mlp()
    opt = nn.optim.AdamW(m.parameters(), lr=1e-2)
    step = tt.compile(train_step)
    arrays = [p.data for p in m.parameters()]
    for batch in _mlp_batches(3):
        step(m, opt, *batch)
    (program,) = step.programs
    roles = {ins.role for ins in program.instrs}
    assert roles == {"forward", "backward", "optimizer"}
    names = {v.name for v in program.inputs}
    # the bias corrections are inputs (a replay at step k uses k), not constants of step 1
    assert {"0.weight.step_size", "0.weight.bias_correction2_sqrt", "0.weight.exp_avg"} <= names
    # parameters keep their identity and arrays; nothing aliases the program's memory
    assert all(p.data is a for p, a in zip(m.parameters(), arrays))
    state = [a for s in opt.state.values() for a in s.values() if isinstance(a, np.ndarray)]
    owned = arrays + state + [p.grad.data for p in m.parameters()]
    for i, a in enumerate(owned):
        assert not any(np.shares_memory(a, b) for b in owned[i + 1:])
    assert all(s["step"] == 3 for s in opt.state.values())


def test_gpt_tiny_20_adamw_steps_match_eager():
    batches = _gpt_batches(20)
    opts = dict(weight_decay=0.1)
    step = tt.compile(train_step, backend="numpy")   # the interpreter: the ops' own NumPy code
    compiled = _train(gpt, nn.optim.AdamW, batches, step, opts)
    assert len(step.programs) == 1

    # against eager with the backward the capture records (each op's `backward` in ops,
    # as create_graph records it, and the fused kernels' reference decompositions): bitwise
    reference_step = training_step(lm_loss, create_graph=True)
    state = fusion.set_fusion(False)
    try:
        same_backward = _train(gpt, nn.optim.AdamW, batches, reference_step, opts)
    finally:
        fusion.restore_fusion(state)
    assert compiled[0] == same_backward[0]
    for a, b in zip(compiled[1], same_backward[1]):
        assert a.tobytes() == b.tobytes()

    # against plain eager (backward_arrays, fused kernels) gradients differ by a few ulps
    eager = _train(gpt, nn.optim.AdamW, batches, train_step, opts)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6, atol=0)
    for (name, _), a, b in zip(compiled[2].named_parameters(), compiled[1], eager[1]):
        if name.endswith("attn.c_attn.bias"):
            # the key third of this bias has a true gradient of zero (softmax ignores a
            # constant added to every score), so its gradient is rounding noise, which
            # Adam's normalisation turns into lr-sized steps; the query and value thirds
            # behave like every other parameter
            d = a.shape[0] // 3
            np.testing.assert_allclose(np.r_[a[:d], a[2 * d:]], np.r_[b[:d], b[2 * d:]], rtol=0, atol=1e-6)
            np.testing.assert_allclose(a[d:2 * d], b[d:2 * d], rtol=0, atol=1e-3)
        else:
            # 20 Adam steps amplify the ulps where a gradient is tiny: up to 1.3e-6 on
            # OpenBLAS's Haswell kernels (AVX2 EPYC), under 1e-6 on Zen 4
            np.testing.assert_allclose(a, b, rtol=0, atol=5e-6, err_msg=name)


def test_replay_reads_the_optimizer_state_afresh_after_load_state_dict():
    m = mlp()
    opt = nn.optim.AdamW(m.parameters(), lr=1e-2)
    step = tt.compile(train_step)
    batches = _mlp_batches(5)
    for batch in batches[:3]:
        step(m, opt, *batch)
    saved_opt, saved_model = opt.state_dict(), [p.data.copy() for p in m.parameters()]
    first = [float(step(m, opt, *b).data) for b in batches[3:]]
    after = [p.data.copy() for p in m.parameters()]
    for p, a in zip(m.parameters(), saved_model):
        p.data[...] = a
    opt.load_state_dict(saved_opt)  # replaces opt.state: the program must not hold the old one
    again = [float(step(m, opt, *b).data) for b in batches[3:]]
    assert again == first
    assert all(np.array_equal(p.data, a) for p, a in zip(m.parameters(), after))
    assert len(step.programs) == 1


def test_changing_a_baked_option_recompiles_naming_it():
    m = mlp()
    opt = nn.optim.AdamW(m.parameters(), lr=1e-2)
    step = tt.compile(train_step)
    x, y = _mlp_batches(1)[0]
    step(m, opt, x, y)
    opt.param_groups[0]["betas"] = (0.8, 0.99)
    step(m, opt, x, y)
    assert len(step.programs) == 2
    from tinytensor.compiler import guards
    labels = guards.changed(*[guards.signature((m, opt, x, y), {}, (), step._cleared)] * 2)
    assert labels.startswith("nothing")
    opt.param_groups[0]["eps"] = 1e-6
    parts = guards.signature((m, opt, x, y), {}, (), step._cleared)
    assert "arg 1 param_groups[0] options" in guards.changed(step._last, parts)


def test_an_optimizer_without_a_captured_update_is_a_clear_error():
    class Halve(nn.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.5})

        def _update(self, p, g, state, group):
            p -= group["lr"] * g

    m = mlp()
    step = tt.compile(train_step)
    with pytest.raises(NotImplementedError, match="Halve cannot be captured by tt.compile.*outside"):
        step(m, Halve(m.parameters()), *_mlp_batches(1)[0])


def test_a_second_step_of_one_optimizer_in_a_compiled_function_is_refused_naming_the_line():
    # a replay reads each step's state (step count, bias corrections) once, before the
    # program: a second step would have read the first one's, a silent wrong update
    from tinytensor.compiler.capture import CaptureError
    tt.manual_seed(0)
    lin = nn.Linear(4, 3)
    opt = nn.optim.AdamW(lin.parameters(), lr=1e-2)
    x = tt.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))

    def two_steps(m, opt, x):
        for _ in range(2):
            loss = (m(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss
    with pytest.raises(CaptureError, match=r"AdamW.step\(\) a second time at .*test_optimizer_capture.py"):
        tt.compile(two_steps)(lin, opt, x)
