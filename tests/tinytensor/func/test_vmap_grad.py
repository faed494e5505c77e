"""Per-sample gradients with vmap(grad(...)): a shared weight (in_dims=None) gets one
gradient per example, as in torch.func; a tiny GPT's per-sample gradients equal a loop of
ordinary backwards over the examples and torch.func.vmap(grad) over a torch copy with the
same weights, in float64."""
import math
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.func import functional_call, grad, jacfwd, jacrev, jvp, vjp, vmap

T = torch.tensor


def A(a):
    return tt.tensor(np.asarray(a))


def close(a, b, tol=1e-10):
    a = a.detach().numpy() if isinstance(a, tt.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.fixture(autouse=True)
def _no_fallback():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: .*no batching rule")
        yield


def _mlp_loss(lib):
    def loss(params, x, y):
        w1, b1, w2 = params
        h = (x @ w1 + b1).tanh()
        return ((h @ w2 - y) ** 2).sum()
    return loss


def test_per_sample_gradients_of_shared_weights_match_torch_func():
    rng = np.random.default_rng(0)
    p = [rng.standard_normal(s) for s in ((3, 4), (4,), (4, 2))]
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    got = vmap(grad(_mlp_loss(tt)), in_dims=(None, 0, 0))([A(a) for a in p], A(x), A(y))
    exp = torch.func.vmap(torch.func.grad(_mlp_loss(torch)), in_dims=(None, 0, 0))(
        [T(a) for a in p], T(x), T(y))
    for g, e in zip(got, exp):
        assert g.shape == (5,) + e.shape[1:]
        close(g, e)


def test_nested_vmap_of_grad_and_grad_of_grad_under_vmap():
    rng = np.random.default_rng(4)
    w, x, y = rng.standard_normal((3, 5)), rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 5))
    loss = _mlp_loss(None)
    ins = (None, 0, 0)
    lw = lambda w, x, y: loss((w, 0.0, w.mT), x, y[..., :3])  # noqa: E731
    close(vmap(vmap(grad(lw), in_dims=ins), in_dims=ins)(A(w), A(x), A(y)),
          torch.func.vmap(torch.func.vmap(torch.func.grad(lw), in_dims=ins), in_dims=ins)(
              T(w), T(x), T(y)))
    f = lambda w, x: (x @ w).sin().sum()  # noqa: E731

    def gg(gr):
        return lambda w, x: gr(lambda w, x: gr(f)(w, x).pow(2).sum())(w, x)
    close(vmap(gg(grad), in_dims=(None, 0))(A(w), A(x[0])),
          torch.func.vmap(gg(torch.func.grad), in_dims=(None, 0))(T(w), T(x[0])))


def test_gradient_outside_vmap_sums_the_examples():
    """grad of a function that vmaps inside: the shared weight's gradient is the sum."""
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((3, 4)), rng.standard_normal((6, 3))
    def f(vm):
        return lambda w, x: vm(lambda xi: (xi @ w).sin().sum())(x).sum()
    close(grad(f(vmap))(A(w), A(x)), torch.func.grad(f(torch.func.vmap))(T(w), T(x)))


def test_vmap_of_jvp_jacobians_and_hessian_match_torch_func():
    rng = np.random.default_rng(2)
    w, x, t = rng.standard_normal((3, 4)), rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    f = lambda lib, W: (lambda v: (v @ W).sin())  # noqa: E731
    o, tan = vmap(lambda a, b: jvp(f(tt, A(w)), (a,), (b,)))(A(x), A(t))
    eo, etan = torch.func.vmap(lambda a, b: torch.func.jvp(f(torch, T(w)), (a,), (b,)))(T(x), T(t))
    close(o, eo), close(tan, etan)
    close(vmap(jacrev(f(tt, A(w))))(A(x)), torch.func.vmap(torch.func.jacrev(f(torch, T(w))))(T(x)))
    close(vmap(jacfwd(f(tt, A(w))))(A(x)), torch.func.vmap(torch.func.jacfwd(f(torch, T(w))))(T(x)))
    # a batched cotangent for an output computed outside vmap (jacrev's shape of work)
    _, fn = vjp(f(tt, A(w)), A(x[0]))
    _, efn = torch.func.vjp(f(torch, T(w)), T(x[0]))
    close(vmap(fn)(A(np.eye(4)))[0], torch.func.vmap(efn)(T(np.eye(4)))[0])


# ---------------------------------------------------------------- a tiny GPT
CFG = dict(vocab_size=13, n_positions=8, n_embd=8, n_layer=2, n_head=2, resid_pdrop=0.0,
           embd_pdrop=0.0, attn_pdrop=0.0)


def _torch_gpt_loss(p, ids):
    """GPT-2 (pre-LN, gelu_new, tied head) in torch on a parameter dict named as
    tinytensor.models.GPT's, and the next-token loss of one sequence `ids` (T,)."""
    nT, C, nh = ids.shape[0], CFG["n_embd"], CFG["n_head"]
    ln = lambda x, k: torch.nn.functional.layer_norm(x, (C,), p[k + ".weight"], p[k + ".bias"])  # noqa: E731
    lin = lambda x, k: x @ p[k + ".weight"].T + p[k + ".bias"]  # noqa: E731
    x = p["wte.weight"][ids] + p["wpe.weight"][torch.arange(nT)]                # (T, C)
    mask = torch.ones(nT, nT, dtype=torch.bool).tril()
    for i in range(CFG["n_layer"]):
        h = f"h.{i}."
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=-1)
        q, k, v = (t.reshape(nT, nh, C // nh).transpose(0, 1) for t in (q, k, v))  # (nh, T, hs)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(C // nh)
        y = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + lin(y.transpose(0, 1).reshape(nT, C), h + "attn.c_proj")
        m = lin(ln(x, h + "ln_2"), h + "mlp.c_fc")
        m = torch.nn.functional.gelu(m, approximate="tanh")
        x = x + lin(m, h + "mlp.c_proj")
    logits = ln(x, "ln_f") @ p["wte.weight"].T                                  # (T, V)
    return torch.nn.functional.cross_entropy(logits[:-1], ids[1:])


def test_gpt_per_sample_gradients_equal_a_loop_and_torch_func():
    from tinytensor.models import GPT
    tt.manual_seed(0)
    model = GPT(**CFG)
    model.eval()
    params = {k: v.detach().to(tt.float64) for k, v in model.named_parameters()}
    rng = np.random.default_rng(3)
    ids = rng.integers(0, CFG["vocab_size"], (3, 6))

    def loss(params, seq):
        out = functional_call(model, params, (seq.unsqueeze(0),), {"labels": seq.unsqueeze(0)})
        return out.loss

    got = vmap(grad(loss), in_dims=(None, 0))(params, A(ids))
    # a loop of ordinary backwards, one example at a time
    for i in range(ids.shape[0]):
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        loss(leaves, A(ids[i])).backward()
        for k, v in leaves.items():
            close(got[k][i], v.grad, tol=1e-9)
    tparams = {k: T(v.numpy()) for k, v in params.items()}
    exp = torch.func.vmap(torch.func.grad(_torch_gpt_loss), in_dims=(None, 0))(tparams, T(ids))
    for k in params:
        assert got[k].shape == (3,) + tuple(params[k].shape)
        close(got[k], exp[k], tol=1e-9)


def test_vmap_of_jvp_through_a_weight_that_requires_grad():
    """The weight is lifted into the batch (it requires grad): its product keeps one GEMM
    (SharedMatmul) and pushes tangents of the input and of the weight."""
    rng = np.random.default_rng(5)
    w, x, t = rng.standard_normal((3, 5)), rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2, 3))
    tw = tt.tensor(w, requires_grad=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no jvp rule")
        o, tan = vmap(lambda a, v: jvp(lambda a: (a @ tw).sin(), (a,), (v,)))(A(x), A(t))
        o2, tan2 = vmap(lambda a: jvp(lambda m: (a @ m).sin(), (tw,), (A(np.ones((3, 5))),)))(A(x))
    f = lambda W: (lambda a, v: torch.func.jvp(lambda a: (a @ W).sin(), (a,), (v,)))  # noqa: E731
    eo, etan = torch.func.vmap(f(T(w)))(T(x), T(t))
    close(o, eo), close(tan, etan)
    eo2, etan2 = torch.func.vmap(lambda a: torch.func.jvp(lambda m: (a @ m).sin(), (T(w),), (
        torch.ones(3, 5, dtype=torch.float64),)))(T(x))
    close(o2, eo2), close(tan2, etan2)
