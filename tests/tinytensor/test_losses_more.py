"""binary_cross_entropy, kl_div, l1/smooth_l1/huber losses, cosine_similarity and normalize
against torch.nn.functional in float64: values, gradients and double backward."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import case
from tinytensor.testing import compare_with_torch
from .oracle import F, check, with_squares

RNG = np.random.default_rng(0)
P = RNG.uniform(0.05, 0.95, (4, 3))          # probabilities for BCE
T01 = RNG.uniform(0.0, 1.0, (4, 3))          # soft targets
HARD = (RNG.uniform(size=(4, 3)) > 0.5).astype(np.float64)
LOGP = np.log(RNG.dirichlet(np.ones(5), size=3))   # log-probabilities (3, 5)
Q = RNG.dirichlet(np.ones(5), size=3)
D = np.array([[-2.5, -1.0, -0.3, 0.0], [0.2, 0.99, 1.01, 3.0]])  # both sides of beta/delta
Z = np.zeros((2, 4))
W = RNG.uniform(0.5, 2.0, (4, 3))

CASES = [
    case("bce", lambda m, p, t: F(m).binary_cross_entropy(p, t), [P, T01]),
    case("bce_hard_sum", lambda m, p: F(m).binary_cross_entropy(p, m.tensor(HARD), reduction="sum"), [P]),
    case("bce_weight_none", lambda m, p, t: F(m).binary_cross_entropy(p, t, weight=m.tensor(W),
                                                                        reduction="none"), [P, T01]),
    case("bce_weight_broadcast", lambda m, p, t: F(m).binary_cross_entropy(
        p, t, weight=m.tensor([0.5, 1.0, 2.0], dtype=m.float64)), [P, T01]),
    case("bce_0d", lambda m, p, t: F(m).binary_cross_entropy(p, t), [np.array(0.3), np.array(0.8)]),
    case("kl_div_batchmean", lambda m, x, t: F(m).kl_div(x, t, reduction="batchmean"), [LOGP, Q]),
    case("kl_div_mean", lambda m, x, t: F(m).kl_div(x, t), [LOGP, Q]),
    case("kl_div_sum", lambda m, x, t: F(m).kl_div(x, t, reduction="sum"), [LOGP, Q]),
    case("kl_div_none", lambda m, x, t: F(m).kl_div(x, t, reduction="none"), [LOGP, Q]),
    case("kl_div_log_target", lambda m, x, t: F(m).kl_div(x, t, reduction="batchmean", log_target=True),
         [LOGP, np.log(Q)]),
    case("kl_div_log_target_none", lambda m, x, t: F(m).kl_div(x, t, reduction="none", log_target=True),
         [LOGP, np.log(Q)]),
    case("kl_div_zero_target", lambda m, x: F(m).kl_div(x, m.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]] * 3,
                                                                     dtype=m.float64), reduction="sum"),
         [LOGP]),
    case("kl_div_broadcast", lambda m, x, t: F(m).kl_div(x, t, reduction="sum"), [LOGP, Q[:1]]),
    case("kl_div_0d_batchmean", lambda m, x, t: F(m).kl_div(x, t, reduction="batchmean"),
         [np.array(-0.7), np.array(0.4)]),
    case("l1", lambda m, x, t: F(m).l1_loss(x, t), [(3, 4), (3, 4)]),
    case("l1_sum", lambda m, x, t: F(m).l1_loss(x, t, reduction="sum"), [(3, 4), (3, 4)]),
    case("l1_none", lambda m, x, t: F(m).l1_loss(x, t, reduction="none"), [(3, 4), (3, 4)]),
    case("smooth_l1", lambda m, d, z: F(m).smooth_l1_loss(d, z), [D, Z]),
    case("smooth_l1_beta", lambda m, d, z: F(m).smooth_l1_loss(d, z, beta=0.5, reduction="none"), [D, Z]),
    case("smooth_l1_beta0", lambda m, d, z: F(m).smooth_l1_loss(d, z, beta=0.0, reduction="sum"), [D, Z]),
    case("smooth_l1_random", lambda m, x, t: F(m).smooth_l1_loss(x, t, beta=2.0), [(3, 4), (3, 4)]),
    case("huber", lambda m, d, z: F(m).huber_loss(d, z), [D, Z]),
    case("huber_delta", lambda m, d, z: F(m).huber_loss(d, z, delta=0.5, reduction="none"), [D, Z]),
    case("huber_delta_sum", lambda m, x, t: F(m).huber_loss(x, t, delta=2.0, reduction="sum"),
         [(3, 4), (3, 4)]),
    case("cosine_similarity", lambda m, a, b: F(m).cosine_similarity(a, b), [(3, 4), (3, 4)]),
    case("cosine_similarity_dim", lambda m, a, b: F(m).cosine_similarity(a, b, dim=-1), [(2, 3, 4), (3, 4)]),
    case("cosine_similarity_dim0", lambda m, a, b: F(m).cosine_similarity(a, b, dim=0), [(5,), (5,)]),
    case("cosine_similarity_eps", lambda m, a, b: F(m).cosine_similarity(a * 1e-3, b, eps=0.01),
         [(3, 4), (3, 4)]),
    case("normalize", lambda m, x: F(m).normalize(x), [(3, 4)]),
    case("normalize_p1_dim0", lambda m, x: F(m).normalize(x, p=1.0, dim=0), [(3, 4)]),
    case("normalize_p3_last", lambda m, x: F(m).normalize(x, p=3, dim=-1), [(2, 3, 4)]),
    case("normalize_eps", lambda m, x: F(m).normalize(x * 1e-3, eps=0.01), [(3, 4)]),
]


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")  # torch's kl_div
@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_against_torch(fn, inputs, kw):
    check(fn, inputs, **kw)


def test_bce_clamps_log_at_minus_100():
    p, t = [0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]
    ours = tt.functional.binary_cross_entropy(tt.tensor(p, dtype=tt.float64), tt.tensor(t, dtype=tt.float64),
                                              reduction="none")
    ref = torch.nn.functional.binary_cross_entropy(torch.tensor(p, dtype=torch.float64),
                                                   torch.tensor(t, dtype=torch.float64), reduction="none")
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_float32():
    check(lambda m, p, t: F(m).binary_cross_entropy(p, t), [P, T01], dtype="float32")
    check(lambda m, x, t: F(m).kl_div(x, t, reduction="batchmean"), [LOGP, Q], dtype="float32")
    check(lambda m, a, b: F(m).cosine_similarity(a, b), [(3, 4), (3, 4)], dtype="float32")


@pytest.mark.parametrize("call,match", [
    (lambda F: F.binary_cross_entropy(tt.tensor([0.5, 1.5]), tt.tensor([0.0, 1.0])),
     r"binary_cross_entropy: all elements of input should be between 0 and 1, got 1\.5"),
    (lambda F: F.binary_cross_entropy(tt.tensor([0.5]), tt.tensor([0.0, 1.0])),
     r"binary_cross_entropy: input shape \(1,\) and target shape \(2,\) differ"),
    (lambda F: F.kl_div(tt.tensor([0.5]), tt.tensor([0.5]), reduction="avg"),
     r"kl_div: reduction must be one of .*'batchmean'.*got 'avg'"),
    (lambda F: F.smooth_l1_loss(tt.tensor([0.5]), tt.tensor([0.5]), beta=-1.0),
     r"smooth_l1_loss: beta must be >= 0, got -1\.0"),
    (lambda F: F.huber_loss(tt.tensor([0.5]), tt.tensor([0.5]), delta=0.0),
     r"huber_loss: delta must be > 0, got 0\.0"),
    (lambda F: F.l1_loss(tt.tensor([0.5]), tt.tensor([0.5]), reduction="avg"),
     r"l1_loss: reduction must be one of"),
])
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call(tt.functional)


def test_zero_vectors_first_order():
    """A zero row: cosine_similarity is 0 and normalize gives zeros, with torch's gradients
    (the norm's gradient at 0 is taken as 0). Second order is singular there (torch: nan)."""
    x = RNG.standard_normal((3, 4))
    x[1] = 0.0
    for fn, inputs in [(lambda m, a, b: F(m).cosine_similarity(a, b), [x, (3, 4)]),
                       (lambda m, a: F(m).normalize(a), [x])]:
        compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), inputs)
