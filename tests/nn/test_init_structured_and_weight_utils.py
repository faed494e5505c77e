"""nn.init's structured initialisers and nn.utils (parameters <-> vector, the clipping
halves, weight_norm and spectral_norm in hook and parametrization form, parametrize)
against torch in float64: values where they are deterministic, properties where they are
random, and gradients through the normalized weights."""
import math
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

RNG = np.random.default_rng(5)


# ---------------------------------------------------------------------- init
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (4, 2)])
def test_eye_as_torch(shape):
    np.testing.assert_array_equal(nn.init.eye_(tt.zeros(*shape)).numpy(),
                                  torch.nn.init.eye_(torch.zeros(*shape)).numpy())


@pytest.mark.parametrize("shape,groups", [((4, 3, 3), 1), ((6, 2, 3, 3), 2), ((2, 4, 3, 2, 5), 1),
                                          ((4, 1, 2, 2), 4)])
def test_dirac_as_torch(shape, groups):
    np.testing.assert_array_equal(nn.init.dirac_(tt.ones(*shape), groups).numpy(),
                                  torch.nn.init.dirac_(torch.ones(*shape), groups).numpy())


def test_structured_init_errors():
    with pytest.raises(ValueError, match="eye_.*2 dimensions.*\\(3,\\)"):
        nn.init.eye_(tt.zeros(3))
    with pytest.raises(ValueError, match="dirac_: dim 0 \\(3\\) must be divisible by groups \\(2\\)"):
        nn.init.dirac_(tt.zeros(3, 2, 3), 2)
    with pytest.raises(ValueError, match="sparse_.*2 dimensions"):
        nn.init.sparse_(tt.zeros(3, 2, 2), 0.5)


@pytest.mark.parametrize("shape,gain", [((4, 4), 1.0), ((3, 6), 2.0), ((6, 2, 2), 0.5)])
def test_orthogonal_is_orthogonal(shape, gain):
    tt.manual_seed(0)
    w = nn.init.orthogonal_(tt.empty(*shape, dtype=tt.float64), gain).numpy()
    m = w.reshape(shape[0], -1)
    small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m  # (semi-)orthogonal rows or columns
    np.testing.assert_allclose(small, gain ** 2 * np.eye(small.shape[0]), atol=1e-12)
    tt.manual_seed(0)
    np.testing.assert_array_equal(nn.init.orthogonal_(tt.empty(*shape, dtype=tt.float64), gain).numpy(), w)


def test_sparse_zeros_per_column_and_spread():
    tt.manual_seed(1)
    w = nn.init.sparse_(tt.empty(40, 300, dtype=tt.float64), 0.25, std=0.5).numpy()
    assert ((w == 0).sum(axis=0) == math.ceil(0.25 * 40)).all()
    nonzero = w[w != 0]
    assert abs(nonzero.std() - 0.5) < 0.03 and abs(nonzero.mean()) < 0.03
    assert len({tuple(np.flatnonzero(w[:, j] == 0)) for j in range(20)}) > 15  # rows differ


# ---------------------------------------------------------------------- vectors, clipping
def test_parameters_vector_round_trip_as_torch():
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal(4)]
    ours = [nn.Parameter(tt.tensor(a)) for a in arrays]
    theirs = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    vec = nn.utils.parameters_to_vector(ours)
    np.testing.assert_array_equal(vec.detach().numpy(),
                                  torch.nn.utils.parameters_to_vector(theirs).detach().numpy())
    (vec * tt.arange(10.0, dtype=tt.float64)).sum().backward()  # differentiable
    np.testing.assert_array_equal(ours[1].grad.numpy(), np.arange(6.0, 10.0))
    new = RNG.standard_normal(10)
    nn.utils.vector_to_parameters(tt.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.raises(ValueError, match="does not hold the 10 entries"):
        nn.utils.vector_to_parameters(tt.zeros(9), ours)
    with pytest.raises(TypeError, match="expected vec to be a Tensor"):
        nn.utils.vector_to_parameters(new, ours)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, "inf"])
def test_total_norm_and_clip_with_norm_as_torch(norm_type):
    grads = [RNG.standard_normal((3, 2)), RNG.standard_normal(5)]
    ours = [nn.Parameter(tt.zeros(*g.shape, dtype=tt.float64)) for g in grads]
    theirs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads]
    for p, q, g in zip(ours, theirs, grads):
        p.grad, q.grad = tt.tensor(g), torch.tensor(g)
    t_ours = nn.utils.get_total_norm([p.grad for p in ours], norm_type)
    t_theirs = torch.nn.utils.get_total_norm([q.grad for q in theirs], norm_type)
    np.testing.assert_allclose(float(t_ours), float(t_theirs), rtol=1e-12)
    nn.utils.clip_grads_with_norm_(ours, 0.5, t_ours)
    torch.nn.utils.clip_grads_with_norm_(theirs, 0.5, t_theirs)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)
    assert nn.utils.clip_grad_norm_ is nn.clip_grad_norm_


# ---------------------------------------------------------------------- weight / spectral norm
def _twins(kind):
    if kind == "linear":
        t = torch.nn.Linear(3, 4, dtype=torch.float64)
        o = nn.Linear(3, 4, dtype=tt.float64)
    else:
        t = torch.nn.Conv2d(2, 3, 2, dtype=torch.float64)
        o = nn.Conv2d(2, 3, 2, dtype=tt.float64)
    o.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    return o, t


def _compare(ours, theirs, x, train):
    ours.train(train), theirs.train(train)
    outs = []
    for m, lib in ((ours, tt), (theirs, torch)):
        xi = lib.tensor(x, requires_grad=True)
        y = m(xi)
        (y * lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        outs.append([y.detach().numpy(), xi.grad.numpy()]
                    + [p.grad.numpy() for _, p in m.named_parameters()])
    names = [k for k, _ in ours.named_parameters()]
    assert names == [k for k, _ in theirs.named_parameters()]
    for got, want in zip(*outs):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def _input(kind):
    return RNG.standard_normal((2, 3) if kind == "linear" else (1, 2, 3, 3))


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_as_torch(kind, dim):
    ours, theirs = _twins(kind)
    P, tP = nn.utils.parametrizations, torch.nn.utils.parametrizations
    P.weight_norm(ours, dim=dim), tP.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert type(ours).__name__ == type(theirs).__name__ == f"Parametrized{'Linear' if kind == 'linear' else 'Conv2d'}"
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-12)
    _compare(ours, theirs, _input(kind), True)


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_weight_norm_hook_form_as_torch(kind):
    ours, theirs = _twins(kind)
    with pytest.warns(FutureWarning):
        nn.utils.weight_norm(ours)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _compare(ours, theirs, _input(kind), True)
    nn.utils.remove_weight_norm(ours), torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == ["bias", "weight"] and isinstance(ours.weight, nn.Parameter)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(ours)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_parametrization_as_torch(kind, train):
    ours, theirs = _twins(kind)
    nn.utils.parametrizations.spectral_norm(ours)
    torch.nn.utils.parametrizations.spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    # torch's random start vectors, loaded: from there the power iteration is deterministic
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    _compare(ours, theirs, _input(kind), train)
    for k, v in theirs.state_dict().items():  # the buffers moved alike
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-9, err_msg=k)


@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_hook_form_as_torch(train):
    ours, theirs = _twins("conv")
    nn.utils.spectral_norm(ours, n_power_iterations=2)
    torch.nn.utils.spectral_norm(theirs, n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    _compare(ours, theirs, _input("conv"), train)
    nn.utils.remove_spectral_norm(ours), torch.nn.utils.remove_spectral_norm(theirs)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-9)


def test_spectral_norm_estimates_the_largest_singular_value():
    m = nn.Linear(5, 7, dtype=tt.float64)
    nn.utils.parametrizations.spectral_norm(m)
    for _ in range(30):
        w = m.weight  # each training access runs one more power step
    assert abs(np.linalg.svd(w.detach().numpy(), compute_uv=False)[0] - 1.0) < 1e-8


# ---------------------------------------------------------------------- parametrize
class _Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT


class _Double(nn.Module):
    def forward(self, x):
        return 2 * x

    def right_inverse(self, x):
        return x / 2


def test_register_and_remove_parametrization_as_torch():
    P = nn.utils.parametrize
    m = nn.Linear(3, 3, dtype=tt.float64)
    w0 = m.weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", _Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    w = m.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    P.register_parametrization(m, "weight", _Double())
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w)
    m(tt.ones(2, 3, dtype=tt.float64)).sum().backward()  # the gradient reaches the original
    orig = m.parametrizations.weight.original
    assert orig.grad is not None and np.allclose(orig.grad.numpy(), np.triu(orig.grad.numpy()))
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    with pytest.raises(RuntimeError, match="_Symmetric does not implement right_inverse"):
        m.weight = tt.tensor(4 * np.eye(3))
    w2 = m.weight.detach().numpy()
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and list(m.state_dict()) == ["bias", "weight"]  # as torch
    np.testing.assert_allclose(m.weight.detach().numpy(), w2)
    P.register_parametrization(m, "weight", _Double())
    m.weight = tt.tensor(4 * np.eye(3))  # through _Double.right_inverse
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), 2 * np.eye(3))
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * np.eye(3))
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")
    with pytest.raises(ValueError, match="no_such"):
        P.register_parametrization(m, "no_such", _Double())
    assert w0.shape == (3, 3)


def test_skip_init_and_lazy_submodules():
    m = nn.utils.skip_init(nn.Linear, 3, 2)
    assert tuple(m.weight.shape) == (2, 3)
    with pytest.raises(RuntimeError, match="must support a 'device' argument"):
        nn.utils.skip_init(nn.ReLU)
    assert nn.utils.parametrize.register_parametrization is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nn.utils.nope


# ---------------------------------------------------------------------- fusion, memory format
def _bn_twin(n):
    theirs = torch.nn.BatchNorm2d(n, dtype=torch.float64)
    with torch.no_grad():
        for t in (theirs.running_mean, theirs.weight, theirs.bias):
            t.copy_(torch.tensor(RNG.standard_normal(n)))
        theirs.running_var.copy_(torch.tensor(RNG.uniform(0.5, 2.0, n)))
    ours = nn.Module()  # any module with torch's batch-norm attribute names
    for name in ("running_mean", "running_var"):
        ours.register_buffer(name, tt.tensor(getattr(theirs, name).numpy()))
    ours.weight = nn.Parameter(tt.tensor(theirs.weight.detach().numpy()))
    ours.bias = nn.Parameter(tt.tensor(theirs.bias.detach().numpy()))
    ours.eps = theirs.eps
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("transpose", [False, True])
def test_fuse_conv_bn_as_torch(transpose):
    cls, tcls = ("ConvTranspose2d", "ConvTranspose2d") if transpose else ("Conv2d", "Conv2d")
    theirs = getattr(torch.nn, tcls)(2, 3, 2, dtype=torch.float64).eval()
    ours = getattr(nn, cls)(2, 3, 2, dtype=tt.float64).eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    bn, tbn = _bn_twin(3)
    fused = nn.utils.fuse_conv_bn_eval(ours, bn, transpose=transpose)
    x = RNG.standard_normal((1, 2, 4, 4))
    want = tbn(theirs(torch.tensor(x))).detach().numpy()
    np.testing.assert_allclose(fused(tt.tensor(x)).detach().numpy(), want, rtol=1e-10, atol=1e-12)
    tw = torch.nn.utils.fuse_conv_bn_eval(theirs, tbn, transpose=transpose)
    np.testing.assert_allclose(fused.weight.detach().numpy(), tw.weight.detach().numpy(), rtol=1e-12)
    assert ours.weight is not fused.weight  # a copy; the original layer is untouched
    with pytest.raises(AssertionError, match="eval"):
        nn.utils.fuse_conv_bn_eval(ours.train(), bn)


def test_fuse_linear_bn_as_torch():
    theirs = torch.nn.Linear(4, 3, dtype=torch.float64).eval()
    ours = nn.Linear(4, 3, dtype=tt.float64).eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    bn, tbn = _bn_twin(3)
    fused = nn.utils.fuse_linear_bn_eval(ours, bn)
    tfused = torch.nn.utils.fuse_linear_bn_eval(theirs, tbn)
    for k, v in tfused.state_dict().items():
        np.testing.assert_allclose(fused.state_dict()[k].numpy(), v.numpy(), rtol=1e-12)


def test_convert_conv_weight_memory_format_keeps_values_and_parameter():
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Conv2d(3, 2, 1))
    w = model[0].weight
    before = w.detach().numpy().copy()
    nn.utils.convert_conv2d_weight_memory_format(model, tt.channels_last)
    assert model[0].weight is w
    np.testing.assert_array_equal(w.detach().numpy(), before)
    strides = np.asarray(w.data.strides) // w.data.itemsize
    assert strides[1] == 1  # channels last: the channel stride is the smallest


ORTH = [("matrix_exp", (4, 4)), ("cayley", (4, 4)), ("householder", (5, 3)), (None, (3, 5)),
        ("matrix_exp", (5, 3)), ("cayley", (3, 5)), (None, (4, 4))]


@pytest.mark.skipif(not hasattr(getattr(tt, "linalg", None), "matrix_exp"),
                    reason="needs tt.linalg (issue 23's namespace, branch l23)")
@pytest.mark.parametrize("orth_map,shape", ORTH, ids=[f"{m}-{s}" for m, s in ORTH])
def test_orthogonal_parametrization_as_torch(orth_map, shape):
    theirs = torch.nn.Linear(shape[1], shape[0], dtype=torch.float64)
    ours = nn.Linear(shape[1], shape[0], dtype=tt.float64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orth_map)
    nn.utils.parametrizations.orthogonal(ours, orthogonal_map=orth_map)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    w = ours.weight.detach().numpy()
    small = w @ w.T if shape[0] <= shape[1] else w.T @ w
    np.testing.assert_allclose(small, np.eye(min(shape)), atol=1e-12)
    # torch's base completes a non-square weight with random columns: load it, then all agree
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    with torch.no_grad():  # move off the starting point so the map's gradient is not trivial
        theirs.parametrizations.weight.original.add_(
            torch.tensor(0.1 * RNG.standard_normal(shape)))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    _compare(ours, theirs, RNG.standard_normal((2, shape[1])), True)
