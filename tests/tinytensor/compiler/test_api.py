import warnings

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

from .helpers import gpt, lm_step, mlp, mse_step


def _grads(m):
    return [p.grad.data for p in m.parameters()]


def test_mlp_training_step_bitwise_equal_to_eager_for_10_steps():
    m1, m2 = mlp(), mlp()
    o1, o2 = nn.optim.SGD(m1.parameters(), lr=0.1), nn.optim.SGD(m2.parameters(), lr=0.1)
    step = tt.compile(mse_step)
    tt.manual_seed(1)
    for _ in range(10):
        x, y = tt.randn(8, 16), tt.randn(8, 4)
        eager, compiled = mse_step(m1, x, y), step(m2, x, y)
        assert eager.data.tobytes() == compiled.data.tobytes()
        for a, b in zip(_grads(m1), _grads(m2)):
            assert a.tobytes() == b.tobytes()
        o1.step(), o2.step(), o1.zero_grad(), o2.zero_grad()
    assert len(step.programs) == 1


def test_gpt_tiny_training_step_with_dropout_matches_eager_for_3_steps():
    # losses are bitwise equal; gradients within a few ulps: the captured backward is each
    # op's `backward` in tinytensor ops and the reference decompositions of the fused kernels,
    # where eager runs `backward_arrays` and the fused backward kernels
    m1, m2 = gpt(drop=0.1), gpt(drop=0.1)
    o1, o2 = nn.optim.AdamW(m1.parameters(), lr=1e-2), nn.optim.AdamW(m2.parameters(), lr=1e-2)
    step = tt.compile(lm_step)
    for k in range(3):
        tt.manual_seed(10 + k)
        ids = tt.randint(0, 32, (2, 8))
        tt.manual_seed(100 + k)
        eager = lm_step(m1, ids)
        tt.manual_seed(100 + k)  # same seed, same dropout masks
        compiled = step(m2, ids)
        assert eager.data.tobytes() == compiled.data.tobytes()
        for a, b in zip(_grads(m1), _grads(m2)):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
        o1.step(), o2.step(), o1.zero_grad(), o2.zero_grad()
    assert len(step.programs) == 1


@pytest.mark.parametrize("existing", [False, True])
def test_grad_assignment_like_eager_none_or_accumulating(existing):
    m1, m2 = mlp(), mlp()
    tt.manual_seed(3)
    x, y = tt.randn(8, 16), tt.randn(8, 4)
    step = tt.compile(mse_step)
    if existing:
        mse_step(m1, x, y), mse_step(m2, x, y)
    for _ in range(3):  # a capture, then replays: each adds into the .grad eager would add to
        if not existing:
            for p1, p2 in zip(m1.parameters(), m2.parameters()):
                p1.grad = p2.grad = None
        mse_step(m1, x, y), step(m2, x, y)
        for a, b in zip(_grads(m1), _grads(m2)):
            assert a.tobytes() == b.tobytes()
    assert len(step.programs) == 1
    assert all(p.grad.grad_fn is None and p.grad.data.flags.writeable for p in m2.parameters())


def test_guards_recompile_on_shape_scalar_and_training_flag():
    m = mlp()

    def f(m, x, scale):
        return m(x) * scale
    cf = tt.compile(f)
    x = tt.randn(2, 16)
    cf(m, x, 2.0), cf(m, x, 2.0)
    assert len(cf.programs) == 1
    cf(m, tt.randn(3, 16), 2.0)
    cf(m, x, 3.0)
    m.eval()
    cf(m, x, 3.0)
    assert len(cf.programs) == 4
    np.testing.assert_array_equal(cf(m, x, 3.0).data, f(m, x, 3.0).data)


def test_after_8_signatures_warns_once_naming_the_change_and_runs_eagerly():
    cf = tt.compile(lambda x: x * 2.0)
    for n in range(1, 9):
        cf(tt.ones(4, n))
    with pytest.warns(RuntimeWarning, match=r"8 signatures.*arg 0 shape \(4, 8\) -> \(4, 9\)"):
        out = cf(tt.ones(4, 9))
    assert out.shape == (4, 9) and len(cf.programs) == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf(tt.ones(4, 10))


def test_decorator_and_module_forward():
    @tt.compile
    def double(x):
        return x * 2.0
    x = tt.randn(3)
    double(x)
    np.testing.assert_array_equal(double(x).data, x.data * 2.0)

    m = mlp()
    fast = tt.compile(m)
    x = tt.randn(5, 16)
    first, again = fast(x), fast(x)
    assert first.data.tobytes() == m(x).data.tobytes() == again.data.tobytes()
    # the parameters require grad: the results are differentiable (test_aot.py), under
    # no_grad they carry no history
    assert again.requires_grad and again.grad_fn is not None
    with tt.no_grad():
        assert fast(x).grad_fn is None and not fast(x).requires_grad


def test_bad_dynamic_and_missing_backends_are_clear_errors():
    with pytest.raises(TypeError, match="dynamic must be True or False, got 'yes'"):
        tt.compile(lambda x: x, dynamic="yes")
    assert callable(tt.compile(lambda x: x, backend="cuda"))  # runs where CuPy and a GPU are
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        tt.compile(lambda x: x, backend="tpu")


def test_backend_c_replays_like_the_eager_first_call_or_is_a_clear_error():
    try:
        from tinytensor.compiler.codegen import c  # noqa: F401  (built by the codegen work)
        from tinytensor.compiler.passes import fuse  # noqa: F401
    except ImportError:
        with pytest.raises(NotImplementedError, match="backend='c'.*not available"):
            tt.compile(mse_step, backend="c")
        return
    m, step = mlp(), tt.compile(mse_step, backend="c")
    x, y = tt.randn(8, 16), tt.randn(8, 4)
    first = step(m, x, y)
    want = [g.copy() for g in _grads(m)]
    for p in m.parameters():
        p.grad = None
    again = step(m, x, y)
    assert first.data.tobytes() == again.data.tobytes()
    for a, b in zip(want, _grads(m)):
        assert a.tobytes() == b.tobytes()


def test_tt_grad_inside_a_compiled_step_is_recorded_not_frozen():
    import numpy as np
    import tinytensor as tt
    w = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)

    @tt.compile
    def grad_of_cube(x):
        (g,) = tt.grad(((w * x) ** 3).sum(), [w])
        return g

    for x in ([1.0, 1.0, 1.0], [2.0, 0.5, -1.0], [0.1, 0.2, 0.3]):
        got = grad_of_cube(tt.tensor(x)).numpy()
        xs = np.array(x, np.float32)
        np.testing.assert_allclose(got, 3 * (w.detach().numpy() * xs) ** 2 * xs, rtol=1e-6)


def test_a_result_that_is_a_view_of_an_argument_is_handed_out_as_a_copy():
    # a replay must not give the caller the argument's own memory: writing into the result
    # would change the argument (eager's reshape would share it, but eager is not a program
    # that the next call reruns on the same memory)
    step = tt.compile(lambda x: (x.reshape(-1), x[1:].reshape(-1), x * 1.0))
    x = tt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    step(x)
    for r in step(x):
        assert not np.may_share_memory(r.data, x.data)
    np.testing.assert_array_equal(step(x)[1].data, [3, 4, 5])


def test_autocast_is_part_of_the_signature():
    import tinytensor as tt
    w = tt.randn(8, 8)

    @tt.compile
    def f(x):
        return x @ w

    x = tt.randn(4, 8)
    assert f(x).dtype == tt.float32
    with tt.autocast("cpu", dtype=tt.float16):
        assert f(x).dtype == tt.float16   # recaptured with the casts, not the float32 program
    assert f(x).dtype == tt.float32
    assert len(f.programs) == 2


def test_the_cycle_collector_is_paused_only_while_compiling():
    import gc
    seen = []

    def step(x):
        seen.append(gc.isenabled())
        return x * 2.0
    f = tt.compile(step)
    assert gc.isenabled()
    f(tt.ones(3))
    assert seen == [False] and gc.isenabled()

    def bad(x):
        return tt.tensor(float(x.sum().item()))   # a value read into Python: refused
    from tinytensor.compiler.capture import CaptureError
    with pytest.raises(CaptureError, match=r"\.item\(\)"):
        tt.compile(bad)(tt.ones(3))
    assert gc.isenabled()
    gc.disable()
    try:
        f(tt.ones(4))                                # a new signature: compiles again
        assert not gc.isenabled()                    # left as the caller had it
    finally:
        gc.enable()
