"""`tools/train.py --compile`: the training step as one compiled program gives eager's loss
curve (to rounding: the captured backward rounds differently); the step clips with
nn.clip_grad_norm_, which the capture records."""
import numpy as np
import pytest

from tinytensor import nn
from tinytensor.tools import train

TINY = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "4", "--context", "16",
        "--eval-every", "3", "--sample-tokens", "5", "--max-bytes", "20000", "--warmup", "2"]


def _curve(out, *flags):
    train.main(["--steps", "6", "--out", str(out)] + TINY + list(flags))
    state = nn.load(str(out / "checkpoint.safetensors"))
    return [v for _, v in state["history"]["train"]], state["model"]


@pytest.mark.parametrize("model", ["gpt2"])
def test_compiled_run_has_the_eager_loss_curve(model, tmp_path):
    eager, w_eager = _curve(tmp_path / "eager", "--model", model)
    compiled, w_compiled = _curve(tmp_path / "compiled", "--model", model, "--compile")
    assert len(compiled) == len(eager) == 6
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=0)
    for k, v in w_eager.items():
        np.testing.assert_allclose(w_compiled[k].data, v.data, rtol=0, atol=1e-4, err_msg=k)


def test_compile_with_distributed_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--compile and --distributed"):
        from tinytensor.tools.lib.training import _run
        args = train.parse_args(["--compile", "--out", str(tmp_path)] + TINY)
        _run(args, _OneRank())


class _OneRank:
    def get_rank(self):
        return 0

    def get_world_size(self):
        return 1
