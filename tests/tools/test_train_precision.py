"""`tools/train.py --precision bf16|fp16`: a short run under tt.autocast follows the float32
loss curve within low-precision rounding, keeps the weights float32, and with fp16 carries
nn.GradScaler's state in the checkpoint (and back in on --resume)."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.tools import train

from .test_train_compile import TINY


def _run(out, *flags, steps=6):
    train.main(["--steps", str(steps), "--out", str(out)] + TINY + list(flags))
    return nn.load(str(out / "checkpoint.safetensors"))


@pytest.fixture(scope="module")
def fp32(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fp32"))


@pytest.mark.parametrize("precision, rtol", [("fp16", 5e-3), pytest.param(
    "bf16", 4e-2, marks=pytest.mark.skipif(getattr(tt, "bfloat16", None) is None,
                                           reason="tt.bfloat16 not there yet"))])
def test_mixed_precision_follows_the_float32_curve(fp32, tmp_path, precision, rtol):
    state = _run(tmp_path, "--precision", precision)
    ref = [v for _, v in fp32["history"]["train"]]
    got = [v for _, v in state["history"]["train"]]
    assert len(got) == 6 and all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=rtol)
    assert got != ref  # autocast did change the arithmetic
    assert all(v.dtype is tt.float32 for v in state["model"].values())
    if precision == "fp16":
        # no overflow in so short a run: the scale never backed off, 6 clean steps counted
        assert state["scaler"] == {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 2000, "_growth_tracker": 6}
    else:
        assert not state["scaler"]


def test_fp16_resume_restores_the_scaler(tmp_path):
    first = _run(tmp_path / "a", "--precision", "fp16", steps=3)
    assert first["scaler"]["_growth_tracker"] == 3
    resumed = _run(tmp_path / "b", "--precision", "fp16", "--resume",
                   str(tmp_path / "a" / "checkpoint.safetensors"), steps=6)
    assert resumed["scaler"]["_growth_tracker"] == 6


def test_precision_with_compile_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--precision fp16 and --compile do not combine"):
        train.main(["--steps", "1", "--out", str(tmp_path), "--precision", "fp16", "--compile"] + TINY)
