"""The torch.nn module classes of issue 24 that wrap existing ops (activations, Flatten,
Fold, the *Pad family, Upsample*, the containers) against their torch twins in float64:
printed form, outputs and input gradients, inplace=True, and state-dict keys."""
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

from .test_activation_layers import _run  # the same forward and backward of a module

RNG = np.random.default_rng(24)


def _same(ours, theirs, x, inplace_input=False):
    assert repr(ours).split("  # ")[0] == repr(theirs)  # ours adds a parameter count
    for got, want in zip(_run(ours, x, inplace_input), _run(theirs, x, inplace_input)):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)


X2 = RNG.standard_normal((3, 4)) * 3
X4 = RNG.standard_normal((2, 3, 4, 5))
ACTIVATIONS = [
    ("Tanh", (), {}, X2), ("Sigmoid", (), {}, X2), ("Softmax", (1,), {}, X2),
    ("Softmax", (), {"dim": 0}, X2), ("LogSoftmax", (-1,), {}, X4), ("Softmax2d", (), {}, X4),
    ("Softmax2d", (), {}, X4[0]), ("LeakyReLU", (), {}, X2), ("LeakyReLU", (0.2,), {}, X2),
    ("Softplus", (), {}, X2), ("Softplus", (2.0, 1.0), {}, X2), ("ReLU", (), {}, X2),
    ("SiLU", (), {}, X2), ("GELU", (), {"approximate": "tanh"}, X2), ("Identity", (3,), {"a": 1}, X2),
]


@pytest.mark.parametrize("name,args,kw,x", ACTIVATIONS,
                         ids=[f"{c[0]}{c[1]}{c[2]}{c[3].ndim}" for c in ACTIVATIONS])
def test_activation_matches_torch(name, args, kw, x):
    _same(getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw), x)


@pytest.mark.parametrize("name,args", [("ReLU", ()), ("LeakyReLU", (0.1,)), ("SiLU", ())])
def test_inplace_flag_matches_torch(name, args):
    ours, theirs = getattr(nn, name)(*args, inplace=True), getattr(torch.nn, name)(*args, inplace=True)
    _same(ours, theirs, X2, inplace_input=True)
    h = tt.tensor(X2)
    assert ours(h) is h  # the input itself holds the result
    leaf = tt.tensor(X2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):  # as torch: a leaf that requires grad
        ours(leaf)
    with pytest.raises(RuntimeError, match="leaf"):
        theirs(torch.tensor(X2, requires_grad=True))


def test_dropout_inplace_as_torch():
    x = tt.tensor(X2)
    out = nn.Dropout(0.5, inplace=True)(x)
    assert out is x and repr(nn.Dropout(0.5, inplace=True)) == repr(torch.nn.Dropout(0.5, inplace=True))
    assert set(np.round(x.numpy()[x.numpy() != 0] / X2[x.numpy() != 0], 12)) == {2.0}  # survivors x2
    leaf = tt.tensor(X2, requires_grad=True)
    h = leaf * 1.0
    nn.Dropout(0.5, inplace=True)(h).sum().backward()  # the gradient follows the mask
    np.testing.assert_array_equal(leaf.grad.numpy(), np.where(h.detach().numpy() != 0, 2.0, 0.0))
    with pytest.raises(RuntimeError, match="leaf"):
        nn.Dropout(0.5, inplace=True)(leaf)
    y = tt.tensor(X2)
    assert nn.Dropout(0.5, inplace=True).eval()(y) is y and np.array_equal(y.numpy(), X2)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (2, 3, 2, 2)])
def test_implicit_softmax_dim_as_torch(fn, shape):
    x = RNG.standard_normal(shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = getattr(F, fn)(tt.tensor(x))
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert "Implicit dimension choice" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller, as torch's does
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(torch.nn.functional, fn)(torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_softmax_module_without_dim_warns_at_the_call():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.Softmax()(tt.tensor(X2))
    assert caught[0].filename == __file__


SHAPES = [
    ("Flatten", (), X4), ("Flatten", (0, 2), X4), ("Unflatten", (1, (3, 1)), X4),
    ("Unfold", ((2, 3),), X4), ("Unfold", (2, 1, 1, 2), X4),
    ("Fold", ((3, 4), (2, 2)), RNG.standard_normal((2, 8, 6))),
    ("ZeroPad1d", (2,), X4[0]), ("ZeroPad2d", ((1, 0, 2, 1),), X4), ("ZeroPad3d", (1,), X4),
    ("ConstantPad1d", ((1, 2), 3.5), X4[0]), ("ConstantPad2d", (1, -1.0), X4),
    ("ConstantPad3d", ((1, 0, 0, 1, 2, 0), 0.5), X4),
    ("ReflectionPad1d", (2,), X4[0]), ("ReflectionPad2d", ((1, 2, 0, 3),), X4),
    ("ReflectionPad3d", (1,), X4), ("ReplicationPad1d", ((3, 1),), X4[0]),
    ("ReplicationPad2d", (2,), X4), ("ReplicationPad3d", ((1, 0, 2, 0, 0, 1),), X4),
    ("CircularPad1d", (1,), X4[0]), ("CircularPad2d", ((1, 2, 2, 1),), X4),
    ("CircularPad3d", (1,), X4),
    ("Upsample", ((6, 7),), X4), ("Upsample", (None, 2, "bilinear"), X4),
    ("Upsample", (None, 1.5, "bilinear", True), X4), ("UpsamplingNearest2d", (None, 2), X4),
    ("UpsamplingBilinear2d", ((5, 3),), X4), ("CosineSimilarity", (), None),
]


@pytest.mark.parametrize("name,args,x", SHAPES, ids=[f"{c[0]}{c[1]}" for c in SHAPES])
def test_shape_module_matches_torch(name, args, x):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    if x is None:  # two inputs
        a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
        got = ours(tt.tensor(a), tt.tensor(b)).numpy()
        np.testing.assert_allclose(got, theirs(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-12)
        return
    _same(ours, theirs, x)


def test_pad_modules_refuse_wrong_ranks_and_tuples():
    with pytest.raises(ValueError, match="ReflectionPad2d.*3-D.*4-D.*got shape \\(5,\\)"):
        nn.ReflectionPad2d(1)(tt.zeros(5))
    with pytest.raises(ValueError, match="ZeroPad2d: padding must be an int or a tuple of 4"):
        nn.ZeroPad2d((1, 2))


# ---------------------------------------------------------------------- containers
def _names(m):
    return list(m.state_dict())


def test_parameter_list_as_torch():
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal(4)]
    ours = nn.ParameterList([tt.tensor(a) for a in arrays])
    theirs = torch.nn.ParameterList([torch.tensor(a) for a in arrays])
    ours.append(tt.ones(1))
    theirs.append(torch.ones(1))
    assert _names(ours) == list(theirs.state_dict()) == ["0", "1", "2"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours)
    assert len(ours) == 3 and len(list(ours.parameters())) == 3
    ours[1] = tt.zeros(2)
    assert tuple(ours[-2].shape) == (2,) and isinstance(ours[1], nn.Parameter)
    part = ours[1:]
    assert isinstance(part, nn.ParameterList) and len(part) == 2 and part[0] is ours[1]
    ours += [tt.zeros(3)]
    assert _names(ours)[-1] == "3"
    holder = nn.Module()
    holder.ps = ours
    assert _names(holder)[0] == "ps.0"
    with pytest.raises(IndexError):
        ours[9]


def test_parameter_dict_as_torch():
    a, b = RNG.standard_normal(3), RNG.standard_normal((2, 2))
    ours = nn.ParameterDict({"w": tt.tensor(b), "a": tt.tensor(a)})
    theirs = torch.nn.ParameterDict({"w": torch.tensor(b), "a": torch.tensor(a)})
    assert _names(ours) == list(theirs.state_dict())
    assert list(ours.keys()) == list(theirs.keys())
    ours["z"] = tt.ones(1)
    assert "z" in ours and len(ours) == 3 and isinstance(ours["z"], nn.Parameter)
    assert tuple(ours.pop("w").shape) == (2, 2) and "w" not in _names(ours)
    ours.update([("c", tt.zeros(2))])
    assert list(ours) == ["a", "z", "c"]
    with pytest.raises(KeyError, match="ParameterDict: parameter name"):
        ours["x.y"] = tt.zeros(1)
    twin = nn.ParameterDict({"a": tt.zeros(3), "z": tt.zeros(1), "c": tt.ones(2)})
    twin.load_state_dict(ours.state_dict())
    np.testing.assert_allclose(twin["a"].detach().numpy(), a)


def _lin(i):
    return nn.Linear(1, i + 1)


def test_sequence_editing_as_torch():
    ours, theirs = nn.Sequential(*[_lin(i) for i in range(4)]), torch.nn.Sequential(
        *[torch.nn.Linear(1, i + 1) for i in range(4)])
    for seq, lin in ((ours, nn.Linear), (theirs, torch.nn.Linear)):
        del seq[1]
        seq.insert(0, lin(1, 9))
        seq.append(lin(1, 7))
        seq.extend([lin(1, 8)])
        del seq[-3:-1]
        seq.insert(-1, lin(1, 6))
        seq[0] = lin(1, 5)
    assert _names(ours) == list(theirs.state_dict())
    assert [m.out_features for m in ours] == [m.out_features for m in theirs]
    assert [m.out_features for m in ours[1:3]] == [m.out_features for m in theirs[1:3]]
    assert isinstance(ours[1:3], nn.Sequential) and list(ours[1:3]._modules) == ["1", "2"]
    assert ours.pop(0).out_features == theirs.pop(0).out_features
    assert _names(ours) == list(theirs.state_dict())
    both = ours + nn.Sequential(_lin(2))
    assert [m.out_features for m in both][-1] == 3 and list(both._modules)[-1] == str(len(both) - 1)


def test_module_list_and_dict_editing_as_torch():
    ours = nn.ModuleList([_lin(0), _lin(1)])
    ours.insert(1, _lin(4))
    ours += [_lin(5)]
    del ours[0]
    assert [m.out_features for m in ours] == [5, 2, 6] and _names(ours)[0] == "0.weight"
    assert isinstance(ours[::2], nn.ModuleList) and len(ours + ours) == 6
    assert [m.out_features for m in ours + [_lin(7)]][-1] == 8  # any iterable, as torch
    with pytest.raises(ValueError, match="only objects of Sequential class"):
        nn.Sequential(_lin(0)) + [_lin(1)]
    d = nn.ModuleDict([("a", _lin(0)), ("b", _lin(1))])
    d.update({"c": _lin(2)})
    assert d.pop("a").out_features == 1 and list(d) == ["b", "c"]
    del d["b"]
    assert _names(d) == ["c.weight", "c.bias"]
    d.clear()
    assert len(d) == 0 and _names(d) == []


# ---------------------------------------------------------------------- over the rest of F
def _needs(*names):
    missing = [n for n in names if not hasattr(F, n)]
    return pytest.mark.skipif(bool(missing), reason=f"F.{', F.'.join(missing)} not on this branch "
                              "(issue 24's functional ops)")


X3 = RNG.standard_normal((2, 4, 3))
MORE = [
    ("GLU", (), X2, "glu"), ("GLU", (1,), X3, "glu"), ("Hardshrink", (), X2, "hardshrink"),
    ("Softshrink", (0.7,), X2, "softshrink"), ("Tanhshrink", (), X2, "tanhshrink"),
    ("Threshold", (0.1, 20.0), X2, "threshold"), ("PReLU", (), X3, "prelu"),
    ("PReLU", (4, 0.1), X3, "prelu"), ("RReLU", (0.1, 0.3), X2, "rrelu"),
    ("PixelShuffle", (2,), RNG.standard_normal((1, 8, 2, 3)), "pixel_shuffle"),
    ("PixelUnshuffle", (2,), RNG.standard_normal((1, 2, 4, 6)), "pixel_unshuffle"),
    ("ChannelShuffle", (2,), X4[:, :2], "channel_shuffle"),
]
for _d in ("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
    MORE.append((_d, (0.3,), X4 if _d != "Dropout1d" else X3,
                 {"Dropout1d": "dropout1d", "Dropout2d": "dropout2d", "Dropout3d": "dropout3d",
                  "AlphaDropout": "alpha_dropout", "FeatureAlphaDropout": "feature_alpha_dropout"}[_d]))


@pytest.mark.parametrize("name,args,x,fn", MORE, ids=[f"{c[0]}{c[1]}" for c in MORE])
def test_module_over_functional_matches_torch(name, args, x, fn):
    if not hasattr(F, fn):
        pytest.skip(f"F.{fn} is not on this branch (issue 24's functional ops)")
    ours, theirs = getattr(nn, name)(*args).double(), getattr(torch.nn, name)(*args).double()
    ours.eval(), theirs.eval()  # dropouts and RReLU are deterministic in eval
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _same(ours, theirs, x)
    if "Dropout" in name:  # in training whole channels (or elements) are dropped and rescaled
        out = ours.train()(tt.tensor(x)).numpy()
        assert out.shape == x.shape and not np.allclose(out, x)


@_needs("pairwise_distance", "bilinear")
def test_pairwise_distance_and_bilinear_match_torch():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    for p, keep in ((2.0, False), (1.0, True)):
        ours, theirs = nn.PairwiseDistance(p, keepdim=keep), torch.nn.PairwiseDistance(p, keepdim=keep)
        np.testing.assert_allclose(ours(tt.tensor(a), tt.tensor(b)).numpy(),
                                   theirs(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-12)
    theirs = torch.nn.Bilinear(4, 4, 2, dtype=torch.float64)
    ours = nn.Bilinear(4, 4, 2, dtype=tt.float64)
    assert repr(ours).split("  #")[0] == repr(theirs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(ours(tt.tensor(a), tt.tensor(b)).detach().numpy(),
                               theirs(torch.tensor(a), torch.tensor(b)).detach().numpy(), rtol=1e-12)


@pytest.mark.skipif(not hasattr(nn, "NLLLoss"), reason="nn.NLLLoss is on branch f24")
def test_nll_loss_module_matches_torch():
    logp = np.log(np.random.default_rng(3).dirichlet(np.ones(4), size=5))
    target = np.array([0, 3, 1, 3, -100])
    w = np.array([0.5, 1.0, 2.0, 1.5])
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"}):
        ours, theirs = nn.NLLLoss(tt.tensor(w), **kw), torch.nn.NLLLoss(torch.tensor(w), **kw)
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
        x, tx = tt.tensor(logp, requires_grad=True), torch.tensor(logp, requires_grad=True)
        got, want = ours(x, tt.tensor(target)), theirs(tx, torch.tensor(target))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        got.sum().backward(), want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def _loss_inputs(name):
    r = np.random.default_rng(11)
    a, b = r.standard_normal((4, 3)), r.standard_normal((4, 3))
    sign = np.array([1.0, -1.0, 1.0, -1.0])
    return {
        "MarginRankingLoss": ([a[:, 0], b[:, 0], sign], ()),
        "HingeEmbeddingLoss": ([a, np.sign(b)], ()),
        "CosineEmbeddingLoss": ([a, b, sign], ()),
        "SoftMarginLoss": ([a, np.sign(b)], ()),
        "MultiLabelSoftMarginLoss": ([a, (b > 0).astype(float)], ()),
        "MultiMarginLoss": ([a, np.array([0, 2, 1, 2])], ()),
        "MultiLabelMarginLoss": ([a, np.array([[2, -1, 0], [0, 1, -1], [1, -1, 2], [-1, 0, 0]])], ()),
        "TripletMarginLoss": ([a, b, r.standard_normal((4, 3))], ()),
        "TripletMarginWithDistanceLoss": ([a, b, r.standard_normal((4, 3))], ()),
        "PoissonNLLLoss": ([a, np.abs(b)], ()),
        "GaussianNLLLoss": ([a, b, np.abs(r.standard_normal((4, 3))) + 0.1], ()),
    }[name][0]


LOSSES = [("MarginRankingLoss", {"margin": 0.3}), ("HingeEmbeddingLoss", {"reduction": "sum"}),
          ("CosineEmbeddingLoss", {"margin": 0.1}), ("SoftMarginLoss", {"reduction": "none"}),
          ("MultiLabelSoftMarginLoss", {"weight": [1.0, 2.0, 0.5]}),
          ("MultiMarginLoss", {"p": 2, "margin": 0.5}), ("MultiLabelMarginLoss", {}),
          ("TripletMarginLoss", {"swap": True}), ("TripletMarginWithDistanceLoss", {"margin": 0.5}),
          ("PoissonNLLLoss", {"full": True}), ("GaussianNLLLoss", {"full": True})]
_LOSS_FN = {"MarginRankingLoss": "margin_ranking_loss", "HingeEmbeddingLoss": "hinge_embedding_loss",
            "CosineEmbeddingLoss": "cosine_embedding_loss", "SoftMarginLoss": "soft_margin_loss",
            "MultiLabelSoftMarginLoss": "multilabel_soft_margin_loss",
            "MultiMarginLoss": "multi_margin_loss", "MultiLabelMarginLoss": "multilabel_margin_loss",
            "TripletMarginLoss": "triplet_margin_loss",
            "TripletMarginWithDistanceLoss": "triplet_margin_with_distance_loss",
            "PoissonNLLLoss": "poisson_nll_loss", "GaussianNLLLoss": "gaussian_nll_loss"}


@pytest.mark.parametrize("name,kw", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_module_matches_torch(name, kw):
    if not hasattr(F, _LOSS_FN[name]):
        pytest.skip(f"F.{_LOSS_FN[name]} is not on this branch (issue 24's functional losses)")
    w = kw.pop("weight", None)
    extra = {} if w is None else {"weight": w}
    ours = getattr(nn, name)(**kw, **{k: tt.tensor(v) for k, v in extra.items()})
    theirs = getattr(torch.nn, name)(**kw, **{k: torch.tensor(v) for k, v in extra.items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    arrays = _loss_inputs(name)
    results = []
    for m, lib in ((ours, tt), (theirs, torch)):
        ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f" and i == 0) if a.dtype.kind == "f"
              else lib.tensor(a) for i, a in enumerate(arrays)]
        out = m(*ts)
        out.sum().backward()
        results.append((out.detach().numpy(), ts[0].grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
