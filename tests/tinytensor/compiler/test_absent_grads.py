"""A compiled function whose user's backward reaches only some of its results: the missing
results' terms are left out of the compiled backward (compiler/absent.py), as eager never
computes them; zeros in their place would turn -0.0 gradients into +0.0 and meet inf."""
import numpy as np
import pytest

from tinytensor import models
import tinytensor as tt
from tinytensor.compiler.capture import CaptureError

BACKENDS = ["numpy", "c"]


def _pair(shape, seed, dtype=np.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return tt.tensor(a, requires_grad=True), tt.tensor(a.copy(), requires_grad=True)


def _square_and_scaled(x, s):
    v = x * s
    return (v * v).sum(), v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_result_without_a_gradient_keeps_eagers_signed_zeros(backend):
    fast = tt.compile(_square_and_scaled, backend=backend)
    for call in range(3):   # the capture's call, then replays with new values
        x, y = _pair((8, 2), call)
        _square_and_scaled(x, 0.0)[0].backward()
        fast(y, 0.0)[0].backward()
        assert (np.signbit(x.grad.data) != 0).any()     # the case zeros would break
        assert x.grad.data.tobytes() == y.grad.data.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_result_without_a_gradient_meets_no_inf(backend):
    def fn(x, w):
        h = x * w
        return h.sum(), h * 2.0

    fast = tt.compile(fn, backend=backend)
    for call in range(2):
        x, y = _pair((3, 4), call)
        w = tt.tensor(np.full((3, 4), np.inf, np.float32))
        fn(x, w)[0].backward()
        fast(y, w)[0].backward()
        np.testing.assert_array_equal(x.grad.data, y.grad.data)   # inf, no nan from 0 * inf


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_subset_of_results_differentiated_matches_eager(backend):
    def fn(x):
        return (x.exp() * 0.5).sum(), x.tanh(), x * 3.0

    fast = tt.compile(fn, backend=backend)
    for picks in [(0,), (1,), (2,), (0, 2), (0, 1, 2), (1,)]:
        x, y = _pair((4, 5), len(picks), np.float64)
        for f, t in ((fn, x), (fast, y)):
            outs = f(t)
            sum(outs[k].sum() for k in picks).backward()
        if backend == "numpy":   # the ops' own NumPy code: eager's bits
            assert x.grad.data.tobytes() == y.grad.data.tobytes(), picks
        else:                    # C's exp and tanh are not NumPy's to the last bit
            np.testing.assert_allclose(x.grad.data, y.grad.data, rtol=1e-14, atol=0)


def test_gpt_logits_and_loss_with_only_the_loss_differentiated():
    tt.manual_seed(0)
    m = models.GPT(models.GPTConfig(vocab_size=32, n_positions=16, n_embd=16, n_layer=1,
                                    n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                    attn_pdrop=0.0)).double()
    fast = tt.compile(m, backend="numpy")
    ids = tt.randint(0, 32, (2, 8))
    for call in range(2):
        want = m(ids, labels=ids)
        want.loss.backward()
        grads = [p.grad.data.copy() for p in m.parameters()]
        m.zero_grad()
        got = fast(ids, labels=ids)
        got.loss.backward()
        for g, p in zip(grads, m.parameters()):
            np.testing.assert_allclose(p.grad.data, g, rtol=1e-12, atol=1e-14)
        m.zero_grad()


def test_an_absent_gradient_meeting_an_op_it_cannot_leave_out_is_refused():
    from tinytensor.compiler import absent, ir
    from tinytensor.ops.elementwise import Sub
    f32 = tt.float32
    a, g = ir.Value((3,), f32, kind="input"), ir.Value((3,), f32, kind="input")
    out = ir.Value((3,), f32)
    program = ir.Program(inputs=[a, g], instrs=[ir.Instr("sub", Sub, [g, a], [out])],
                         outputs=[out], consts={})
    with pytest.raises(CaptureError, match="'sub'"):
        absent.without(program, [1], "fn")
    reduced, kept, out_map = absent.without(program, [0], "fn")   # g - (absent) is g
    assert kept == [1] and out_map == [0] and reduced.outputs == [g]
