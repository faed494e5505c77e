"""`bench.py conv`'s batch-norm cases and `--resnet` build what they compare correctly
(they are never timed in tests)."""
import pytest


@pytest.mark.slow   # ~2 s unloaded (torch's import in a fresh worker, ResNet-sized arrays)
def test_batch_norm_cases_agree_with_torch_and_run_their_backward():
    from tinytensor.tools.lib.bench_conv import batch_norm_cases
    names = []
    for name, tt_step, th_step in batch_norm_cases():   # each checks its forward against torch
        tt_step()
        th_step()
        names.append(name)
    assert len(names) == 2 and all("batch_norm" in n for n in names)


@pytest.mark.slow   # ~3 s: two ResNet-18s (11M parameters each) built and stepped
def test_resnet_step_starts_from_torchs_loss(capsys):
    from tinytensor.tools.lib.bench_conv import run_resnet
    run_resnet(repeat=1, batch=2, size=32, rounds=1)   # asserts the first losses agree
    out = capsys.readouterr().out
    assert "ResNet-18 training step, N=2 3x32x32" in out and "ratio" in out
