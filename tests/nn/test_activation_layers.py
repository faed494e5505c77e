"""The activation modules of nn/activations.py against torch.nn in float64: outputs, input
gradients, inplace=True, and their printed form."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

X = np.random.default_rng(0).standard_normal((4, 5)) * 4
X[0, :4] = [0.0, 3.0, -3.0, 6.0]  # the corners

CASES = [
    ("ELU", (), {}), ("ELU", (0.5,), {}), ("SELU", (), {}), ("CELU", (), {"alpha": 2.0}),
    ("Mish", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}), ("Hardtanh", (), {}),
    ("Hardtanh", (-2.0, 2.5), {}), ("ReLU6", (), {}), ("LogSigmoid", (), {}), ("Softmin", (1,), {}),
    ("Softmin", (), {"dim": 0}),
]


def _run(module, x, inplace_input=False):
    t = tt if isinstance(module, nn.Module) else torch
    leaf = t.tensor(x, dtype=t.float64, requires_grad=True)
    h = leaf * 1.0 if inplace_input else leaf  # in place needs a non-leaf, in both libraries
    out = module(h)
    g = np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
    out.backward(t.tensor(g, dtype=t.float64))
    return out.detach().numpy(), leaf.grad.numpy()


@pytest.mark.parametrize("name,args,kw", CASES, ids=[f"{c[0]}{c[1]}{c[2]}" for c in CASES])
def test_matches_torch(name, args, kw):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    for got, want in zip(_run(ours, X, False), _run(theirs, X, False)):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("name", ["ELU", "SELU", "CELU", "Mish", "Hardswish", "Hardsigmoid", "Hardtanh", "ReLU6"])
def test_inplace_matches_torch(name):
    ours, theirs = getattr(nn, name)(inplace=True), getattr(torch.nn, name)(inplace=True)
    assert repr(ours) == repr(theirs)
    for got, want in zip(_run(ours, X, True), _run(theirs, X, True)):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)


def test_printed_arguments_like_torch():
    pairs = [(nn.ELU(0.5, True), torch.nn.ELU(0.5, True)), (nn.Hardtanh(-2, 2, True), torch.nn.Hardtanh(-2, 2, True)),
             (nn.Softmin(), torch.nn.Softmin()), (nn.CELU(2.0, True), torch.nn.CELU(2.0, True)),
             (nn.Hardswish(True), torch.nn.Hardswish(True)), (nn.ReLU6(True), torch.nn.ReLU6(True))]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)


def test_hardtanh_needs_max_above_min():
    with pytest.raises(ValueError, match=r"Hardtanh: max_val \(1\) must be greater than min_val \(2\)"):
        nn.Hardtanh(2, 1)


def test_softmin_without_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = nn.Softmin()(tt.tensor(X))
    np.testing.assert_allclose(out.numpy(), torch.nn.functional.softmin(torch.tensor(X), 1).numpy(), rtol=1e-7)
