"""BCELoss, KLDivLoss, L1Loss, SmoothL1Loss, HuberLoss and CosineSimilarity against torch.nn
in float64: value and the gradients of both inputs, and the repr's options."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

RNG = np.random.default_rng(0)
X = RNG.uniform(-3, 3, (4, 5))
Y = RNG.uniform(-3, 3, (4, 5))
P = RNG.uniform(0.05, 0.95, (4, 5))
T = RNG.uniform(0, 1, (4, 5))
LOGP = np.log(RNG.dirichlet(np.ones(5), size=4))
Q = RNG.dirichlet(np.ones(5), size=4)
W = RNG.uniform(0.5, 2, (5,))

CASES = [
    ("L1Loss", {}, X, Y), ("L1Loss", dict(reduction="sum"), X, Y),
    ("SmoothL1Loss", dict(beta=0.5), X, Y), ("SmoothL1Loss", dict(reduction="none", beta=2.0), X, Y),
    ("HuberLoss", dict(delta=0.7), X, Y), ("HuberLoss", dict(reduction="sum"), X, Y),
    ("BCELoss", {}, P, T), ("BCELoss", dict(weight=W, reduction="none"), P, T),
    ("KLDivLoss", dict(reduction="batchmean"), LOGP, Q),
    ("KLDivLoss", dict(reduction="sum", log_target=True), LOGP, np.log(Q)),
    ("CosineSimilarity", dict(dim=0), X, Y), ("CosineSimilarity", dict(dim=-1, eps=1e-3), X, Y),
]


@pytest.mark.parametrize("name,kw,a,b", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_against_torch(name, kw, a, b):
    okw = {k: (tt.tensor(v) if k == "weight" else v) for k, v in kw.items()}
    tkw = {k: (torch.tensor(v) if k == "weight" else v) for k, v in kw.items()}
    ours, theirs = getattr(nn, name)(**okw), getattr(torch.nn, name)(**tkw)
    at, bt = tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)
    ar, br = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = ours(at, bt), theirs(ar, br)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.standard_normal(ref.shape)
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(at.grad.numpy(), ar.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(bt.grad.numpy(), br.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_bce_weight_is_a_buffer():
    loss = nn.BCELoss(weight=[1.0, 2.0])
    assert [name for name, _ in loss.named_buffers()] == ["weight"]


def test_repr_and_errors():
    assert repr(nn.KLDivLoss(reduction="batchmean")) == "KLDivLoss(reduction='batchmean', log_target=False)"
    assert repr(nn.CosineSimilarity(dim=2)) == "CosineSimilarity(dim=2, eps=1e-08)"
    with pytest.raises(ValueError, match="HuberLoss: reduction must be one of"):
        nn.HuberLoss(reduction="avg")
    with pytest.raises(ValueError, match="KLDivLoss: reduction must be one of"):
        nn.KLDivLoss(reduction="avg")
