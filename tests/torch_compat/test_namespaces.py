"""torch's namespaces under tinytensor (issue 30): the names torch scripts use exist, with
torch's signatures, and behave as torch's where there is one to compare with."""
import importlib
import inspect
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.nn.parallel import _check_device_ids
from tinytensor.distributed import process_group


def _params(f):
    return [n for n in inspect.signature(f).parameters]


@pytest.mark.parametrize("name", ["nn.functional", "nn.init", "nn.utils", "nn.parallel", "optim",
                                  "optim.lr_scheduler", "cuda", "cuda.amp", "amp", "backends",
                                  "backends.cuda", "backends.cudnn", "distributed", "utils.data"])
def test_every_namespace_imports_as_a_module(name):
    mod = importlib.import_module(f"tinytensor.{name}")
    assert mod is eval(f"tt.{name}")  # the import and the attribute are one module


@pytest.mark.parametrize("ours,theirs", [
    ("optim.AdamW", "optim.AdamW"), ("optim.Adam", "optim.Adam"), ("optim.SGD", "optim.SGD"),
    ("amp.GradScaler", "amp.GradScaler"), ("cuda.amp.GradScaler", "cuda.amp.GradScaler"),
    ("save", "save"), ("load", "load"), ("nn.utils.clip_grad_norm_", "nn.utils.clip_grad_norm_"),
    ("optim.lr_scheduler.CosineAnnealingLR", "optim.lr_scheduler.CosineAnnealingLR"),
    ("utils.data.DataLoader", "utils.data.DataLoader"),
    ("utils.data.DistributedSampler", "utils.data.DistributedSampler")])
def test_signatures_are_torchs(ours, theirs):
    assert _params(eval(f"tt.{ours}")) == _params(eval(f"torch.{theirs}"))


def test_ddp_and_process_group_take_torchs_arguments():
    ddp = _params(tt.nn.parallel.DistributedDataParallel)
    assert ddp == _params(torch.nn.parallel.DistributedDataParallel)[:len(ddp)]
    assert "device_ids" in ddp and "find_unused_parameters" in ddp
    ipg = _params(tt.distributed.init_process_group)
    assert ipg[:9] == _params(torch.distributed.init_process_group)[:9]
    assert tt.distributed.ReduceOp.AVG == tt.distributed.ReduceOp.MEAN


def test_ddp_device_ids_must_be_none_for_a_cpu_module_as_torchs():
    m = tt.nn.Linear(2, 2)
    _check_device_ids(m, None, None)
    with pytest.raises(ValueError, match=r"device_ids .* must be None for CPU modules.*\[0\]"):
        _check_device_ids(m, [0], None)


def test_torchrun_single_process_is_a_group_of_one():
    assert process_group.launcher_env({"RANK": "0", "WORLD_SIZE": "1"}) == (0, 1)
    assert process_group.launcher_env({"RANK": "1", "WORLD_SIZE": "2"}) is None


def test_functional_is_the_engines():
    import tinytensor.nn.functional as F
    assert F.cross_entropy is tt.functional.cross_entropy
    assert set(tt.functional.__all__) <= set(dir(F))


def test_adamw_fused_foreach_maximize_against_torch():
    rng = np.random.default_rng(0)
    w0, g0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours, theirs = tt.nn.Parameter(tt.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    kw = dict(lr=0.1, betas=(0.9, 0.95), weight_decay=0.1, maximize=True)
    o = tt.optim.AdamW([ours], fused=True, foreach=False, **kw)
    t = torch.optim.AdamW([theirs], foreach=False, **kw)
    for k in range(3):
        ours.grad, theirs.grad = tt.tensor(g0 * (k + 1)), torch.tensor(g0 * (k + 1))
        o.step()
        t.step()
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-14, atol=1e-15)
    assert o.param_groups[0]["fused"] is True and o.param_groups[0]["foreach"] is False
    with pytest.raises(ValueError, match="differentiable=True is not supported"):
        tt.optim.AdamW([ours], differentiable=True)


def test_sgd_maximize_against_torch():
    w0 = np.arange(4.0)
    ours, theirs = tt.nn.Parameter(tt.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    o = tt.optim.SGD([ours], lr=0.5, momentum=0.9, maximize=True)
    t = torch.optim.SGD([theirs], lr=0.5, momentum=0.9, maximize=True)
    for _ in range(2):
        ours.grad, theirs.grad = tt.tensor(w0 - 1), torch.tensor(w0 - 1)
        o.step()
        t.step()
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


@pytest.mark.parametrize("make", [
    lambda m, o: m.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    lambda m, o: m.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5], gamma=0.3),
    lambda m, o: m.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
    lambda m, o: m.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    lambda m, o: m.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=4),
    lambda m, o: m.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
    lambda m, o: m.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (e + 1))])
def test_lr_schedulers_against_torch(make):
    lrs = []
    for m in (tt, torch):
        p = m.nn.Parameter(m.zeros(1))
        opt = m.optim.SGD([p], lr=0.3)
        sched = make(m, opt)
        seen = []
        for _ in range(9):
            seen.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        lrs.append(seen + sched.get_last_lr())
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-13)


def _batches(loader):
    return [[np.asarray(x.numpy() if hasattr(x, "numpy") else x) for x in b] for b in loader]


@pytest.mark.parametrize("drop_last", [False, True])
def test_dataloader_batches_as_torchs(drop_last):
    x, y = np.arange(20.0).reshape(10, 2), np.arange(10)
    order = [3, 1, 4, 1, 5, 9, 2, 6, 5]  # any iterable of indices is a sampler
    for kw in (dict(), dict(sampler=order)):
        ours = tt.utils.data.DataLoader(tt.utils.data.TensorDataset(tt.tensor(x), tt.tensor(y)),
                                        batch_size=4, drop_last=drop_last, **kw)
        theirs = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=4,
            drop_last=drop_last, **kw)
        a, b = _batches(ours), _batches(theirs)
        assert len(ours) == len(theirs) == len(a) == len(b)
        for p, q in zip(a, b):
            for u, v in zip(p, q):
                np.testing.assert_array_equal(u, v)


def test_dataloader_shuffles_every_epoch_and_covers_the_data():
    ds = tt.utils.data.TensorDataset(tt.arange(10))
    tt.manual_seed(0)
    loader = tt.utils.data.DataLoader(ds, batch_size=3, shuffle=True, num_workers=2)
    epochs = [np.concatenate([b[0].numpy() for b in loader]) for _ in range(2)]
    assert all(sorted(e.tolist()) == list(range(10)) for e in epochs)
    assert epochs[0].tolist() != epochs[1].tolist()


def test_default_collate_as_torchs():
    items = [{"x": np.ones(2, np.float32) * i, "n": i, "f": 0.5 * i, "s": f"s{i}"} for i in range(3)]
    ours = tt.utils.data.default_collate(items)
    theirs = torch.utils.data.default_collate(items)
    for k in ("x", "n", "f"):
        assert ours[k].dtype.name == str(theirs[k].dtype).split(".")[1]
        np.testing.assert_array_equal(ours[k].numpy(), theirs[k].numpy())
    assert ours["s"] == theirs["s"]


@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_shards_as_torchs(drop_last):
    ds = list(range(11))
    for rank in range(3):
        ours = tt.utils.data.DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=False,
                                                drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(ds, num_replicas=3, rank=rank,
                                                     shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.skipif(tt.cuda.is_available(), reason="the answers of a machine without CUDA")
def test_cuda_queries_on_a_cpu_only_machine_as_torchs():
    assert tt.cuda.is_available() == torch.cuda.is_available() is False
    assert tt.cuda.device_count() == torch.cuda.device_count() == 0
    for q in ("memory_allocated", "max_memory_allocated", "memory_reserved"):
        assert getattr(tt.cuda, q)() == getattr(torch.cuda, q)() == 0
    assert tt.cuda.is_bf16_supported() is False
    tt.cuda.manual_seed(1)
    tt.cuda.manual_seed_all(1)
    for f in (tt.cuda.current_device, tt.cuda.synchronize):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            f()


def test_backends_flags_are_settable_with_torchs_defaults():
    for path in ("cuda.matmul.allow_tf32", "cudnn.allow_tf32", "cudnn.benchmark",
                 "cudnn.deterministic"):
        assert eval(f"tt.backends.{path}") == eval(f"torch.backends.{path}")
    before = tt.backends.cudnn.benchmark
    tt.backends.cuda.matmul.allow_tf32 = True
    tt.backends.cudnn.benchmark = not before
    assert tt.backends.cuda.matmul.allow_tf32 is True and tt.backends.cudnn.benchmark is not before
    tt.backends.cuda.matmul.allow_tf32, tt.backends.cudnn.benchmark = False, before


@pytest.mark.skipif(tt.cuda.is_available(), reason="the warning of a machine without CUDA")
def test_grad_scaler_without_cuda_disables_itself_with_torchs_warning():
    with pytest.warns(UserWarning) as ours:
        s = tt.amp.GradScaler(enabled=True)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        t = torch.amp.GradScaler(enabled=True)
    assert str(ours[0].message) == str(theirs[0].message)
    assert s.is_enabled() is t.is_enabled() is False
    assert ours[0].filename == __file__  # points at the user's line
    loss = tt.tensor(2.0)
    assert s.scale(loss) is loss  # a disabled scaler leaves the loss alone
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tt.amp.GradScaler("cpu").is_enabled()
        assert not tt.cuda.amp.GradScaler(enabled=False).is_enabled()


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_as_torchs(name):
    ours, theirs = tt.finfo(getattr(tt, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_as_torchs(name):
    ours, theirs = tt.iinfo(getattr(tt, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max) == (theirs.bits, theirs.min, theirs.max)


def test_small_top_level_names_as_torchs():
    assert tt.is_tensor(tt.ones(1)) and not tt.is_tensor(np.ones(1))
    assert tt.numel(tt.ones(2, 3)) == torch.numel(torch.ones(2, 3)) == 6
    assert isinstance(tt.float32, tt.dtype)
    assert tt.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    tt.set_float32_matmul_precision("high")
    assert tt.get_float32_matmul_precision() == "high"
    tt.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError):
        tt.set_float32_matmul_precision("fast")
    tt.manual_seed(7)
    assert tt.initial_seed() == 7


@pytest.mark.gpu
@pytest.mark.skipif(not tt.cuda.is_available(), reason="needs CUDA (CuPy and a GPU)")
def test_cuda_queries_on_cupy():
    import cupy
    assert tt.cuda.device_count() == cupy.cuda.runtime.getDeviceCount() >= 1
    tt.cuda.set_device(0)
    assert tt.cuda.current_device() == 0
    before = tt.cuda.memory_allocated()
    x = tt.ones(1 << 20, device="cuda")
    assert tt.cuda.memory_allocated() >= before + 4 * (1 << 20)
    assert tt.cuda.max_memory_allocated() >= tt.cuda.memory_allocated()
    assert tt.cuda.memory_reserved() >= tt.cuda.memory_allocated()
    tt.cuda.synchronize()
    assert isinstance(tt.cuda.get_device_name(), str) and len(tt.cuda.get_device_capability()) == 2
    draws = []
    for _ in range(2):
        tt.cuda.manual_seed_all(3)
        draws.append(tt.randn(4, device="cuda").cpu().numpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tt.amp.GradScaler("cuda").is_enabled()
    del x


def test_init_process_group_checks_torchs_arguments_before_starting_mpi(monkeypatch):
    with pytest.raises(ValueError, match="init_method"):
        tt.distributed.init_process_group("gloo", init_method="tcp://10.0.0.1:23456")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    monkeypatch.setitem(__import__("sys").modules, "mpi4py", None)  # MPI must not be reached
    with pytest.raises(ValueError, match="rank=1, world_size=2 were given but the launcher says rank 0 of 2"):
        tt.distributed.init_process_group(backend="gloo", rank=1, world_size=2)
    assert not tt.distributed.is_initialized()
