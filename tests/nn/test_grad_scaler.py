"""nn.GradScaler step by step against torch.amp.GradScaler("cpu") on the same model, the
same data and the same injected inf/NaN gradients: scale, growth tracker, skipped steps,
weights after each step, and state_dict round trips."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")


def _pair(**kw):
    w0 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ours = nn.Parameter(tt.tensor(w0))
    theirs = torch.nn.Parameter(torch.tensor(w0))
    return (ours, nn.optim.SGD([ours], lr=0.1), nn.GradScaler("cpu", **kw),
            theirs, torch.optim.SGD([theirs], lr=0.1), torch.amp.GradScaler("cpu", **kw))


def _step(w, opt, scaler, x, poison, lib):
    opt.zero_grad()
    loss = (x @ w.T).square().mean()
    scaler.scale(loss).backward()
    if poison is not None:
        w.grad.data[0, 1] = poison  # as an overflowing float16 backward would leave it
    scaler.unscale_(opt)
    grad = np.array(w.grad.data if lib == "tt" else w.grad.numpy())
    out = scaler.step(opt)
    scaler.update()
    return grad, out


# inf and nan at chosen steps, two clean runs long enough to grow twice (interval 3)
POISON = {2: float("inf"), 5: float("nan"), 6: float("-inf")}


def test_schedule_matches_torch_step_by_step():
    w, opt, sc, tw, topt, tsc = _pair(init_scale=2.0 ** 10, growth_interval=3)
    rng = np.random.default_rng(1)
    scales = []
    for step in range(14):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        g, out = _step(w, opt, sc, tt.tensor(x), POISON.get(step), "tt")
        tg, tout = _step(tw, topt, tsc, torch.tensor(x), POISON.get(step), "torch")
        assert sc.get_scale() == tsc.get_scale(), step
        assert sc.state_dict() == tsc.state_dict(), step
        np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-8, equal_nan=True)  # unscaled alike
        np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-7)
        assert out is None and tout is None  # SGD returns no loss; a skip returns None too
        scales.append(sc.get_scale())
    # the schedule itself, so a torch that changed would not pass silently either
    # (the NaN at step 5 also resets the count of clean steps 3 and 4)
    assert scales == [1024.0, 1024.0, 512.0, 512.0, 512.0, 256.0, 128.0,
                      128.0, 128.0, 256.0, 256.0, 256.0, 512.0, 512.0]


def test_skipped_step_leaves_weights_and_optimizer_state_alone():
    w, opt, sc, *_ = _pair()
    before = w.detach().numpy().copy()
    _step(w, opt, sc, tt.ones(2, 4), float("nan"), "tt")
    np.testing.assert_array_equal(w.detach().numpy(), before)
    assert sc.get_scale() == 2.0 ** 15


def test_state_dict_round_trip_continues_like_torch():
    w, opt, sc, tw, topt, tsc = _pair(init_scale=8.0, growth_interval=2)
    x = np.ones((2, 4), np.float32)
    _step(w, opt, sc, tt.tensor(x), None, "tt")
    _step(tw, topt, tsc, torch.tensor(x), None, "torch")
    fresh, tfresh = nn.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    fresh.load_state_dict(sc.state_dict())
    tfresh.load_state_dict(tsc.state_dict())
    assert fresh.state_dict() == tfresh.state_dict() == {
        "scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
        "_growth_tracker": 1}
    _step(w, opt, fresh, tt.tensor(x), None, "tt")
    _step(tw, topt, tfresh, torch.tensor(x), None, "torch")
    assert fresh.get_scale() == tfresh.get_scale() == 16.0


def test_misuse_is_refused_as_torch_refuses_it():
    w, opt, sc, *_ = _pair()
    (w.sum() * 1.0).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_: already called"):
        sc.unscale_(opt)
    sc.step(opt)
    with pytest.raises(RuntimeError, match="step: already called since the last update"):
        sc.step(opt)
    with pytest.raises(RuntimeError, match="unscale_: called after step"):
        sc.unscale_(opt)
    sc.update()
    with pytest.raises(RuntimeError, match="update: no inf checks were recorded"):
        sc.update()
    with pytest.raises(RuntimeError, match="empty"):
        sc.load_state_dict({})
    with pytest.raises(ValueError, match="backoff_factor must be in"):
        nn.GradScaler(backoff_factor=2.0)


def test_disabled_scaler_is_a_pass_through():
    w, opt, _, *_ = _pair()
    before = w.detach().numpy().copy()
    sc = nn.GradScaler(enabled=False)
    loss = w.sum()
    assert sc.scale(loss) is loss and sc.state_dict() == {} and sc.get_scale() == 1.0
    loss.backward()
    sc.step(opt)
    np.testing.assert_allclose(w.detach().numpy(), before - 0.1, rtol=1e-6)  # a plain step
