"""Initializers: fans and gains against torch.nn.init, value statistics on large tensors,
in-place semantics and seeding."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import init

N = (400, 500)  # 200k values: the sample std of a mean is ~0.2% of the std


@pytest.mark.parametrize("shape", [(3, 4), (8, 2), (5, 3, 7), (6, 4, 3, 3), (2, 1, 1, 1, 5)])
def test_fans_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(tt.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fans_need_two_dims():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.xavier_uniform_(tt.empty(5))


@pytest.mark.parametrize("nl,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                      ("tanh", None), ("relu", None), ("leaky_relu", None),
                                      ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", None)])
def test_gain_matches_torch(nl, param):
    assert init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param), rel=1e-15)


def test_gain_errors():
    with pytest.raises(ValueError, match="unsupported"):
        init.calculate_gain("swish")


def _stats(t):
    d = np.asarray(t.detach(), dtype=np.float64)
    return d.mean(), d.std(), d.min(), d.max()


# tolerances of 6 standard errors of the estimate, so a correct sampler essentially never
# fails, while a wrong scale (a missing sqrt(3), a swapped fan) is off by far more
def _uniform_check(t, lo, hi):
    mean, std, mn, mx = _stats(t)
    n, width = t.numel(), hi - lo
    assert lo <= mn < lo + 0.01 * width and hi - 0.01 * width < mx <= hi
    assert mean == pytest.approx((lo + hi) / 2, abs=6 * width / math.sqrt(12 * n))
    assert std == pytest.approx(width / math.sqrt(12), rel=6 * math.sqrt(0.2 / n))


def _normal_check(t, mean, std):
    m, s, _, _ = _stats(t)
    n = t.numel()
    assert m == pytest.approx(mean, abs=6 * std / math.sqrt(n))
    assert s == pytest.approx(std, rel=6 / math.sqrt(2 * n))


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_uniform_normal_constant(dtype):
    t = tt.empty(*N, dtype=dtype)
    assert init.uniform_(t, -3.0, 5.0) is t
    _uniform_check(t, -3.0, 5.0)
    init.normal_(t, 2.0, 0.5)
    _normal_check(t, 2.0, 0.5)
    assert t.dtype == dtype
    init.constant_(t, 0.25)
    assert np.all(t.numpy() == 0.25)
    init.zeros_(t)
    assert not np.any(t.numpy())
    init.ones_(t)
    assert np.all(t.numpy() == 1)


@pytest.mark.parametrize("shape", [(400, 500), (128, 64, 3, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier(shape, gain):
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    t = tt.empty(*shape, dtype=tt.float64)
    init.xavier_uniform_(t, gain=gain)
    _uniform_check(t, -math.sqrt(3) * std, math.sqrt(3) * std)
    init.xavier_normal_(t, gain=gain)
    _normal_check(t, 0.0, std)


@pytest.mark.parametrize("a,mode,nl", [(0, "fan_in", "relu"), (0, "fan_out", "relu"),
                                       (math.sqrt(5), "fan_in", "leaky_relu"),
                                       (0.1, "fan_out", "leaky_relu"), (0, "fan_in", "linear")])
def test_kaiming(a, mode, nl):
    shape = (250, 800)
    tr = torch.empty(shape, dtype=torch.float64)
    torch.nn.init.kaiming_uniform_(tr, a=a, mode=mode, nonlinearity=nl)
    fan = shape[1] if mode == "fan_in" else shape[0]
    std = torch.nn.init.calculate_gain(nl, a) / math.sqrt(fan)
    bound = math.sqrt(3) * std
    assert tr.abs().max().item() <= bound  # our formula for the bound is torch's
    t = tt.empty(*shape, dtype=tt.float64)
    init.kaiming_uniform_(t, a=a, mode=mode, nonlinearity=nl)
    _uniform_check(t, -bound, bound)
    init.kaiming_normal_(t, a=a, mode=mode, nonlinearity=nl)
    _normal_check(t, 0.0, std)
    _normal_check(tt.tensor(torch.nn.init.kaiming_normal_(tr, a=a, mode=mode, nonlinearity=nl).numpy()), 0.0, std)


def _trunc_normal_truth(mean, std, a, b, probs):
    """Mean, std and quantiles of the truncated normal by integrating its density on a fine
    grid (relative to its peak, so tails far out neither underflow nor cancel)."""
    lo, hi = (a - mean) / std, (b - mean) / std
    x = np.linspace(lo, hi, 400_001)
    peak = min(abs(lo), abs(hi)) if lo * hi > 0 else 0.0
    w = np.exp((peak * peak - x * x) / 2)
    cdf = np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2 * np.diff(x))])
    cdf /= cdf[-1]
    pdf = np.gradient(cdf, x)
    m = np.trapezoid(x * pdf, x)
    var = np.trapezoid((x - m) ** 2 * pdf, x)
    return mean + std * m, std * math.sqrt(var), mean + std * np.interp(probs, cdf, x)


TRUNC = [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -2.0, 2.0), (1.0, 2.0, 0.0, 5.0), (0.0, 1.0, -0.5, 0.5),
         (0.0, 1.0, 3.0, 4.0),          # 0.13% of the mass, in the upper tail: exponential proposals
         (0.0, 1.0, -9.0, -8.0),        # 1e-15 of the mass: torch's own sampler warns here
         (0.0, 1.0, 4.0, 4.05),         # narrow and far out: uniform proposals
         (0.0, 1.0, -0.01, 0.01), (5.0, 0.5, 0.0, 1.0)]


@pytest.mark.parametrize("mean,std,a,b", TRUNC)
def test_trunc_normal_statistics(mean, std, a, b):
    t = tt.empty(*N, dtype=tt.float64)
    init.trunc_normal_(t, mean=mean, std=std, a=a, b=b)
    probs = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]
    true_mean, true_std, quantiles = _trunc_normal_truth(mean, std, a, b, probs)
    d = t.numpy().reshape(-1)
    n = d.size
    assert a <= d.min() and d.max() <= b
    assert d.mean() == pytest.approx(true_mean, abs=6 * true_std / math.sqrt(n))
    assert d.std() == pytest.approx(true_std, rel=6 / math.sqrt(n))
    # the whole shape: the fraction below each true quantile is that quantile's probability
    below = np.array([(d <= q).mean() for q in quantiles])
    np.testing.assert_allclose(below, probs, atol=6 * math.sqrt(0.25 / n))


def test_trunc_normal_float32_stays_in_bounds():
    t = tt.empty(1000, 1000)
    init.trunc_normal_(t, std=1.0, a=-0.1, b=0.1)
    assert t.dtype == tt.float32 and t.numpy().min() >= -0.1 and t.numpy().max() <= 0.1


def test_seeded_and_in_place_on_parameters():
    lin = nn.Linear(30, 20)
    w = lin.weight
    v = w._version[0]
    tt.manual_seed(123)
    init.kaiming_normal_(w, nonlinearity="relu")
    first = w.detach().numpy().copy()
    assert w is lin.weight and w.requires_grad and w.grad_fn is None
    assert w._version[0] == v + 1
    tt.manual_seed(123)
    init.kaiming_normal_(lin.weight, nonlinearity="relu")
    np.testing.assert_array_equal(lin.weight.detach().numpy(), first)
    init.kaiming_normal_(lin.weight, nonlinearity="relu")
    assert not np.array_equal(lin.weight.detach().numpy(), first)


def test_init_inside_no_tape_and_works_with_module_apply():
    def reinit(m):
        if isinstance(m, nn.Linear):
            init.xavier_uniform_(m.weight)
            init.zeros_(m.bias)

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with tt.record() as tape:
        net.apply(reinit)
    assert len(tape) == 0
    assert not np.any(net[0].bias.detach().numpy()) and not np.any(net[2].bias.detach().numpy())
    assert np.abs(net[2].weight.detach().numpy()).max() <= math.sqrt(6 / 10)


def test_modifying_a_saved_param_is_caught_by_backward():
    w = nn.Parameter(tt.ones(3))
    y = (w * w).sum()
    init.normal_(w)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


@pytest.mark.parametrize("fn", [init.uniform_, init.normal_, init.trunc_normal_])
def test_integer_tensors_rejected(fn):
    with pytest.raises(TypeError, match="floating"):
        fn(tt.zeros(3, dtype=tt.int64))


def test_trunc_normal_bad_args():
    with pytest.raises(ValueError, match="a < b"):
        init.trunc_normal_(tt.empty(3), a=1.0, b=-1.0)
    with pytest.raises(ValueError, match="mode"):
        init.kaiming_uniform_(tt.empty(3, 3), mode="fan_avg")
