"""Differentiable outputs of a compiled function (compiler/aot.py): `loss.backward()` outside
`tt.compile(model)` runs the compiled backward and leaves the .grads eager leaves."""
import copy

import numpy as np
import pytest

from tinytensor import models
from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler import CaptureError

BACKENDS = ["numpy", "c"]   # elsewhere "numpy": the behaviour around the programs is the same


def _mlp():
    tt.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU("tanh"), nn.Linear(16, 4)).double()


def _gpt(drop=0.0):
    tt.manual_seed(0)
    return models.GPT(models.GPTConfig(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                       resid_pdrop=drop, embd_pdrop=drop, attn_pdrop=drop)).double()


def _a(t):
    return t.detach().numpy().copy()


def _close(a, b, tol=1e-12):
    a, b = (x.detach().numpy() if isinstance(x, tt.Tensor) else np.asarray(x) for x in (a, b))
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _train(model, backend, batches, loss_fn, opt_cls=nn.optim.AdamW, compiled=True):
    """Losses and final parameters of len(batches) steps, the optimizer outside the model."""
    run = tt.compile(model, backend=backend) if compiled else model
    opt = opt_cls(model.parameters(), lr=1e-2)
    losses, grads = [], []
    for batch in batches:
        loss = loss_fn(run, *batch)
        loss.backward()
        grads.append([_a(p.grad) for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, grads, [_a(p) for p in model.parameters()], run


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_with_the_optimizer_outside_equals_eager(backend):
    tt.manual_seed(1)
    batches = [(tt.randn(5, 8, dtype=tt.float64), tt.randint(0, 4, (5,))) for _ in range(4)]
    loss_fn = lambda m, x, y: F.cross_entropy(m(x), y)   # noqa: E731
    model = _mlp()
    eager = _train(copy.deepcopy(model), backend, batches, loss_fn, compiled=False)
    got = _train(model, backend, batches, loss_fn)
    _close(got[0], eager[0])
    for g, e in zip(got[1], eager[1]):
        for a, b in zip(g, e):
            _close(a, b)
    for a, b in zip(got[2], eager[2]):
        _close(a, b)
    assert len(got[3].programs) == 1


@pytest.mark.parametrize("backend", ["numpy", pytest.param("c", marks=pytest.mark.slow)])
def test_gpt_with_the_optimizer_outside_equals_eager(backend):
    tt.manual_seed(2)
    batches = [(tt.randint(0, 32, (2, 8)),) for _ in range(3)]
    loss_fn = lambda m, ids: m(ids, labels=ids).loss   # noqa: E731  (logits and loss: two results)
    model = _gpt()
    eager = _train(copy.deepcopy(model), backend, batches, loss_fn, compiled=False)
    got = _train(model, backend, batches, loss_fn)
    _close(got[0], eager[0], 1e-10)
    for g, e in zip(got[1], eager[1]):
        for a, b in zip(g, e):
            _close(a, b, 1e-10)
    for a, b in zip(got[2], eager[2]):
        _close(a, b, 1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_argument_grads_reach_the_graph_that_made_them(backend):
    """A leaf argument gets its .grad; an argument an outer op made passes its gradient on
    into that op's graph, including to a weight the compiled function also reads (tied),
    without counting it twice."""
    tt.manual_seed(3)
    w = tt.randn(4, 4, dtype=tt.float64, requires_grad=True)
    b = tt.randn(4, dtype=tt.float64, requires_grad=True)

    def f(h, x):
        return ((h @ w).tanh() * x + b).sum(dim=1)

    fast = tt.compile(f, backend=backend)
    for step in range(3):
        x0 = tt.randn(3, 4, dtype=tt.float64)
        runs = []
        for fn in (f, fast):
            w.grad = b.grad = None
            x = x0.detach().requires_grad_()
            h = (x @ w.T).sin()                   # made outside, from w too
            out = fn(h, x)
            (out * tt.arange(3, dtype=tt.float64)).sum().backward()
            runs.append((_a(out), _a(x.grad), _a(w.grad), _a(b.grad)))
        for a, e in zip(runs[1], runs[0]):
            _close(a, e)
    assert len(fast.programs) == 1


def test_several_results_some_unused_and_tt_grad():
    tt.manual_seed(4)
    m = _mlp()
    fast = tt.compile(lambda x: (m(x), m(x).exp(), tt.arange(3)), backend="numpy")
    x = tt.randn(2, 8, dtype=tt.float64, requires_grad=True)
    for _ in range(2):
        a, unused, r = fast(x)
        assert not r.requires_grad
        gx, gw = tt.grad((a ** 2).sum(), [x, m[0].weight])
        ea = m(x)
        ex, ew = tt.grad((ea ** 2).sum(), [x, m[0].weight])
        _close(a, ea)
        _close(gx, ex)
        _close(gw, ew)


def test_backward_twice_errors_as_eager_and_retain_graph_accumulates():
    m = _mlp()
    fast = tt.compile(m, backend="numpy")
    x = tt.randn(3, 8, dtype=tt.float64)
    fast(x)
    for run in (m, fast):
        for p in m.parameters():
            p.grad = None
        loss = run(x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()
        if run is m:
            want = [_a(p.grad) for p in m.parameters()]
    for p, g in zip(m.parameters(), want):
        _close(p.grad, g)


def test_grads_accumulate_over_calls_as_eager():
    """No zero_grad between micro-batches: each backward adds into the .grads, and a graph
    made of two calls' results reaches both calls' compiled backwards."""
    m = _mlp()
    e = copy.deepcopy(m)
    fast = tt.compile(m, backend="numpy")
    for _ in range(3):
        x1, x2 = tt.randn(3, 8, dtype=tt.float64), tt.randn(3, 8, dtype=tt.float64)
        out = fast(x1)
        assert out.grad_fn.name == "compiled"
        (out.sin().sum() + fast(x2).pow(2).sum()).backward()
        (e(x1).sin().sum() + e(x2).pow(2).sum()).backward()
        for p, q in zip(m.parameters(), e.parameters()):
            _close(p.grad, q.grad)
    # the program reads no .grad: the .grads left by a backward are no new signature
    assert len(fast.programs) == 1


def test_create_graph_through_a_compiled_function_is_refused_by_name():
    m = _mlp()
    fast = tt.compile(m, backend="numpy")
    x = tt.randn(3, 8, dtype=tt.float64)
    fast(x)
    with pytest.raises(CaptureError, match=r"create_graph=True.*test_aot.py"):
        fast(x).sum().backward(create_graph=True)


def test_no_grad_and_nothing_requiring_grad_give_results_without_history():
    m = _mlp()
    fast = tt.compile(m, backend="numpy")
    x = tt.randn(3, 8, dtype=tt.float64)
    with tt.no_grad():
        for _ in range(2):
            out = fast(x)
            assert out.grad_fn is None and not out.requires_grad
    for p in m.parameters():
        p.requires_grad_(False)
    for _ in range(2):
        out = fast(x)
        assert out.grad_fn is None and not out.requires_grad
        _close(out, m(x))
    assert all(e.meta.aot is None for e in fast._entries())


def test_a_step_with_its_own_backward_keeps_its_path():
    m = _mlp()
    e = copy.deepcopy(m)

    def step(m, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss

    fast = tt.compile(step, backend="numpy")
    for _ in range(3):
        x = tt.randn(3, 8, dtype=tt.float64)
        for p, q in zip(m.parameters(), e.parameters()):
            p.grad = q.grad = None
        got, want = fast(m, x), step(e, x)
        assert got.grad_fn is None
        _close(got, want)
        for p, q in zip(m.parameters(), e.parameters()):
            _close(p.grad, q.grad)
    assert all(en.meta.aot is None for en in fast._entries())


def test_dropout_draws_what_eager_draws_and_hooks_run_at_the_users_backward():
    model = _gpt(drop=0.2)
    eager = copy.deepcopy(model)
    fast = tt.compile(model, backend="numpy")
    seen = {}
    for name, m in (("eager", eager), ("fast", model)):
        m.wte.weight.register_hook(lambda g, name=name: seen.setdefault(name, []).append(g.sum().item()))
    for step in range(3):
        ids = tt.randint(0, 32, (2, 8))
        outs = []
        for m, run in ((eager, eager), (model, fast)):
            tt.manual_seed(100 + step)
            loss = run(ids, labels=ids).loss
            loss.backward()
            outs.append((loss.item(), [_a(p.grad) for p in m.parameters()]))
            for p in m.parameters():
                p.grad = None
        _close(outs[1][0], outs[0][0], 1e-10)
        for a, b in zip(outs[1][1], outs[0][1]):
            _close(a, b, 1e-10)
    assert len(seen["fast"]) == len(seen["eager"]) == 3
    _close(seen["fast"], seen["eager"], 1e-10)


def test_a_compiled_module_inside_a_compiled_step_is_recorded_by_the_outer_capture():
    m = _mlp()
    e = copy.deepcopy(m)
    inner = tt.compile(m, backend="numpy")
    inner(tt.randn(3, 8, dtype=tt.float64))

    @tt.compile(backend="numpy")
    def step(x):
        loss = inner(x).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        x = tt.randn(3, 8, dtype=tt.float64)
        for p, q in zip(m.parameters(), e.parameters()):
            p.grad = q.grad = None
        got = step(x)
        want = e(x).pow(2).mean()
        want.backward()
        _close(got, want)
        for p, q in zip(m.parameters(), e.parameters()):
            _close(p.grad, q.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_sizes_one_program_for_every_batch_and_grads_as_eager(backend):
    model = _mlp()
    eager = copy.deepcopy(model)
    fast = tt.compile(model, dynamic=True, backend=backend)
    for n in (3, 5, 6, 7):   # not 4 or 8: a batch equal to a weight's dim is pinned (dynamic.py)
        x = tt.randn(n, 8, dtype=tt.float64, requires_grad=True)
        xe = x.detach().requires_grad_()
        got, want = fast(x), eager(xe)
        (got.tanh() * got).sum().backward()
        (want.tanh() * want).sum().backward()
        _close(got, want)
        _close(x.grad, xe.grad)
        for p, q in zip(model.parameters(), eager.parameters()):
            _close(p.grad, q.grad)
            p.grad = q.grad = None
    assert len(fast.programs) == 1


def test_state_written_by_the_first_call_is_written_once():
    """The first call runs the captured program after the capture: the state objects are
    put back as the capture found them first (else s.h + y would add y twice)."""
    class State:
        h = None

    lin = nn.Linear(4, 2).double()

    def step(x, s):
        y = lin(x)
        s.h = y if s.h is None else s.h + y
        return s.h.sum()

    fast = tt.compile(step, backend="numpy")
    x = tt.randn(3, 4, dtype=tt.float64)
    es, fs = State(), State()
    for _ in range(3):
        _close(fast(x, fs), step(x, es))


def test_a_hook_inside_the_compiled_function_is_refused_by_name():
    def f(x):
        h = x * 2.0
        h.register_hook(lambda g: g * 3.0)
        return h.sum()

    with pytest.raises(CaptureError, match="hook or retain_grad"):
        tt.compile(f, backend="numpy")(tt.randn(3, requires_grad=True))


def test_a_capture_reaching_an_earlier_compiled_calls_backward_is_refused_by_name():
    m = _mlp()
    inner = tt.compile(m, backend="numpy")
    out = inner(tt.randn(3, 8, dtype=tt.float64))

    @tt.compile(backend="numpy")
    def step(h):
        loss = h.pow(2).sum()
        loss.backward()
        return loss

    with pytest.raises(CaptureError, match="another compiled function's earlier call"):
        step(out)
