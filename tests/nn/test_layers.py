"""Layers against torch.nn with copied weights, in float64: outputs, input gradients and
every parameter's gradient; default initializations; Dropout's train/eval behavior."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

RNG = np.random.default_rng(0)


def _compare(ours, theirs, x, rtol=1e-10, atol=1e-12):
    """Copy theirs' weights into ours, run both on x in float64, compare everything."""
    theirs = theirs.double()
    ours.to(tt.float64)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    integer = x.dtype.kind in "iu"
    xt = tt.tensor(x, requires_grad=not integer)
    xr = torch.tensor(x, requires_grad=not integer)
    out, ref = ours(xt), theirs(xr)
    assert out.dtype == tt.float64 and tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(tuple(ref.shape))
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    if not integer:
        np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=rtol, atol=atol)
    ours_p, theirs_p = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(ours_p) == list(theirs_p)
    for name, p in theirs_p.items():
        assert ours_p[name].grad is not None, name
        np.testing.assert_allclose(ours_p[name].grad.numpy(), p.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


def _x(*shape):
    return RNG.standard_normal(shape)


CASES = [
    ("linear", lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), _x(4, 5)),
    ("linear 3d", lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), _x(2, 4, 5)),
    ("linear no bias", lambda: nn.Linear(5, 3, bias=False), lambda: torch.nn.Linear(5, 3, bias=False), _x(2, 5)),
    ("linear 1d input", lambda: nn.Linear(5, 2), lambda: torch.nn.Linear(5, 2), _x(5)),
    ("embedding", lambda: nn.Embedding(7, 4), lambda: torch.nn.Embedding(7, 4),
     np.array([[0, 3, 3, 6], [1, 1, 2, 5]])),
    ("embedding padding_idx", lambda: nn.Embedding(7, 4, padding_idx=2),
     lambda: torch.nn.Embedding(7, 4, padding_idx=2), np.array([[0, 2, 3, 2], [2, 1, 6, 5]])),
    ("embedding negative padding_idx", lambda: nn.Embedding(7, 4, padding_idx=-1),
     lambda: torch.nn.Embedding(7, 4, padding_idx=-1), np.array([6, 0, 6, 1])),
    ("layernorm", lambda: nn.LayerNorm(6), lambda: torch.nn.LayerNorm(6), _x(3, 4, 6) * 5 + 2),
    ("layernorm 2 dims eps", lambda: nn.LayerNorm((4, 6), eps=1e-3),
     lambda: torch.nn.LayerNorm((4, 6), eps=1e-3), _x(3, 4, 6)),
    ("layernorm no affine", lambda: nn.LayerNorm(6, elementwise_affine=False),
     lambda: torch.nn.LayerNorm(6, elementwise_affine=False), _x(5, 6)),
    ("layernorm no bias", lambda: nn.LayerNorm(6, bias=False), lambda: torch.nn.LayerNorm(6, bias=False),
     _x(2, 3, 6)),
    ("rmsnorm", lambda: nn.RMSNorm(6), lambda: torch.nn.RMSNorm(6), _x(3, 4, 6)),
    ("rmsnorm eps 2 dims", lambda: nn.RMSNorm((4, 6), eps=1e-5), lambda: torch.nn.RMSNorm((4, 6), eps=1e-5),
     _x(3, 4, 6) * 0.01),
    ("rmsnorm no affine", lambda: nn.RMSNorm(6, elementwise_affine=False),
     lambda: torch.nn.RMSNorm(6, elementwise_affine=False), _x(4, 6)),
    ("relu", nn.ReLU, torch.nn.ReLU, _x(4, 5)),
    ("gelu", nn.GELU, torch.nn.GELU, _x(4, 5) * 3),
    ("gelu tanh", lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), _x(4, 5) * 3),
    ("silu", nn.SiLU, torch.nn.SiLU, _x(4, 5) * 3),
    ("softsign", nn.Softsign, torch.nn.Softsign, _x(4, 5) * 3),
    ("identity", nn.Identity, torch.nn.Identity, _x(2, 3)),
    ("dropout eval", lambda: nn.Dropout(0.5).eval(), lambda: torch.nn.Dropout(0.5).eval(), _x(4, 5)),
    ("mlp", lambda: nn.Sequential(nn.Linear(5, 8), nn.GELU("tanh"), nn.LayerNorm(8), nn.Linear(8, 2)),
     lambda: torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU("tanh"), torch.nn.LayerNorm(8),
                                 torch.nn.Linear(8, 2)), _x(3, 5)),
]


@pytest.mark.parametrize("name,ours,theirs,x", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, ours, theirs, x):
    torch.manual_seed(0)
    _compare(ours(), theirs(), x)


def test_embedding_padding_row_is_zero_and_gets_no_gradient():
    e = nn.Embedding(5, 3, padding_idx=1)
    assert not np.any(e.weight.detach().numpy()[1])
    e(tt.tensor([1, 1, 2])).sum().backward()
    g = e.weight.grad.numpy()
    assert not np.any(g[1]) and np.all(g[2] == 1) and not np.any(g[0])


def test_default_init_statistics():
    torch.manual_seed(0)
    fan_in = 256
    ours, theirs = nn.Linear(fan_in, 512), torch.nn.Linear(fan_in, 512)
    bound = 1 / math.sqrt(fan_in)  # torch: kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in)), bias alike
    for name in ("weight", "bias"):
        w, tw = getattr(ours, name).detach().numpy(), getattr(theirs, name).detach().numpy()
        assert w.dtype == np.float32 and w.shape == tw.shape
        assert np.abs(w).max() <= bound and np.abs(tw).max() <= bound
        n = w.size
        assert abs(w.mean()) < 6 * bound / math.sqrt(3 * n)
        assert w.std() == pytest.approx(bound / math.sqrt(3), rel=6 * math.sqrt(0.2 / n))
        assert np.abs(w).max() > bound * (1 - 20 / n)  # fills the interval
    e = nn.Embedding(1000, 64).weight.detach().numpy()
    assert abs(e.mean()) < 0.01 and e.std() == pytest.approx(1.0, rel=0.01)
    ln, rms = nn.LayerNorm(8), nn.RMSNorm(8)
    assert np.all(ln.weight.detach().numpy() == 1)
    assert not np.any(ln.bias.detach().numpy()) and np.all(rms.weight.detach().numpy() == 1)


def test_layers_follow_the_seed():
    tt.manual_seed(5)
    a = nn.Linear(4, 4).weight.detach().numpy().copy()
    tt.manual_seed(5)
    b = nn.Linear(4, 4).weight.detach().numpy()
    np.testing.assert_array_equal(a, b)


def test_dtype_and_device_arguments():
    lin = nn.Linear(3, 2, dtype=tt.float64, device="cpu")
    assert lin.weight.dtype == tt.float64 and lin.bias.dtype == tt.float64
    assert nn.LayerNorm(3, dtype=tt.float16).weight.dtype == tt.float16
    assert nn.Embedding(3, 2, dtype=tt.float64).weight.dtype == tt.float64


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train(p):
    d = nn.Dropout(p)
    x = tt.tensor(RNG.random((200, 500)) + 0.5, requires_grad=True)  # no zeros of its own
    y = d(x)
    yv = y.detach().numpy()
    kept = yv != 0
    n = kept.size
    assert kept.mean() == pytest.approx(1 - p, abs=6 * math.sqrt(p * (1 - p) / n))
    np.testing.assert_allclose(yv[kept], x.detach().numpy()[kept] / (1 - p), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p), rtol=1e-6)
    # eval: the identity (the same tensor values, no scaling)
    d.eval()
    np.testing.assert_array_equal(d(x).detach().numpy(), x.detach().numpy())


def test_dropout_edges_and_train_flag_from_parent():
    x = tt.ones(10, 10)
    assert np.all(nn.Dropout(0.0)(x).numpy() == 1)
    assert not np.any(nn.Dropout(1.0)(x).numpy())
    net = nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.9))
    net.eval()
    a, b = net(x).detach().numpy(), net(x).detach().numpy()
    np.testing.assert_array_equal(a, b)
    net.train()
    assert not np.array_equal(net(x).detach().numpy(), net(x).detach().numpy())
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)


def test_dropout_is_seeded():
    x = tt.ones(50, 50)
    tt.manual_seed(1)
    a = nn.Dropout(0.5)(x).numpy().copy()
    tt.manual_seed(1)
    np.testing.assert_array_equal(nn.Dropout(0.5)(x).numpy(), a)


def test_reprs():
    assert repr(nn.Linear(3, 2)) == "Linear(in_features=3, out_features=2, bias=True)  # 8 params"
    assert "padding_idx=0" in repr(nn.Embedding(4, 2, padding_idx=0))
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"  # as torch
    assert "(3,), eps=1e-05" in repr(nn.LayerNorm(3))


def test_linear_shape_error_names_the_module():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 2)

        def forward(self, x):
            return self.proj(x)
    with pytest.raises(Exception) as e:
        Net()(tt.ones(3, 5))
    assert "proj" in str(e.value) and "(3, 5)" in str(e.value)


def test_embedding_refuses_negative_ids_as_torch_does():
    emb = nn.Embedding(5, 2)
    with pytest.raises(IndexError, match="embedding: index -1 is negative"):
        emb(tt.tensor([[0, -1]]))
