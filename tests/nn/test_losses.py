"""Loss modules against torch.nn in float64: loss value and gradient of the input
(and of class weights held as buffers, which do not require grad)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

RNG = np.random.default_rng(0)


def _check(tt_loss, torch_loss, x, target, tt_target=None, torch_target=None):
    xt = tt.tensor(x, requires_grad=True)
    xr = torch.tensor(x, requires_grad=True)
    out = tt_loss(xt, tt.tensor(target) if tt_target is None else tt_target)
    ref = torch_loss(xr, torch.tensor(target) if torch_target is None else torch_target)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.standard_normal(ref.shape)
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10, atol=1e-12)


def _ce_case(shape, **kw):
    x = RNG.standard_normal(shape) * 3
    c = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    target = RNG.integers(0, c, size=tshape)
    if "ignore_index" in kw and target.size:
        target.reshape(-1)[::3] = kw["ignore_index"]
    w = kw.pop("weight", None)
    tw = None if w is None else tt.tensor(w)
    rw = None if w is None else torch.tensor(w)
    return x, target, nn.CrossEntropyLoss(weight=tw, **kw), torch.nn.CrossEntropyLoss(weight=rw, **kw)


W5 = np.array([0.2, 1.0, 2.0, 0.5, 1.5])

CE_CASES = [
    ((8, 5), {}),
    ((8, 5), dict(reduction="sum")),
    ((8, 5), dict(reduction="none")),
    ((8, 5), dict(weight=W5)),
    ((8, 5), dict(weight=W5, reduction="none")),
    ((8, 5), dict(ignore_index=2)),
    ((8, 5), dict(ignore_index=-100, label_smoothing=0.1)),
    ((8, 5), dict(weight=W5, ignore_index=1, label_smoothing=0.2)),
    ((8, 5), dict(weight=W5, ignore_index=0, label_smoothing=0.3, reduction="sum")),
    ((3, 5, 4), dict(label_smoothing=0.1)),          # (N, C, d) as for per-token logits
    ((2, 5, 3, 2), dict(weight=W5, reduction="none")),
    ((5,), {}),                                        # unbatched
]


@pytest.mark.parametrize("shape,kw", CE_CASES, ids=[f"{s}-{k}" for s, k in CE_CASES])
def test_cross_entropy(shape, kw):
    x, target, ours, theirs = _ce_case(shape, **kw)
    _check(ours, theirs, x, target)


@pytest.mark.parametrize("kw", [{}, dict(label_smoothing=0.25), dict(weight=W5, reduction="sum")])
def test_cross_entropy_probability_targets(kw):
    x = RNG.standard_normal((6, 5))
    p = RNG.random((6, 5))
    p /= p.sum(1, keepdims=True)
    w = kw.pop("weight", None)
    ours = nn.CrossEntropyLoss(weight=None if w is None else tt.tensor(w), **kw)
    theirs = torch.nn.CrossEntropyLoss(weight=None if w is None else torch.tensor(w), **kw)
    _check(ours, theirs, x, p)


def test_cross_entropy_all_ignored_is_nan_with_zero_grad():
    x = RNG.standard_normal((3, 4))
    t = np.full(3, -100)
    _check(nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), x, t)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse(reduction):
    x, y = RNG.standard_normal((4, 3, 2)), RNG.standard_normal((4, 3, 2))
    _check(nn.MSELoss(reduction), torch.nn.MSELoss(reduction=reduction), x, y)


BCE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weight=RNG.random((6, 4))),
    dict(weight=RNG.random(4), pos_weight=np.array([0.5, 1.0, 2.0, 4.0])),
    dict(pos_weight=np.array([3.0, 0.2, 1.0, 1.0]), reduction="none"),
]


@pytest.mark.parametrize("kw", BCE_CASES, ids=[str(sorted(k)) + k.get("reduction", "") for k in BCE_CASES])
def test_bce_with_logits(kw):
    x = RNG.standard_normal((6, 4)) * 4
    x[0, 0] = 0.0  # the kink of a naive relu/abs formula
    x[1, 1] = 60.0  # saturated: a naive log(sigmoid(x)) gives -inf here
    y = RNG.integers(0, 2, (6, 4)).astype(np.float64)
    y[2] = RNG.random(4)  # soft labels
    ours = nn.BCEWithLogitsLoss(**{k: tt.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    theirs = torch.nn.BCEWithLogitsLoss(**{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                           for k, v in kw.items()})
    _check(ours, theirs, x, y)


def test_weights_are_buffers_that_move_with_the_module():
    loss = nn.CrossEntropyLoss(weight=tt.tensor([1.0, 2.0, 3.0]))
    assert [n for n, _ in loss.named_buffers()] == ["weight"]
    assert list(loss.state_dict()) == ["weight"]
    loss.to(tt.float64)
    assert loss.weight.dtype == tt.float64
    bce = nn.BCEWithLogitsLoss(pos_weight=[2.0, 1.0])  # a plain list is accepted
    assert isinstance(bce.pos_weight, tt.Tensor) and bce.weight is None
    assert "pos_weight" in bce.state_dict()


def test_loss_inside_a_model_is_recorded_under_its_path():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(4, 3)
            self.loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

        def forward(self, x, y):
            return self.loss_fn(self.head(x), y)

    net = Net()
    with tt.record() as tape:
        net(tt.randn(2, 4), tt.tensor([0, 2]))
    scopes = {n.scope for n in tape}
    assert "loss_fn" in scopes and "head" in scopes


@pytest.mark.parametrize("make,err,match", [
    (lambda: nn.CrossEntropyLoss(reduction="avg"), ValueError, "reduction"),
    (lambda: nn.CrossEntropyLoss(label_smoothing=1.5), ValueError, "label_smoothing"),
    (lambda: nn.MSELoss(reduction="max"), ValueError, "reduction"),
    (lambda: nn.BCEWithLogitsLoss(pos_weight="x"), TypeError, "pos_weight"),
    (lambda: nn.MSELoss()(tt.zeros(2, 3), tt.zeros(3, 2)), ValueError, "shape"),
    (lambda: nn.CrossEntropyLoss()(tt.zeros(2, 3), tt.tensor([0, 3])), IndexError, "out of range"),
])
def test_errors(make, err, match):
    with pytest.raises(err, match=match):
        make()
