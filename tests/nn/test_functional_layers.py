"""nn modules of issue 24's functions against their torch.nn twins: the same constructor
arguments give the same repr, parameters and state-dict keys; with torch's state dict
copied in, the same outputs and parameter gradients (float64), in train and eval mode
where the module has a mode."""
import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt

RNG = np.random.default_rng(0)


def _copy_state(ours, theirs):
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def _compare(ours, theirs, inputs, train=True):
    ours.train(train)
    theirs.train(train)
    theirs.double()
    ours.double()
    _copy_state(ours, theirs)
    tt_in = [tt.tensor(a, requires_grad=True) for a in inputs]
    th_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, tout = ours(*tt_in), theirs(*th_in)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.normal(size=tout.shape)
    out.backward(tt.tensor(g))
    tout.backward(torch.tensor(g))
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12)
    for a, ta in zip(tt_in, th_in):
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-10, atol=1e-12)


DETERMINISTIC = [
    ("GLU", (0,), [(4, 3)]),
    ("PReLU", (3, 0.1), [(2, 3, 4)]),
    ("PReLU", (), [(2, 3)]),
    ("Hardshrink", (0.3,), [(3, 4)]),
    ("Softshrink", (), [(3, 4)]),
    ("Tanhshrink", (), [(3, 4)]),
    ("Threshold", (0.1, 20.0), [(3, 4)]),
    ("PixelShuffle", (2,), [(1, 8, 2, 3)]),
    ("PixelUnshuffle", (2,), [(1, 2, 4, 2)]),
    ("ChannelShuffle", (2,), [(1, 4, 2, 2)]),
    ("UpsamplingNearest2d", dict(scale_factor=2), [(1, 2, 2, 3)]),
    ("UpsamplingBilinear2d", dict(size=(3, 5)), [(1, 2, 2, 3)]),
    ("LPPool1d", (2, 3, 2), [(1, 2, 7)]),
    ("LPPool2d", (1.5, 2), [(1, 2, 4, 4)]),
    ("LPPool3d", (2, 2), [(1, 1, 2, 4, 4)]),
    ("Bilinear", (3, 4, 2), [(5, 3), (5, 4)]),
    ("Bilinear", (3, 4, 2, False), [(3,), (4,)]),
    ("PairwiseDistance", (1.0,), [(3, 4), (3, 4)]),
    ("RReLU", (0.1, 0.3), [(3, 4)]),          # compared in eval mode: the mean slope
    ("Dropout2d", (0.5,), [(2, 3, 2, 2)]),    # eval: identity
    ("Dropout1d", (0.5,), [(2, 3, 2)]),
    ("Dropout3d", (0.5,), [(1, 2, 2, 2, 2)]),
    ("AlphaDropout", (0.2,), [(3, 4)]),
    ("FeatureAlphaDropout", (0.2,), [(2, 3, 4)]),
]


@pytest.mark.parametrize("name, args, shapes", DETERMINISTIC,
                         ids=[f"{n}{i}" for i, (n, _, _) in enumerate(DETERMINISTIC)])
def test_module_matches_torch(name, args, shapes):
    make = (lambda cls: cls(**args)) if isinstance(args, dict) else (lambda cls: cls(*args))
    ours, theirs = make(getattr(nn, name)), make(getattr(torch.nn, name))
    assert repr(ours).split("  #")[0] == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    inputs = [RNG.normal(size=s) + (0.5 if name.startswith("LPPool") else 0.0) for s in shapes]
    if name.startswith("LPPool"):
        inputs = [np.abs(a) for a in inputs]
    train = name not in ("RReLU",) and "Dropout" not in name
    _compare(ours, theirs, inputs, train=train)


def test_embedding_bag_module_matches_torch():
    theirs = torch.nn.EmbeddingBag(6, 3, mode="max", padding_idx=0)
    ours = nn.EmbeddingBag(6, 3, mode="max", padding_idx=0)
    assert repr(ours).split("  #")[0] == repr(theirs)
    theirs.double()
    ours.double()
    _copy_state(ours, theirs)
    ids, off = [1, 0, 3, 3, 5, 2], [0, 2, 4]
    out = ours(tt.tensor(ids), tt.tensor(off))
    tout = theirs(torch.tensor(ids), torch.tensor(off))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)


def test_fractional_max_pool_module_with_fixed_samples_matches_torch():
    u = RNG.uniform(size=(1, 2, 2))
    x = RNG.normal(size=(1, 2, 7, 7))
    ours = nn.FractionalMaxPool2d(2, output_size=(3, 4), _random_samples=tt.tensor(u))
    theirs = torch.nn.FractionalMaxPool2d(2, output_size=(3, 4), _random_samples=torch.tensor(u))
    np.testing.assert_array_equal(ours(tt.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        nn.FractionalMaxPool3d(2, output_ratio=1.5)


def test_train_mode_modules_are_random_and_eval_is_deterministic():
    x = tt.ones(8, 16, 4)
    drop = nn.Dropout1d(0.5)
    tt.manual_seed(0)
    assert not np.array_equal(drop(x).numpy(), drop(x).numpy())
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())
    rrelu = nn.RReLU()
    y = rrelu(-x).numpy()
    assert y.std() > 0.01 and np.all((y <= -1 / 8) & (y >= -1 / 3))
