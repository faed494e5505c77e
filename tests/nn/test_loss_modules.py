"""Issue 24's loss modules against torch.nn's, float64, every reduction: the loss and the
gradient of every float input; AdaptiveLogSoftmaxWithLoss with torch's state dict (output,
loss, log_prob, predict and every parameter gradient)."""
import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt

RNG = np.random.default_rng(0)


def _pair(value, grad):
    """(tinytensor, torch) twins of a NumPy value; floats require grad when asked."""
    return (tt.tensor(value, requires_grad=grad), torch.tensor(value, requires_grad=grad))


def _check(name, kwargs, args):
    """args: list of (array, requires_grad)."""
    pairs = [_pair(a, g) for a, g in args]
    out = getattr(nn, name)(**kwargs)(*[p[0] for p in pairs])
    tout = getattr(torch.nn, name)(**kwargs)(*[p[1] for p in pairs])
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.normal(size=tuple(tout.shape))
    out.backward(tt.tensor(g))
    tout.backward(torch.tensor(g))
    for (a, ta), (_, needs) in zip(pairs, args):
        if needs:
            np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)


def _x(*shape):
    return (RNG.normal(size=shape), True)


def _c(value):
    return (np.asarray(value), False)


SIGNS = _c(np.array([1.0, -1.0, 1.0, -1.0]))
CASES = [
    ("NLLLoss", dict(ignore_index=1), [(np.log(RNG.dirichlet(np.ones(3), 4)), True), _c([0, 1, 2, 2])]),
    ("MarginRankingLoss", dict(margin=0.2), [_x(4), _x(4), SIGNS]),
    ("HingeEmbeddingLoss", dict(margin=0.5), [_x(4), SIGNS]),
    ("CosineEmbeddingLoss", dict(margin=0.1), [_x(4, 3), _x(4, 3), SIGNS]),
    ("SoftMarginLoss", {}, [_x(4), SIGNS]),
    ("MultiLabelSoftMarginLoss", dict(weight=None), [_x(2, 3), _c([[1.0, 0, 1], [0, 0, 1]])]),
    ("MultiMarginLoss", dict(p=2, margin=0.7), [_x(3, 4), _c([0, 3, 1])]),
    ("MultiLabelMarginLoss", {}, [_x(2, 4), _c([[3, 0, -1, 2], [1, -1, 0, 0]])]),
    ("TripletMarginLoss", dict(margin=0.5, p=1.5, swap=True), [_x(3, 4), _x(3, 4), _x(3, 4)]),
    ("TripletMarginWithDistanceLoss", dict(margin=0.4), [_x(3, 4), _x(3, 4), _x(3, 4)]),
    ("PoissonNLLLoss", dict(log_input=True, full=True), [_x(5), _c(np.array([0.0, 1, 2, 3, 4.0]))]),
    ("GaussianNLLLoss", dict(full=True), [_x(3, 2), _x(3, 2), (RNG.uniform(0.1, 1, (3, 1)), True)]),
    ("CTCLoss", dict(blank=0, zero_infinity=True),
     [(np.log(RNG.dirichlet(np.ones(4), (5, 2))), True), _c([[1, 2, 1], [3, 3, 0]]),
      _c([5, 5]), _c([3, 2])]),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, kwargs, args", CASES, ids=[c[0] for c in CASES])
def test_loss_module_matches_torch(name, kwargs, args, reduction):
    _check(name, dict(kwargs, reduction=reduction), args)


def test_loss_modules_keep_weights_as_buffers():
    w = tt.tensor([1.0, 2.0, 0.5])
    for m in (nn.NLLLoss(weight=w), nn.MultiMarginLoss(weight=w), nn.MultiLabelSoftMarginLoss(weight=w)):
        assert list(m.state_dict()) == ["weight"]
    with pytest.raises(ValueError, match="reduction"):
        nn.SoftMarginLoss(reduction="avg")


def test_adaptive_log_softmax_matches_torch():
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2.0, head_bias=True).double()
    ours = nn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2.0, head_bias=True).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.normal(size=(5, 6))
    target = [0, 4, 11, 2, 8]
    out = ours(tt.tensor(x), tt.tensor(target))
    tout = theirs(torch.tensor(x), torch.tensor(target))
    np.testing.assert_allclose(out.output.detach().numpy(), tout.output.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.loss.item(), tout.loss.item(), rtol=1e-12)
    out.loss.backward()
    tout.loss.backward()
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ours.log_prob(tt.tensor(x)).detach().numpy(),
                               theirs.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    np.testing.assert_array_equal(ours.predict(tt.tensor(x)).numpy(),
                                  theirs.predict(torch.tensor(x)).numpy())


@pytest.mark.parametrize("out_features, bias, kw", [((), False, {}), ((3,), True, dict(label_smoothing=0.1)),
                                                     ((), True, dict(ignore_index=1, reduction="sum"))])
def test_linear_cross_entropy_loss_module_matches_torch(out_features, bias, kw):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 5))
    target = rng.integers(0, 6, (4,) + out_features)
    theirs = torch.nn.LinearCrossEntropyLoss(5, 6, out_features=out_features, bias=bias,
                                             dtype=torch.float64, **kw)
    ours = nn.LinearCrossEntropyLoss(5, 6, out_features=out_features, bias=bias, dtype=tt.float64, **kw)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    X, Xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lo, lt = ours(X, tt.tensor(target)), theirs(Xt, torch.tensor(target))
    lo.backward(), lt.backward()
    np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-12)
    np.testing.assert_allclose(X.grad.numpy(), Xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ours.linear.weight.grad.numpy(), theirs.linear.weight.grad.numpy(),
                               rtol=1e-10, atol=1e-14)
    assert ours.extra_repr() == theirs.extra_repr()
