"""Adam's and AdamW's step in one C pass (tinytensor/kernels/c_optim.py) gives the NumPy
update's bits, with and without weight decay, in float32 and float64."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.kernels import c_eager


def _train(opt_cls, dtype, c_on, **kw):
    rng = np.random.default_rng(21)
    w = tt.tensor(rng.standard_normal((64, 48)).astype(dtype), requires_grad=True)
    b = tt.tensor(rng.standard_normal(48).astype(dtype), requires_grad=True)
    x = tt.tensor(rng.standard_normal((16, 64)).astype(dtype))
    opt = opt_cls([{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}], lr=1e-2, **kw)
    prev = c_eager.set_enabled(c_on)
    before = c_eager.calls.get("adam", 0)
    try:
        for _ in range(4):
            opt.zero_grad()
            (tt.tanh(x @ w + b) ** 2).sum().backward()   # w's gradient: a transposed array
            opt.step()
    finally:
        c_eager.set_enabled(prev)
    return w.detach().numpy(), b.detach().numpy(), c_eager.calls.get("adam", 0) - before


@pytest.mark.parametrize("opt_cls", [nn.optim.Adam, nn.optim.AdamW])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_step_gives_the_numpy_steps_bits(opt_cls, dtype):
    if not c_eager.enabled():
        pytest.skip("no C compiler")
    *got, ran = _train(opt_cls, dtype, True, betas=(0.9, 0.95))
    *want, ran_numpy = _train(opt_cls, dtype, False, betas=(0.9, 0.95))
    assert ran == 8 and ran_numpy == 0
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


def test_amsgrad_and_maximize_stay_numpys():
    before = c_eager.calls.get("adam", 0)
    _train(nn.optim.Adam, np.float32, True, amsgrad=True)
    _train(nn.optim.AdamW, np.float32, True, maximize=True)
    assert c_eager.calls.get("adam", 0) == before
