"""What a compiled optimizer step reads at each replay (nn/optim.py `_Captured`): the group
options, the state arrays and the step-dependent scalars are looked up once per call and the
scalars refreshed in place; whatever changes between calls (a learning-rate schedule, a
checkpoint loaded, a group added, the state dropped) must reach the replay, so that every
step stays bitwise the eager one."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor.nn.checkpoint  # noqa: F401 -- nn.checkpoint below
import tinytensor as tt
from tinytensor.nn.schedules import LambdaLR, cosine_with_warmup

from .helpers import mlp, training_step

train_step = training_step(lambda m, x, y: ((m(x) - y) ** 2).mean())

N_STEPS = 8

CONFIGS = [
    (nn.optim.SGD, dict(lr=0.05)),
    (nn.optim.SGD, dict(lr=0.05, weight_decay=0.01)),
    (nn.optim.SGD, dict(lr=0.05, momentum=0.9)),
    (nn.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (nn.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.2)),
    (nn.optim.Adam, dict(lr=1e-2)),
    (nn.optim.Adam, dict(lr=1e-2, weight_decay=0.01, amsgrad=True)),
    (nn.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (nn.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
]
IDS = [f"{cls.__name__}-" + "-".join(f"{k}={v}" for k, v in opts.items()) for cls, opts in CONFIGS]


def _batches(n=N_STEPS, seed=3):
    rng = np.random.default_rng(seed)
    return [(tt.tensor(rng.standard_normal((8, 16)).astype(np.float32)),
             tt.tensor(rng.standard_normal((8, 4)).astype(np.float32))) for _ in range(n)]


def _run(step, make_opt, between=None):
    """Losses, parameters and optimizer of N_STEPS steps under a warmup-cosine schedule;
    `between(i, m, opt, sched)` runs before step i (both runs do the same to their copy)."""
    m = mlp()
    opt = make_opt(m)
    sched = LambdaLR(opt, cosine_with_warmup(2, N_STEPS))
    losses = []
    for i, batch in enumerate(_batches()):
        if between is not None:
            between(i, m, opt, sched)
        losses.append(float(step(m, opt, *batch).data))
        sched.step()
    return losses, [p.data.copy() for p in m.parameters()], opt


def _assert_same(compiled, eager):
    assert compiled[0] == eager[0]
    for a, b in zip(compiled[1], eager[1]):
        assert a.tobytes() == b.tobytes()
    s_c, s_e = compiled[2].state_dict(), eager[2].state_dict()
    assert [g["lr"] for g in s_c["param_groups"]] == [g["lr"] for g in s_e["param_groups"]]
    assert s_c["state"].keys() == s_e["state"].keys()
    for i, s in s_e["state"].items():
        assert s_c["state"][i].keys() == s.keys()
        for k, v in s.items():
            w = s_c["state"][i][k]
            assert (w.data.tobytes() == v.data.tobytes()) if isinstance(v, tt.Tensor) else w == v


def _both(make_opt, between=None, backend="numpy"):
    eager = _run(train_step, make_opt, between)
    step = tt.compile(train_step, backend=backend)
    compiled = _run(step, make_opt, between)
    _assert_same(compiled, eager)
    return step


@pytest.mark.parametrize("opt_cls,opts", CONFIGS, ids=IDS)
def test_every_optimizer_under_a_schedule_is_bitwise_eager(opt_cls, opts):
    step = _both(lambda m: opt_cls(m.parameters(), **opts))
    assert len(step.programs) == 1  # the learning rate is read at each call, not baked in


@pytest.mark.parametrize("opt_cls,opts", [CONFIGS[3], CONFIGS[8]], ids=[IDS[3], IDS[8]])
def test_every_optimizer_under_a_schedule_is_bitwise_eager_c_backend(opt_cls, opts):
    step = _both(lambda m: opt_cls(m.parameters(), **opts), backend="c")
    assert len(step.programs) == 1


def _groups(m):
    # different options per group, so that a reader looking at the wrong group shows
    return [{"params": list(m[0].parameters()), "weight_decay": 0.1},
            {"params": list(m[2].parameters()), "lr": 3e-3, "weight_decay": 0.0}]


@pytest.mark.parametrize("opt_cls,opts", [CONFIGS[3], CONFIGS[6], CONFIGS[8]],
                         ids=[IDS[3], IDS[6], IDS[8]])
def test_param_groups_with_their_own_options_and_lr_are_bitwise_eager(opt_cls, opts):
    opts = {k: v for k, v in opts.items() if k != "weight_decay"}

    def between(i, m, opt, sched):
        opt.param_groups[1]["lr"] *= 0.5 ** i   # on top of the schedule, one group only
        if i == 4:   # a new dict in the group's place: what a replay reads must follow it
            opt.param_groups[1] = dict(opt.param_groups[1], lr=1e-3)
    step = _both(lambda m: opt_cls(_groups(m), **opts), between)
    assert len(step.programs) == 1


@pytest.mark.parametrize("opt_cls,opts", [CONFIGS[2], CONFIGS[4], CONFIGS[6], CONFIGS[7]],
                         ids=[IDS[2], IDS[4], IDS[6], IDS[7]])
def test_state_loaded_from_a_checkpoint_between_calls_is_read(opt_cls, opts, tmp_path):
    saved = {}

    def between(i, m, opt, sched):
        if i == 3:
            saved["state"] = opt.state_dict()
        if i == 5:   # back to step 3's moments and step counts, from a file
            path = tmp_path / f"opt{len(saved)}.tt"
            nn.checkpoint.save(saved["state"], path)
            opt.load_state_dict(nn.checkpoint.load(path))
            saved["loaded"] = True
    step = _both(lambda m: opt_cls(m.parameters(), **opts), between)
    assert len(step.programs) == 1


@pytest.mark.parametrize("opt_cls,opts", [CONFIGS[2], CONFIGS[7]], ids=[IDS[2], IDS[7]])
def test_state_emptied_between_calls_starts_again_as_eager(opt_cls, opts):
    # a fresh optimizer's state_dict: no momentum buffer, no moments, step 0
    def between(i, m, opt, sched):
        if i == 4:
            opt.load_state_dict({"state": {}, "param_groups": opt.state_dict()["param_groups"]})
        if i == 6:
            opt.state.clear()
    _both(lambda m: opt_cls(m.parameters(), **opts), between)


@pytest.mark.parametrize("opt_cls,opts", [CONFIGS[3], CONFIGS[8]], ids=[IDS[3], IDS[8]])
def test_a_group_added_between_calls_is_updated_as_eager(opt_cls, opts):
    def between(i, m, opt, sched):
        if i == 3:
            opt.add_param_group({"params": list(m[2].parameters()), "lr": 2e-3})
    step = _both(lambda m: opt_cls(m[0].parameters(), **opts), between)
    # layer 2, outside the optimizer until step 3, keeps its .grad, so call 1 meets a new
    # signature (a .grad on entry); the added group is one more
    assert len(step.programs) == 3

