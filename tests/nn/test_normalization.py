"""nn.BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, GroupNorm, LocalResponseNorm against their
torch twins with copied state dicts: outputs, input and parameter gradients, running
statistics and num_batches_tracked over several training steps, then eval; torch state
dicts load; running statistics keep updating under tt.compile (two and more calls)."""
import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt
from tinytensor.compiler import CaptureError
from tests.against_torch import forward_backward_both
from tests.tinytensor.distributed.mpi import mpiexec, needs_mpi, results


def _copy_from_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})


def _run_both(ours, theirs, shape, steps, rng):
    """`steps` forward+backward calls on the same inputs; compares each output, the input's
    and every parameter's gradient, and the whole state dict after each call."""
    for _ in range(steps):
        x = rng.standard_normal(shape)
        g = rng.standard_normal(shape)
        forward_backward_both(ours, theirs, x, g, out_tol=(1e-12, 1e-12), grad_tol=(1e-11, 1e-12))
        for (name, p), (tname, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == tname
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-11, atol=1e-12, err_msg=name)
        sa, sb = ours.state_dict(), theirs.state_dict()
        assert list(sa) == list(sb)
        for k in sa:
            np.testing.assert_allclose(sa[k].numpy(), sb[k].detach().numpy(), rtol=1e-13, atol=1e-14, err_msg=k)
            assert sa[k].dtype.name == str(sb[k].dtype).replace("torch.", ""), k


BATCH = [
    ("BatchNorm1d", (4, 3), {}),
    ("BatchNorm1d", (2, 3, 5), {"momentum": None}),
    ("BatchNorm2d", (2, 3, 3, 2), {}),
    ("BatchNorm2d", (2, 3, 2, 2), {"affine": False, "momentum": 0.5}),
    ("BatchNorm2d", (3, 3, 2, 2), {"track_running_stats": False}),
    ("BatchNorm2d", (2, 3, 2, 2), {"bias": False}),
    ("BatchNorm3d", (2, 3, 2, 2, 2), {"momentum": None, "eps": 1e-3}),
]


@pytest.mark.parametrize("cls, shape, kw", BATCH, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(BATCH)])
def test_batch_norm_train_then_eval_matches_torch(cls, shape, kw):
    rng = np.random.default_rng(0)
    theirs = getattr(torch.nn, cls)(3, **kw).double()
    ours = getattr(nn, cls)(3, dtype=tt.float64, **kw)
    if theirs.affine:   # weights other than 1 and 0, so their gradients mean something
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            if theirs.bias is not None:
                theirs.bias.uniform_(-0.5, 0.5)
    _copy_from_torch(ours, theirs)
    _run_both(ours, theirs, shape, 3, rng)
    ours.eval(), theirs.eval()
    _run_both(ours, theirs, shape, 1, rng)
    assert repr(ours).split("  #")[0] == repr(theirs)


@pytest.mark.parametrize("cls, shape, kw", [
    ("InstanceNorm1d", (2, 3, 5), {}),
    ("InstanceNorm1d", (3, 5), {"affine": True}),          # unbatched
    ("InstanceNorm2d", (2, 3, 3, 2), {"affine": True, "track_running_stats": True}),
    ("InstanceNorm3d", (2, 3, 2, 2, 2), {"track_running_stats": True, "momentum": 0.3}),
])
def test_instance_norm_train_then_eval_matches_torch(cls, shape, kw):
    rng = np.random.default_rng(1)
    theirs = getattr(torch.nn, cls)(3, **kw).double()
    ours = getattr(nn, cls)(3, dtype=tt.float64, **kw)
    if theirs.affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
    _copy_from_torch(ours, theirs)
    _run_both(ours, theirs, shape, 2, rng)
    ours.eval(), theirs.eval()
    _run_both(ours, theirs, shape, 1, rng)


@pytest.mark.parametrize("make, shape", [
    (lambda m: m.GroupNorm(2, 4), (2, 4, 3, 2)),
    (lambda m: m.GroupNorm(4, 4, eps=1e-3, affine=False), (3, 4, 5)),
    (lambda m: m.GroupNorm(1, 3, bias=False), (2, 3, 4)),
    (lambda m: m.LocalResponseNorm(3, alpha=0.2, beta=0.6, k=1.5), (2, 5, 3, 2)),
])
def test_group_and_local_response_norm_match_torch(make, shape):
    theirs, ours = make(torch.nn).double(), make(nn).to(tt.float64)
    if isinstance(theirs, torch.nn.GroupNorm) and theirs.affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            if theirs.bias is not None:
                theirs.bias.uniform_(-0.5, 0.5)
    _copy_from_torch(ours, theirs)
    _run_both(ours, theirs, shape, 1, np.random.default_rng(2))
    assert repr(ours).split("  #")[0] == repr(theirs)


def test_a_torch_checkpoint_loads_and_num_batches_tracked_is_int64():
    theirs = torch.nn.BatchNorm2d(4)
    theirs.train()
    for _ in range(3):
        theirs(torch.randn(2, 4, 3, 3))
    ours = nn.BatchNorm2d(4)
    ours.load_state_dict(theirs.state_dict())   # torch tensors, torch's key names
    assert ours.num_batches_tracked.dtype == tt.int64 and ours.num_batches_tracked.item() == 3
    np.testing.assert_array_equal(ours.running_var.numpy(), theirs.running_var.numpy())
    assert list(nn.BatchNorm1d(2, track_running_stats=False).state_dict()) == ["weight", "bias"]


def test_a_checkpoint_without_num_batches_tracked_loads_and_keeps_the_count_as_in_torch():
    old = {k: v for k, v in torch.nn.BatchNorm2d(4).state_dict().items() if k != "num_batches_tracked"}
    theirs, ours = torch.nn.BatchNorm2d(4), nn.BatchNorm2d(4)
    theirs.num_batches_tracked.fill_(5)
    with tt.no_grad():
        ours.num_batches_tracked.fill_(5)
    old["running_mean"] = torch.arange(4.0)
    theirs.load_state_dict(old)   # torch: a missing num_batches_tracked keeps the module's
    result = ours.load_state_dict(old)
    assert result.missing_keys == [] and ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 5
    assert ours.running_mean.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="missing: running_var"):
        nn.BatchNorm2d(4).load_state_dict({"weight": torch.ones(4), "bias": torch.zeros(4),
                                           "running_mean": torch.zeros(4)})


def test_wrong_input_rank_names_the_layer_and_shape():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input, got input of shape \(2, 3, 4\)"):
        nn.BatchNorm2d(3)(tt.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"GroupNorm: num_channels \(6\) must be divisible by num_groups \(4\)"):
        nn.GroupNorm(4, 6)


def _bn_net():
    tt.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 3, dtype=tt.float64), nn.BatchNorm1d(3, momentum=None, dtype=tt.float64))


@pytest.mark.parametrize("how, backend", [
    ("argument", "numpy"), ("closure", "numpy"),
    # the C runner may compute the new statistics straight into the buffers' arrays; a cold
    # C compile takes ~5 s on the 2-core CI machine
    pytest.param("argument", "c", marks=pytest.mark.slow)])
def test_running_statistics_keep_updating_under_compile(how, backend):
    """A training step compiled once, called 3 times on different batches: the running
    statistics, num_batches_tracked (momentum=None: its 1/n factor) and the weights follow
    eager's step by step: the update is replayed, not frozen at the first call's values."""
    eager, comp = _bn_net(), _bn_net()
    opt_e = nn.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = nn.optim.SGD(comp.parameters(), lr=0.1)

    def step(model, opt, x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    if how == "argument":
        fast = tt.compile(step, backend=backend)
        run = lambda x: fast(comp, opt_c, x)   # noqa: E731
    else:
        fast = tt.compile(lambda x: step(comp, opt_c, x), backend=backend)
        run = fast
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal((4, 2))
        le, lc = step(eager, opt_e, tt.tensor(x)), run(tt.tensor(x))
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-12)
        for k, v in eager.state_dict().items():
            np.testing.assert_allclose(comp.state_dict()[k].numpy(), v.numpy(), rtol=1e-11, atol=1e-13, err_msg=k)
    assert comp[1].num_batches_tracked.item() == 3
    comp.eval(), eager.eval()   # eval reads the running statistics the compiled calls left
    x = tt.tensor(rng.standard_normal((4, 2)))
    np.testing.assert_allclose(comp(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-12)


def test_compile_refuses_running_statistics_passed_as_arguments():
    import tinytensor.functional as F
    f = tt.compile(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True).sum(), backend="numpy")
    with pytest.raises(CaptureError, match=r"batch_norm updates running_mean .* in place"):
        f(tt.randn(2, 3), tt.zeros(3), tt.ones(3))
    # reading them (eval) is fine: arguments are read afresh at every call
    g = tt.compile(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=False) * 1.0, backend="numpy")
    x = tt.tensor(np.arange(6.0).reshape(2, 3))
    for mean in (0.0, 2.0):
        rm, rv = tt.full((3,), mean, dtype=tt.float64), tt.ones(3, dtype=tt.float64)
        np.testing.assert_allclose(g(x, rm, rv).numpy(), F.batch_norm(x, rm, rv).numpy(), rtol=1e-12)


@needs_mpi
def test_sync_batch_norm_on_two_ranks_equals_batch_norm_on_the_whole_batch():
    """tests/tinytensor/distributed/worker_syncbn.py: ranks holding 3 rows and 1 of a batch of 4,
    two training steps and an eval step, against BatchNorm2d on all 4 rows in one process."""
    ranks = results(mpiexec(["tests/tinytensor/distributed/worker_syncbn.py"]))
    for r in (0, 1):
        res = ranks[r]
        assert res["converted"] == ["Conv2d", "SyncBatchNorm", "ReLU", "Conv2d", "SyncBatchNorm"]
        assert res["num_batches_tracked"] == 2
        for what in ("y", "x_grad", "param_grad", "state", "eval"):
            assert res[what] < 1e-12, (r, what, res)


def test_sync_batch_norm_without_a_process_group_is_batch_norm():
    tt.manual_seed(0)
    x = tt.randn(4, 3, 2, dtype=tt.float64)
    a, b = nn.SyncBatchNorm(3, dtype=tt.float64), nn.BatchNorm1d(3, dtype=tt.float64)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    np.testing.assert_array_equal(a.running_var.numpy(), b.running_var.numpy())


def test_compiled_eval_reads_the_running_statistics_of_each_call():
    """A closure's model in eval mode: its running statistics are read at every call (a
    program input), not copied into the program as constants at the first."""
    bn = nn.BatchNorm1d(3, dtype=tt.float64).eval()
    fast = tt.compile(lambda x: bn(x) * 1.0, backend="numpy")
    x = tt.tensor(np.arange(6.0).reshape(2, 3))
    first = fast(x).numpy()
    with tt.no_grad():
        bn.running_mean.fill_(1.0)
        bn.running_var.fill_(4.0)
    np.testing.assert_allclose(fast(x).numpy(), bn(x).detach().numpy(), rtol=1e-12)
    assert not np.allclose(first, fast(x).numpy())
