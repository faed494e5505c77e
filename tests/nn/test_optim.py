"""Optimizers against torch.optim: 20 steps from the same parameters with the same
gradient rule give the same trajectory (float64), plus groups, state_dict and errors."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import Parameter, optim

SHAPES = [(4, 3), (5,), (2, 3, 2)]
STEPS = 20


def _grad_rule(p_np, t, k):
    """A gradient that depends on the current parameter (so errors compound) and the step."""
    rng = np.random.default_rng(1000 * t + k)
    return 0.5 * p_np + np.sin(p_np) * 0.3 + rng.standard_normal(p_np.shape)


def _run_pair(tt_cls, torch_cls, groups, kwargs, steps=STEPS, skip=None):
    """groups: list of dicts of options (per group) over SHAPES split into groups."""
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in SHAPES]
    split = np.array_split(np.arange(len(SHAPES)), len(groups))
    tparams = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    xparams = [Parameter(tt.tensor(a.copy())) for a in init]
    tg = [dict(g, params=[tparams[i] for i in idx]) for g, idx in zip(groups, split)]
    xg = [dict(g, params=[xparams[i] for i in idx]) for g, idx in zip(groups, split)]
    kw_torch = dict(kwargs, foreach=False)
    topt, xopt = torch_cls(tg, **kw_torch), tt_cls(xg, **kwargs)
    for t in range(steps):
        for k, (tp, xp) in enumerate(zip(tparams, xparams)):
            if skip is not None and skip(t, k):  # no gradient this step: the param is left alone
                tp.grad, xp.grad = None, None
                continue
            g = _grad_rule(tp.detach().numpy(), t, k)
            tp.grad = torch.tensor(g)
            xp.grad = tt.tensor(_grad_rule(xp.data, t, k))
        topt.step()
        xopt.step()
        for tp, xp in zip(tparams, xparams):
            np.testing.assert_allclose(xp.data, tp.detach().numpy(), rtol=1e-12, atol=1e-13,
                                       err_msg=f"step {t}")
    return topt, xopt, tparams, xparams


CASES = [
    ("sgd plain", optim.SGD, torch.optim.SGD, [{}], dict(lr=0.1)),
    ("sgd momentum", optim.SGD, torch.optim.SGD, [{}], dict(lr=0.05, momentum=0.9)),
    ("sgd dampening+wd", optim.SGD, torch.optim.SGD, [{}],
     dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("sgd nesterov", optim.SGD, torch.optim.SGD, [{}],
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("sgd groups", optim.SGD, torch.optim.SGD, [{"lr": 0.2}, {"momentum": 0.5, "weight_decay": 0.0}],
     dict(lr=0.05, momentum=0.9, weight_decay=0.1)),
    ("adam", optim.Adam, torch.optim.Adam, [{}], dict(lr=1e-2)),
    ("adam betas/eps/wd", optim.Adam, torch.optim.Adam, [{}],
     dict(lr=3e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05)),
    ("adam amsgrad", optim.Adam, torch.optim.Adam, [{}], dict(lr=1e-2, amsgrad=True, weight_decay=0.01)),
    ("adamw default wd", optim.AdamW, torch.optim.AdamW, [{}], dict(lr=1e-2)),
    ("adamw amsgrad", optim.AdamW, torch.optim.AdamW, [{}], dict(lr=2e-2, weight_decay=0.1, amsgrad=True)),
    ("adamw no-decay group", optim.AdamW, torch.optim.AdamW,
     [{}, {"weight_decay": 0.0, "lr": 5e-3}, {"betas": (0.5, 0.9)}], dict(lr=1e-2, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,xcls,tcls,groups,kwargs", CASES, ids=[c[0] for c in CASES])
def test_trajectory_matches_torch(name, xcls, tcls, groups, kwargs):
    _run_pair(xcls, tcls, groups, kwargs)


@pytest.mark.parametrize("xcls,tcls,kwargs", [
    (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (optim.Adam, torch.optim.Adam, dict(lr=1e-2)),
    (optim.AdamW, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
])
def test_missing_grads_skip_params(xcls, tcls, kwargs):
    # a parameter without a gradient this step is not updated, not decayed, its state not advanced
    _run_pair(xcls, tcls, [{}], kwargs, skip=lambda t, k: (t + k) % 3 == 0)


def test_lr_change_between_steps_is_used():
    topt, xopt, tps, xps = _run_pair(optim.Adam, torch.optim.Adam, [{}], dict(lr=1e-2), steps=3)
    for g in topt.param_groups:
        g["lr"] = 0.5
    for g in xopt.param_groups:
        g["lr"] = 0.5
    for tp, xp in zip(tps, xps):
        tp.grad, xp.grad = torch.ones_like(tp), tt.ones(*xp.shape, dtype=tt.float64)
    topt.step()
    xopt.step()
    for tp, xp in zip(tps, xps):
        np.testing.assert_allclose(xp.data, tp.detach().numpy(), rtol=1e-12)


def _train(opt, params, steps, start=0):
    for t in range(start, start + steps):
        for k, p in enumerate(params):
            p.grad = tt.tensor(_grad_rule(p.data, t, k))
        opt.step()


@pytest.mark.parametrize("cls,kwargs", [
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
])
def test_state_dict_round_trip_gives_identical_next_step(cls, kwargs):
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(s) for s in SHAPES]
    a = [Parameter(tt.tensor(x.copy())) for x in init]
    opt_a = cls([{"params": a[:2]}, {"params": a[2:], "lr": 0.003}], **kwargs)
    _train(opt_a, a, 5)
    sd = opt_a.state_dict()
    # a fresh optimizer over copies of the current parameters, built with other settings
    b = [Parameter(tt.tensor(p.data.copy())) for p in a]
    opt_b = cls([{"params": b[:2]}, {"params": b[2:]}], lr=123.0)
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[1]["lr"] == 0.003 and opt_b.param_groups[0]["lr"] == kwargs["lr"]
    _train(opt_a, a, 3, start=5)
    _train(opt_b, b, 3, start=5)
    for pa, pb in zip(a, b):
        np.testing.assert_array_equal(pa.data, pb.data)


def test_state_dict_is_a_snapshot_and_load_does_not_alias():
    p = Parameter(tt.tensor(np.ones(3)))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = tt.ones(3, dtype=tt.float64)
    opt.step()
    sd = opt.state_dict()
    buf = sd["state"][0]["momentum_buffer"].numpy().copy()
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"].numpy(), buf)
    opt.load_state_dict(sd)
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"].numpy(), buf)


def test_state_dict_layout():
    p, q = Parameter(tt.zeros(2)), Parameter(tt.zeros(3))
    opt = optim.Adam([{"params": [p]}, {"params": [q], "weight_decay": 0.1}], lr=1e-3)
    p.grad = tt.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert set(sd["state"]) == {0}  # q never had a gradient
    assert sd["state"][0]["step"] == 1
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["param_groups"][1]["weight_decay"] == 0.1 and sd["param_groups"][0]["weight_decay"] == 0.0


def test_load_state_dict_reports_every_mismatch():
    a = [Parameter(tt.zeros(2, 2)), Parameter(tt.zeros(3))]
    opt = optim.SGD(a, lr=0.1, momentum=0.9)
    for p in a:
        p.grad = tt.ones(*p.shape)
    opt.step()
    sd = opt.state_dict()
    wrong = [Parameter(tt.zeros(2, 3)), Parameter(tt.zeros(4))]
    with pytest.raises(ValueError) as e:
        optim.SGD(wrong, lr=0.1, momentum=0.9).load_state_dict(sd)
    msg = str(e.value)
    assert "(2, 2)" in msg and "(2, 3)" in msg and "(3,)" in msg and "(4,)" in msg
    with pytest.raises(ValueError, match="2 parameter\\(s\\) in the state but 1 here"):
        optim.SGD([Parameter(tt.zeros(2, 2))], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="1 parameter group\\(s\\), this optimizer has 2"):
        optim.SGD([{"params": [a[0]]}, {"params": [a[1]]}], lr=0.1).load_state_dict(sd)


def test_zero_grad():
    p = Parameter(tt.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = tt.ones(3)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and np.all(g.data == 0)
    opt.zero_grad()
    assert p.grad is None


def test_step_bumps_version_so_stale_backward_raises():
    w = Parameter(tt.tensor([1.0, 2.0]))
    loss = (w * w).sum()  # mul saves w for backward
    opt = optim.SGD([w], lr=0.1)
    w.grad = tt.ones(2)
    v = w._version[0]
    opt.step()
    assert w._version[0] == v + 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_step_with_closure_and_real_backward():
    w = Parameter(tt.tensor([1.0, -2.0], dtype=tt.float64))
    tw = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt, topt = optim.SGD([w], lr=0.1, momentum=0.5), torch.optim.SGD([tw], lr=0.1, momentum=0.5)

    def closure():
        opt.zero_grad()
        loss = (w ** 4).sum()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = (tw ** 4).sum()
        loss.backward()
        return loss

    for _ in range(5):
        loss = opt.step(closure)
        tloss = topt.step(tclosure)
        assert float(loss) == pytest.approx(tloss.item(), rel=1e-12)
    np.testing.assert_allclose(w.data, tw.detach().numpy(), rtol=1e-12)


def test_float32_params_keep_dtype():
    p = Parameter(tt.ones(3))
    opt = optim.AdamW([p], lr=1e-2)
    p.grad = tt.ones(3, dtype=tt.float64)  # a wider gradient is cast to the parameter's dtype
    opt.step()
    assert p.dtype == tt.float32 and opt.state[p]["exp_avg"].dtype == np.float32


@pytest.mark.parametrize("make,match", [
    (lambda: optim.SGD([], lr=0.1), "empty parameter list"),
    (lambda: optim.SGD(Parameter(tt.ones(2)), lr=0.1), "single Tensor"),
    (lambda: optim.SGD([Parameter(tt.ones(2))], lr=-1.0), "invalid learning rate"),
    (lambda: optim.SGD([Parameter(tt.ones(2))], lr=0.1, nesterov=True), "nesterov"),
    (lambda: optim.Adam([Parameter(tt.ones(2))], betas=(1.0, 0.9)), "invalid betas"),
    (lambda: optim.SGD([{"params": [Parameter(tt.ones(2))], "weight_decy": 0.1}], lr=0.1),
     "unknown option.*weight_decy"),
    (lambda: (lambda p: optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1))(Parameter(tt.ones(2))),
     "more than once"),
    (lambda: optim.SGD([tt.ones(2, requires_grad=True) * 2], lr=0.1), "non-leaf"),
])
def test_errors(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


# --------------------------------------------------------------------------- gradient clipping
def _grad_pairs(shapes=((4, 3), (7,), (2, 2, 2)), scale=1.0, dtype=np.float64):
    rng = np.random.default_rng(7)
    gs = [rng.standard_normal(s).astype(dtype) * scale for s in shapes]
    xs = [Parameter(tt.tensor(np.zeros(s, dtype=dtype))) for s in shapes]
    ts = [torch.zeros(s, dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True) for s in shapes]
    for g, x, t in zip(gs, xs, ts):
        x.grad, t.grad = tt.tensor(g.copy()), torch.tensor(g.copy())
    return xs, ts


@pytest.mark.parametrize("max_norm", [0.5, 3.0, 100.0])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf"), "inf"])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    xs, ts = _grad_pairs()
    total = nn.clip_grad_norm_(xs, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type=float(norm_type), foreach=False)
    assert isinstance(total, tt.Tensor) and total.ndim == 0
    np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-12)
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_clip_grad_norm_float32_single_tensor_and_none_grads():
    xs, ts = _grad_pairs(dtype=np.float32, scale=10.0)
    xs[1].grad, ts[1].grad = None, None
    total = nn.clip_grad_norm_(xs[0], 1.0)  # a single Tensor is accepted
    ttotal = torch.nn.utils.clip_grad_norm_(ts[0], 1.0)
    assert total.dtype == tt.float32
    np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-6)
    np.testing.assert_allclose(xs[0].grad.numpy(), ts[0].grad.numpy(), rtol=1e-6)
    total = nn.clip_grad_norm_(xs, 1.0)
    np.testing.assert_allclose(total.item(), torch.nn.utils.clip_grad_norm_(ts, 1.0).item(), rtol=1e-6)
    assert nn.clip_grad_norm_([Parameter(tt.ones(2))], 1.0).item() == 0.0  # no gradients at all


def test_clip_grad_norm_nonfinite():
    xs, ts = _grad_pairs()
    xs[0].grad.data[0, 0] = np.nan
    with pytest.raises(RuntimeError, match="nan"):
        nn.clip_grad_norm_(xs, 1.0, error_if_nonfinite=True)
    xs[0].grad.data[0, 0] = np.inf
    ts[0].grad[0, 0] = np.inf
    total = nn.clip_grad_norm_(xs, 1.0)  # allowed by default: like torch, grads become nan
    assert total.item() == torch.nn.utils.clip_grad_norm_(ts, 1.0).item() == np.inf
    np.testing.assert_array_equal(np.isnan(xs[1].grad.numpy()), np.isnan(ts[1].grad.numpy()))


def test_clip_grad_value_matches_torch():
    xs, ts = _grad_pairs(scale=2.0)
    nn.clip_grad_value_(xs, 0.7)
    torch.nn.utils.clip_grad_value_(ts, 0.7)
    for x, t in zip(xs, ts):
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    assert np.abs(xs[0].grad.numpy()).max() == 0.7


def test_clipping_and_zeroing_never_write_into_shared_or_read_only_grad_arrays():
    x, y = Parameter(tt.tensor([3.0, 4.0])), Parameter(tt.tensor([0.0, 0.0]))
    (x + y).sum().backward()  # one gradient array may serve both x and y
    up = tt.tensor([[3.0, 4.0]])
    z = Parameter(tt.ones(2))
    z.reshape(1, 2).backward(up)  # z.grad may be a view of the caller's own `up`
    w = Parameter(tt.ones(4))
    w.sum().backward()  # w.grad may be a read-only broadcast view
    total = nn.clip_grad_norm_([x, y, z, w], 1.0)
    assert total.item() == pytest.approx(np.sqrt(1 + 1 + 1 + 1 + 9 + 16 + 4))
    c = 1.0 / (total.item() + 1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [c, c])  # scaled once, not twice
    np.testing.assert_allclose(y.grad.numpy(), [c, c])
    np.testing.assert_allclose(z.grad.numpy(), [3 * c, 4 * c])
    np.testing.assert_array_equal(up.numpy(), [[3.0, 4.0]])  # the caller's tensor untouched
    nn.clip_grad_value_([x, y, w], 0.1)
    np.testing.assert_allclose(w.grad.numpy(), [0.1] * 4)
    opt = optim.SGD([x, y, z, w], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert all(not np.any(p.grad.numpy()) for p in (x, y, z, w))
    np.testing.assert_array_equal(up.numpy(), [[3.0, 4.0]])
