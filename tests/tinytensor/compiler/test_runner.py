"""The C runner: intermediates live in the planned arena (no allocation for them per call),
an op that hands back its input's memory cannot make the arena give a wrong answer, and an
optimizer's new values are computed into the parameters' and state's own arrays."""
import shutil
import threading

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler.codegen import runner as R
from tinytensor.compiler.passes import plan as plan_pass
from tinytensor.core.function import Function

from .helpers import gpt, lm_loss, lm_step, training_step

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="needs a C compiler")


def _runner(step):
    (entry,) = step._cache.values()
    return entry.runner


def test_planned_intermediates_are_arena_views_made_once():
    m = gpt()
    ids = tt.tensor(np.random.default_rng(0).integers(0, 32, (2, 8)))
    step = tt.compile(lm_step, backend="c")
    step(m, ids)
    r = _runner(step)
    assert r.plan.peak > 0 and r.arena.nbytes == r.plan.peak and r.arena.ctypes.data % 64 == 0
    seen = {}

    def spy(k, fn):
        def run(env):
            fn(env)
            for v in r.program.instrs[k].outputs:
                if v.id in planned:
                    seen.setdefault(v.id, set()).add(env[v.id].ctypes.data)
        return run
    planned = {b.value.id for b in r.plan.buffers}
    r.steps = [(spy(k, s), gone) for k, (s, gone) in enumerate(r.steps)]
    for _ in range(2):
        m.zero_grad()
        step(m, ids)
    assert set(seen) == planned
    for vid, ptrs in seen.items():
        assert len(ptrs) == 1                                    # the same memory every call
        (p,) = ptrs
        assert r.arena.ctypes.data <= p < r.arena.ctypes.data + r.arena.nbytes


class _SneakyView(Function):
    """A reshape that does not declare itself a view (no is_view): its result is its input's
    memory, which the plan believes dead after this op."""
    name = "sneaky_view"

    @staticmethod
    def forward(ctx, a):
        return a.reshape(a.shape)

    @staticmethod
    def backward(ctx, g):
        return g


def _sneaky(x):
    y = (x * 2.0 + 1.0).exp()          # a fused kernel: its output is an arena slot
    z = _SneakyView.apply(y)           # the plan thinks y's slot is free from here on
    w = (x * 3.0 - 0.5).tanh()         # a later kernel free to reuse y's slot
    return tt.matmul(z, w.mT) + tt.matmul(w, z.mT)


def _compiled(fn, *args, **patches):
    """tt.compile(fn, backend='c') compiled on `args` with runner.py's names patched (the
    plan's `placed_in_arena`, which the runner follows, in passes/plan.py)."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in patches.items():
            mp.setattr(plan_pass if name == "placed_in_arena" else R, name, value)
        step = tt.compile(fn, backend="c")
        step(*args)
    return step


def test_an_undeclared_view_of_an_arena_slot_is_copied_out_not_overwritten():
    x = tt.tensor(np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32))
    # the same generated kernels with every intermediate in memory of its own: the truth
    want = _compiled(_sneaky, x, placed_in_arena=lambda ins: False)(x).numpy()
    step = _compiled(_sneaky, x)
    assert _runner(step).plan.peak < _runner(step).plan.total   # the plan does reuse memory here
    for _ in range(3):
        assert step(x).numpy().tobytes() == want.tobytes()
    # and the check is what saves it: trusting the plan gives a wrong answer
    checked = R.numpy_step
    blind = _compiled(_sneaky, x, numpy_step=lambda ins, bounds=(0, 0), senv=None: checked(ins))
    assert blind(x).numpy().tobytes() != want.tobytes()


def test_adamw_writes_new_values_into_the_parameters_and_state_arrays():
    m1, m2 = gpt(), gpt()
    ids = tt.tensor(np.random.default_rng(2).integers(0, 32, (2, 8)))
    train = training_step(lm_loss)
    o1 = nn.optim.AdamW(m1.parameters(), lr=1e-2, weight_decay=0.1)
    o2 = nn.optim.AdamW(m2.parameters(), lr=1e-2, weight_decay=0.1)
    step = _compiled(train, m1, o1, ids)
    copying = _compiled(train, m2, o2, ids, in_place=lambda program, kernels, write_back: {})
    step(m1, o1, ids)
    arrays = [p.data for p in m1.parameters()]
    state = [a for s in o1.state.values() for a in s.values() if isinstance(a, np.ndarray)]
    r = _runner(step)
    n_params = len(arrays)
    assert len(r.in_place) == 3 * n_params                 # each parameter, exp_avg, exp_avg_sq
    # a kernel that writes over its input reads that input through the output's pointer
    # (two restrict pointers to one array would be undefined behaviour in C)
    functions = r.source.split("static inline __attribute__((always_inline)) void ")[1:]
    updating = {k for k, ins in enumerate(r.program.instrs) if any(v.id in r.in_place for v in ins.outputs)}
    for f in functions:
        k = int(f.split("_body(")[0].rsplit("_", 1)[1])
        assert ("the same memory" in f) == (k in updating), f[:200]
    assert updating
    step(m1, o1, ids)
    assert all(p.data is a for p, a in zip(m1.parameters(), arrays))
    assert all(a is b for a, b in zip(state, [a for s in o1.state.values() for a in s.values()
                                              if isinstance(a, np.ndarray)]))
    assert _runner(copying).in_place == {}
    for _ in range(2):
        copying(m2, o2, ids)
    for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters()):   # computing in place changes no bit
        assert p1.data.tobytes() == p2.data.tobytes(), name


def test_in_place_is_refused_when_the_old_value_is_read_after_the_kernel():
    from tinytensor.compiler.capture import capture
    from tinytensor.compiler.passes import fuse

    def f(x):
        y = x * 2.0 + 1.0                  # kernel 1 makes y
        s = tt.matmul(x, x)                # ... and x is read again after it
        return y, s
    x = tt.tensor(np.ones((4, 4), np.float32))
    program, _, _ = capture(f, (x,))
    program = fuse.run(program)
    kernels = {k: None for k, ins in enumerate(program.instrs) if ins.op == "fused"}
    first_kernel = min(kernels)
    assert any(ins.op == "matmul" for ins in program.instrs[first_kernel + 1:])
    assert R.in_place(program, kernels, {0: 0}) == {}
    assert R.in_place(program, kernels, {}) == {}


def test_calls_from_two_threads_take_turns_and_a_call_from_inside_its_own_run_is_refused():
    x = tt.tensor(np.random.default_rng(4).standard_normal((256, 256)).astype(np.float32))
    step = tt.compile(lambda x: F.softmax(x * 2.0, -1), backend="c")
    step(x)                                  # the first call runs eagerly (the capture)
    want = step(x).numpy().copy()
    got, errors = [], []

    def calls():
        try:
            for _ in range(30):
                got.append(step(x).numpy().tobytes())
        except Exception as e:  # noqa: BLE001 - the test reports whatever went wrong
            errors.append(e)
    threads = [threading.Thread(target=calls) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(got) == 60 and set(got) == {want.tobytes()}

    r = _runner(step)
    first = r.steps[0][0]

    def reenter(env):
        r([x.data])
    r.steps[0] = (reenter, r.steps[0][1])
    try:
        with pytest.raises(RuntimeError, match="called again from inside itself"):
            step(x)
    finally:
        r.steps[0] = (first, r.steps[0][1])
    assert step(x).numpy().tobytes() == want.tobytes()


def test_a_result_is_reused_only_once_the_caller_let_go_of_it():
    x = tt.tensor(np.arange(8, dtype=np.float32))
    step = tt.compile(lambda x: (x * 2.0).exp(), backend="c")
    step(x)
    r = _runner(step)
    first = r([x.data])[0]
    held = first.copy()
    second = r([x.data * 0.5])[0]            # `first` is still held: new memory
    assert second.ctypes.data != first.ctypes.data
    assert first.tobytes() == held.tobytes()
    view = second[2:]
    address = second.ctypes.data
    del second
    third = r([x.data])[0]                   # a view still holds the memory: new memory again
    assert third.ctypes.data != address and view.base is not None
    address = third.ctypes.data
    del third
    fourth = r([x.data])[0]                  # nothing holds it: the same memory, right values
    assert fourth.ctypes.data == address
    assert fourth.tobytes() == held.tobytes()   # what the first call (same input) gave


def test_a_parameter_array_that_cannot_take_the_update_in_place_is_updated_by_copy():
    # the kernel reads the old value through the new value's pointer; a parameter array
    # that is not C-contiguous gets a contiguous copy to compute in, written back after
    def run(compiled):
        tt.manual_seed(0)
        lin = nn.Linear(8, 8)
        opt = nn.optim.AdamW(lin.parameters(), lr=1e-2)
        x = tt.tensor(np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32))
        step = training_step(lambda m, x: (m(x) ** 2).mean())
        if compiled:
            step = tt.compile(step, backend="c")
        step(lin, opt, x)
        lin.weight.data = np.asfortranarray(lin.weight.data)
        for _ in range(2):
            step(lin, opt, x)
        return lin, step
    lin, step = run(True)
    assert len(_runner(step).in_place) == 6
    eager, _ = run(False)
    np.testing.assert_allclose(lin.weight.data, eager.weight.data, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(lin.bias.data, eager.bias.data, rtol=1e-6, atol=1e-7)


class _SplitEmbedCat(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 12)

    def forward(self, ids, x):
        h = self.emb(ids)                       # its backward: index_add with an index array
        a, b, c = h[..., :4], h[..., 4:8], h[..., 8:]   # theirs: index_adds of slices
        return tt.cat([c * 2.0, a - 1.0, b], dim=-1) * x   # cat (exactly rounded ops: eager bits)


def _split_step(m, ids, x):
    loss = (m(ids, x) ** 2).sum()
    loss.backward()
    return loss


def test_index_add_and_cat_are_computed_into_the_arena_with_eager_bits():
    rng = np.random.default_rng(5)
    ids = tt.tensor(rng.integers(0, 10, (3, 7)))     # repeated ids: add.at's order matters
    xs = [tt.tensor(rng.standard_normal((3, 7, 12)).astype(np.float32)) for _ in range(3)]

    def eager(x):
        tt.manual_seed(0)
        m = _SplitEmbedCat()
        loss = _split_step(m, ids, x)
        return loss.detach().numpy(), m.emb.weight.grad.numpy()
    tt.manual_seed(0)
    m = _SplitEmbedCat()
    step = tt.compile(_split_step, backend="c")
    step(m, ids, xs[0])
    r = _runner(step)
    into = [ins for ins in r.program.instrs if ins.fn is not None and ins.fn.forward_into is not None]
    assert sorted({ins.op for ins in into}) == ["cat", "index_add"]
    planned = {b.value.id for b in r.plan.buffers}
    outputs = {v.id for v in r.program.outputs}
    assert all(ins.outputs[0].id in planned | outputs for ins in into)
    assert any(ins.outputs[0].id in planned for ins in into)
    held = []
    for x in xs + xs:
        m.emb.weight.grad = None
        loss = step(m, ids, x)
        want_loss, want_grad = eager(x)
        assert loss.detach().numpy().tobytes() == want_loss.tobytes()
        assert m.emb.weight.grad.numpy().tobytes() == want_grad.tobytes()
        held.append((m.emb.weight.grad, want_grad))
    for grad, want in held:     # a result the caller still holds is never written again
        assert grad.numpy().tobytes() == want.tobytes()


def test_an_input_array_is_checked_again_whenever_it_is_another_object():
    # a kernel keeps the pointer of an input that is the very array of the last call; a
    # new array (a replaced parameter, a strided view, new contents in place) is read anew
    rng = np.random.default_rng(7)
    w = tt.tensor(rng.standard_normal((16, 16)).astype(np.float32))
    x = tt.tensor(rng.standard_normal((16, 16)).astype(np.float32))
    f = lambda w, x: tt.maximum(x * w + 1.0, w) * 0.5   # exactly rounded: eager bits
    step = tt.compile(f, backend="c")

    def check():
        assert step(w, x).numpy().tobytes() == f(w, x).numpy().tobytes()
    check()
    check()                                   # the same arrays: pointers kept
    x.data[...] = rng.standard_normal((16, 16)).astype(np.float32)
    check()                                   # same array, new contents
    w.data = earlier = rng.standard_normal((16, 16)).astype(np.float32)
    check()                                   # a new array object
    w.data = np.asfortranarray(rng.standard_normal((16, 16)).astype(np.float32))
    check()                                   # not C-contiguous: a copy per call
    check()
    w.data = earlier
    check()                                   # back to an array checked before the copies
    w.data = np.ascontiguousarray(w.data)
    check()
