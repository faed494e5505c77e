"""tt.normal, tt.bernoulli and the in-place samplers (normal_, uniform_, bernoulli_,
exponential_, geometric_, cauchy_, log_normal_): their distributions, seeding and gradients.

Each distribution is checked with a fixed seed by the Kolmogorov-Smirnov distance between
100 000 samples and torch.distributions' CDF. The bound is the KS critical value at a
significance of 1e-9: a correct sampler exceeds it once in a billion seeds, so a numerical
library change of the stream cannot make the test flake, while a wrong parameter (a mean
off by 0.05 standard deviations, a rate off by 5 %) gives a distance several times it.
"""
import math

import numpy as np
import pytest
import torch
from torch import distributions as D

import tinytensor as tt
from tests.tinytensor.random_replay import eager_and_compiled_draws

N = 100_000
KS_BOUND = math.sqrt(-math.log(1e-9 / 2) / (2 * N))   # about 0.0103


def ks_distance(samples, cdf):
    x = np.sort(samples.astype(np.float64))
    c = cdf(torch.from_numpy(x)).numpy()
    k = np.arange(1, len(x) + 1) / len(x)
    return max(np.max(k - c), np.max(c - (k - 1 / len(x))))


CONTINUOUS = {
    "normal_": (lambda x: x.normal_(1.5, 2.0), D.Normal(1.5, 2.0).cdf),
    "uniform_": (lambda x: x.uniform_(-1.0, 3.0), D.Uniform(-1.0, 3.0).cdf),
    "exponential_": (lambda x: x.exponential_(2.5), D.Exponential(2.5).cdf),
    "cauchy_": (lambda x: x.cauchy_(-1.0, 0.5), D.Cauchy(-1.0, 0.5).cdf),
    "log_normal_": (lambda x: x.log_normal_(0.5, 0.75), D.LogNormal(0.5, 0.75).cdf),
    "normal": (lambda x: tt.normal(1.5, 2.0, size=x.shape, dtype=x.dtype), D.Normal(1.5, 2.0).cdf),
    "normal_tensors": (lambda x: tt.normal(tt.full(x.shape, 1.5, dtype=x.dtype), 2.0),
                       D.Normal(1.5, 2.0).cdf),
}


@pytest.mark.parametrize("name", list(CONTINUOUS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_continuous_distributions(name, dtype):
    draw, cdf = CONTINUOUS[name]
    tt.manual_seed(1234)
    x = tt.zeros(N, dtype=getattr(tt, dtype))
    y = draw(x)
    assert y.dtype == x.dtype and y.shape == (N,)
    assert ks_distance(y.numpy(), cdf) < KS_BOUND


def test_a_wrong_parameter_fails_the_bound():
    """The test above can fail: a mean off by 0.05 standard deviations is caught."""
    tt.manual_seed(1234)
    y = tt.zeros(N, dtype=tt.float64).normal_(1.5 + 0.1, 2.0)
    assert ks_distance(y.numpy(), D.Normal(1.5, 2.0).cdf) > 1.5 * KS_BOUND


@pytest.mark.parametrize("p", [0.2, 0.7])
def test_geometric_counts_trials_to_the_first_success(p):
    tt.manual_seed(7)
    y = tt.zeros(N, dtype=tt.float64).geometric_(p).numpy()
    assert y.min() >= 1 and np.all(y == np.floor(y))
    # the empirical CDF at each integer k against 1 - (1 - p)^k (DKW: the same bound)
    k = np.arange(1, 60)
    empirical = np.searchsorted(np.sort(y), k, side="right") / N
    assert np.max(np.abs(empirical - (1 - (1 - p) ** k))) < KS_BOUND


@pytest.mark.parametrize("make", [
    lambda: tt.bernoulli(tt.full((N,), 0.3)),
    lambda: tt.bernoulli(tt.zeros(N), 0.3),
    lambda: tt.zeros(N, dtype=tt.int64).bernoulli_(0.3),
    lambda: tt.zeros(N).bernoulli_(tt.full((N,), 0.3)),
])
def test_bernoulli_frequency(make):
    tt.manual_seed(3)
    y = make().numpy()
    assert set(np.unique(y)) <= {0, 1}
    # 6.1 standard errors: exceeded with probability 1e-9
    assert abs(y.mean() - 0.3) < 6.1 * math.sqrt(0.3 * 0.7 / N)


def test_bernoulli_follows_each_entrys_probability():
    tt.manual_seed(5)
    probs = tt.tensor([0.0, 1.0, 0.0, 1.0])
    y = tt.bernoulli(probs.expand(1000, 4))
    assert y.numpy().tolist() == probs.expand(1000, 4).numpy().tolist()


SAMPLERS = [lambda x: x.normal_(), lambda x: x.uniform_(), lambda x: x.exponential_(),
            lambda x: x.geometric_(0.5), lambda x: x.cauchy_(), lambda x: x.log_normal_(),
            lambda x: x.bernoulli_(), lambda x: tt.bernoulli(x.uniform_()),
            lambda x: tt.normal(x, 1.0)]


@pytest.mark.parametrize("draw", SAMPLERS)
def test_same_seed_same_numbers(draw):
    def run(seed):
        tt.manual_seed(seed)
        return draw(tt.zeros(64, dtype=tt.float64)).numpy().copy()
    a, b, c = run(11), run(11), run(12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_normal_of_tensors_is_differentiable_in_mean_and_std():
    """normal(mean, std) = mean + std * z: d/dmean = 1, d/dstd = z, as torch's."""
    tt.manual_seed(0)
    mean = tt.tensor([0.5, -1.0, 2.0], dtype=tt.float64, requires_grad=True)
    std = tt.tensor([1.0, 2.0, 0.5], dtype=tt.float64, requires_grad=True)
    y = tt.normal(mean, std)
    gm, gs = tt.grad(y.sum(), [mean, std])
    np.testing.assert_allclose(gm.numpy(), 1.0)
    np.testing.assert_allclose(gs.numpy(), ((y - mean) / std).detach().numpy(), rtol=1e-12)


def test_normal_broadcasts_mean_and_std():
    tt.manual_seed(0)
    assert tt.normal(tt.zeros(2, 1), tt.ones(3)).shape == (2, 3)
    assert tt.normal(2.0, tt.ones(4, 1)).shape == (4, 1)


def test_compiled_draws_repeat_eager_draws():
    """Each call of a compiled step draws anew, the numbers eager draws from the same seed."""
    step = lambda m: tt.normal(m, 0.5) * 2 + tt.bernoulli(tt.full(m.shape, 0.5))  # noqa: E731
    eager, replay = eager_and_compiled_draws(step, tt.arange(6.0), seed=21)
    assert not np.array_equal(eager[0], eager[1])
    for e, r in zip(eager, replay):
        np.testing.assert_allclose(r, e, rtol=1e-6)


@pytest.mark.parametrize("call, err, match", [
    (lambda: tt.zeros(2).normal_(0, -1), ValueError, r"normal_: expects std >= 0.0"),
    (lambda: tt.normal(0.0, -1.0, size=(2,)), ValueError, r"normal: expects std >= 0.0"),
    (lambda: tt.normal(0.0, 1.0), TypeError, r"normal: with a number mean and std"),
    (lambda: tt.zeros(2).uniform_(2, 1), ValueError, r"uniform_: expects to return a \[from, to\)"),
    (lambda: tt.zeros(2).exponential_(0), ValueError, r"exponential_: expects lambda > 0.0"),
    (lambda: tt.zeros(2).geometric_(1.5), ValueError, r"geometric_: expects p to be in \(0, 1\)"),
    (lambda: tt.zeros(2).cauchy_(0, 0), ValueError, r"cauchy_: expects sigma > 0.0"),
    (lambda: tt.zeros(2).log_normal_(0, 0), ValueError, r"log_normal_: expects std > 0.0"),
    (lambda: tt.zeros(2).bernoulli_(1.5), ValueError, r"bernoulli_: expects 0 <= p <= 1"),
    (lambda: tt.zeros(2, dtype=tt.int64).normal_(), TypeError, r"normal_: needs a floating dtype"),
    (lambda: tt.zeros(2, requires_grad=True).normal_(), RuntimeError, r"normal_: a leaf tensor"),
])
def test_errors_name_the_op(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.gpu
@pytest.mark.parametrize("draw", SAMPLERS)
def test_cuda_same_seed_same_numbers(draw):
    def run(seed):
        tt.manual_seed(seed)
        return draw(tt.zeros(64, dtype=tt.float64, device="cuda")).numpy().copy()
    np.testing.assert_array_equal(run(11), run(11))
    assert not np.array_equal(run(11), run(12))


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_cuda_continuous_distributions(name):
    draw, cdf = CONTINUOUS[name]
    tt.manual_seed(1234)
    y = draw(tt.zeros(N, dtype=tt.float32, device="cuda"))
    assert y.device.type == "cuda"
    assert ks_distance(y.numpy(), cdf) < KS_BOUND
