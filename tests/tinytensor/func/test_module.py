"""functional_call and stack_module_state on nn.Linear and a small MLP, against torch.func;
per-sample gradients by a loop of grad over functional_call."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.func as ttf
from tinytensor import nn

from .test_transforms import close


def twins(seed=0):
    """A tinytensor MLP and its torch twin with the same float64 weights."""
    gen = np.random.default_rng(seed)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    with tt.no_grad():
        for (n, p), (tn, tp) in zip(m.named_parameters(), tm.named_parameters()):
            a = gen.standard_normal(tuple(p.shape))
            p.copy_(tt.tensor(a))
            tp.data.copy_(torch.tensor(a))
            assert n == tn
    return m, tm


def test_functional_call_matches_and_is_stateless():
    m, tm = twins()
    gen = np.random.default_rng(1)
    new = {n: gen.standard_normal(tuple(p.shape)) for n, p in m.named_parameters()}
    x = gen.standard_normal((5, 3))
    before = {n: p.detach().numpy().copy() for n, p in m.named_parameters()}
    got = ttf.functional_call(m, {n: tt.tensor(a) for n, a in new.items()}, (tt.tensor(x),))
    exp = torch.func.functional_call(tm, {n: torch.tensor(a) for n, a in new.items()}, (torch.tensor(x),))
    close(got, exp)
    for n, p in m.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), before[n])

    def boom(*a):
        raise ValueError("boom")
    m[1].forward = boom
    with pytest.raises(ValueError, match="boom"):
        ttf.functional_call(m, {"0.weight": tt.zeros(4, 3, dtype=tt.float64)}, (tt.tensor(x),))
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), before["0.weight"])


def test_functional_call_errors_and_ties():
    m, _ = twins()
    with pytest.raises(RuntimeError, match=r"unexpected key\(s\) \['nope'\]"):
        ttf.functional_call(m, {"nope": tt.zeros(1)}, (tt.zeros(1, 3, dtype=tt.float64),))
    with pytest.raises(RuntimeError, match=r"strict=True\): missing key\(s\)"):
        ttf.functional_call(m, {"0.weight": m[0].weight}, (tt.zeros(1, 3, dtype=tt.float64),), strict=True)
    tied = nn.Sequential(nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False)).double()
    tied[1].weight = tied[0].weight
    x = tt.tensor(np.eye(3))
    w = tt.tensor(2 * np.eye(3))
    np.testing.assert_allclose(ttf.functional_call(tied, {"0.weight": w}, (x,)).detach().numpy(), 4 * np.eye(3))
    untied = ttf.functional_call(tied, {"0.weight": w}, (x,), tie_weights=False).detach().numpy()
    np.testing.assert_allclose(untied, (2 * np.eye(3)) @ tied[0].weight.detach().numpy().T)


def test_per_sample_grads_and_stack_module_state():
    m, tm = twins()
    params = {n: p.detach() for n, p in m.named_parameters()}
    tparams = {n: p.detach() for n, p in tm.named_parameters()}
    gen = np.random.default_rng(2)
    xs, ys = gen.standard_normal((3, 3)), gen.standard_normal((3, 2))

    def loss(F, mod, p, x, y):
        return ((F.functional_call(mod, p, (x[None],)) - y) ** 2).sum()
    for i in range(3):
        g = ttf.grad(lambda p: loss(ttf, m, p, tt.tensor(xs[i]), tt.tensor(ys[i])))(params)
        e = torch.func.grad(lambda p: loss(torch.func, tm, p, torch.tensor(xs[i]), torch.tensor(ys[i])))(tparams)
        close(g, e)
    m2, tm2 = twins(5)
    p, b = ttf.stack_module_state([m, m2])
    tp, tb = torch.func.stack_module_state([tm, tm2])
    close(p, tp)
    assert all(v.requires_grad and v.is_leaf for v in p.values()) and b == tb == {}
    with pytest.raises(RuntimeError, match="model 1 has parameters"):
        ttf.stack_module_state([m, nn.Sequential(nn.Linear(3, 4))])
