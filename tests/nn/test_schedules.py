"""LR schedules: our LambdaLR and factories against the same formulas, written out here
independently, run through torch.optim.lr_scheduler.LambdaLR."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.nn import Parameter, optim, schedules

STEPS = 100


def ref_transformer(d_model, warmup):
    # the paper counts steps from 1
    return lambda s: d_model ** -0.5 * min((s + 1) ** -0.5, (s + 1) * warmup ** -1.5)


def ref_cosine(warmup, total, min_ratio):
    def f(s):
        if s < warmup:
            return s / max(1, warmup)
        p = min(1.0, (s - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * (1 + math.cos(math.pi * p)) / 2
    return f


def ref_linear(warmup, total, min_ratio):
    def f(s):
        if s < warmup:
            return s / max(1, warmup)
        return min_ratio + (1 - min_ratio) * max(0.0, (total - s) / max(1, total - warmup))
    return f


def ref_constant(warmup):
    return lambda s: s / warmup if s < warmup else 1.0


CASES = [
    ("transformer", schedules.transformer_schedule(512, 10), ref_transformer(512, 10), 1.0),
    ("transformer long warmup", schedules.transformer_schedule(64, 4000), ref_transformer(64, 4000), 2.0),
    ("cosine", schedules.cosine_with_warmup(10, 80), ref_cosine(10, 80, 0.0), 3e-4),
    ("cosine min ratio", schedules.cosine_with_warmup(5, 60, 0.1), ref_cosine(5, 60, 0.1), 1e-3),
    ("cosine no warmup", schedules.cosine_with_warmup(0, 100), ref_cosine(0, 100, 0.0), 1e-3),
    ("linear", schedules.linear_with_warmup(10, 90), ref_linear(10, 90, 0.0), 0.1),
    ("linear min ratio", schedules.linear_with_warmup(20, 70, 0.25), ref_linear(20, 70, 0.25), 0.1),
    ("constant", schedules.constant_with_warmup(15), ref_constant(15), 0.5),
]


@pytest.mark.parametrize("name,factory,ref,lr", CASES, ids=[c[0] for c in CASES])
def test_lambda_lr_matches_torch(name, factory, ref, lr):
    p = Parameter(tt.zeros(1, dtype=tt.float64))
    tp = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt, topt = optim.SGD([p], lr=lr), torch.optim.SGD([tp], lr=lr)
    sched = schedules.LambdaLR(opt, factory)
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, ref)
    ours, theirs = [], []
    for _ in range(STEPS):
        ours.append(sched.get_last_lr()[0])
        theirs.append(tsched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == ours[-1]
        p.grad, tp.grad = tt.ones(1, dtype=tt.float64), torch.ones(1, dtype=torch.float64)
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=0)
    # the learning rates were really used by the optimizer steps
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-12)


def test_schedule_shapes():
    f = schedules.cosine_with_warmup(10, 110, min_ratio=0.1)
    assert f(0) == 0.0 and f(5) == 0.5 and f(10) == 1.0
    assert f(60) == pytest.approx(0.55) and f(110) == pytest.approx(0.1) and f(1000) == pytest.approx(0.1)
    g = schedules.linear_with_warmup(10, 110)
    assert g(60) == pytest.approx(0.5) and g(110) == 0.0 and g(500) == 0.0
    t = schedules.transformer_schedule(512, 4000)
    peak = max(range(8000), key=t)
    assert peak == 3999 and t(peak) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)


def test_per_group_lambdas_and_state_dict():
    ps = [Parameter(tt.zeros(1)), Parameter(tt.zeros(1))]
    opt = optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], lr=1.0)
    fs = [schedules.constant_with_warmup(4), schedules.linear_with_warmup(0, 10)]
    sched = schedules.LambdaLR(opt, fs)
    for _ in range(3):
        sched.step()
    assert sched.get_last_lr() == [0.75, 0.5 * 0.7]
    sd = sched.state_dict()
    # resume: a new optimizer and scheduler pick up the same lrs
    opt2 = optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], lr=1.0)
    sched2 = schedules.LambdaLR(opt2, fs)
    sched2.load_state_dict(sd)
    assert [g["lr"] for g in opt2.param_groups] == sched.get_last_lr()
    sched.step()
    sched2.step()
    assert sched2.get_last_lr() == sched.get_last_lr() == [1.0, 0.5 * 0.6]


def test_errors():
    opt = optim.SGD([Parameter(tt.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="2 lr_lambdas"):
        schedules.LambdaLR(opt, [lambda s: 1.0, lambda s: 1.0])
    with pytest.raises(ValueError, match="warmup_steps <= total_steps"):
        schedules.cosine_with_warmup(10, 5)
    with pytest.raises(ValueError, match="min_ratio"):
        schedules.linear_with_warmup(1, 5, min_ratio=2.0)
