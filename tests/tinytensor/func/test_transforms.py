"""tt.func's transforms against torch.func on small functions, float64: values, argnums,
has_aux, pytrees, chunk_size, and their errors."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.func as ttf

RNG = np.random.default_rng(0)


def pair(*shape):
    a = RNG.standard_normal(shape)
    return tt.tensor(a), torch.tensor(a)


def close(a, e, tol=1e-10):
    if isinstance(e, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(e), (a, e)
        for x, y in zip(a, e):
            close(x, y, tol)
        return
    if isinstance(e, dict):
        assert set(a) == set(e)
        for k in e:
            close(a[k], e[k], tol)
        return
    assert tuple(a.shape) == tuple(e.shape), (a.shape, e.shape)
    np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=tol, atol=tol)


def f_tt(x, y):
    return (x.sin() * y).sum() + (x * x * y.exp()).sum()


def f_torch(x, y):
    return (x.sin() * y).sum() + (x * x * y.exp()).sum()


def test_grad_argnums_and_value():
    (x, tx), (y, ty) = pair(3), pair(3)
    for argnums in (0, 1, (0, 1), (1, 0), -1):
        close(ttf.grad(f_tt, argnums=argnums)(x, y), torch.func.grad(f_torch, argnums=argnums)(tx, ty))
    g, v = ttf.grad_and_value(f_tt)(x, y)
    eg, ev = torch.func.grad_and_value(f_torch)(tx, ty)
    close(g, eg)
    close(v, ev)
    assert not g.requires_grad and not v.requires_grad   # top level: plain tensors, like torch


def test_grad_has_aux_and_pytree_inputs():
    (x, tx), (y, ty) = pair(2, 3), pair(3)

    def f(p, scale):
        out = (p["w"] @ p["b"][0]).tanh().sum() * scale
        return out, {"norm": p["w"].sum()}
    tf = f
    g, aux = ttf.grad(f, has_aux=True)({"w": x, "b": [y]}, 2.0)
    eg, eaux = torch.func.grad(tf, has_aux=True)({"w": tx, "b": [ty]}, 2.0)
    close(g, eg)
    close(aux, eaux)


def test_vjp_many_outputs_called_twice():
    (x, tx), (y, ty) = pair(4), pair(4)
    out, fn = ttf.vjp(lambda a, b: (a * b, (a.exp(), b.sum())), x, y)
    eout, efn = torch.func.vjp(lambda a, b: (a * b, (a.exp(), b.sum())), tx, ty)
    close(out, eout)
    for _ in range(2):
        (u, tu), (v, tv), (w, tw) = pair(4), pair(4), pair()
        close(fn((u, (v, w))), efn((tu, (tv, tw))))


def test_jvp_has_aux_and_pytree():
    (x, tx), (v, tv) = pair(3), pair(3)
    out, t, aux = ttf.jvp(lambda p: ({"y": p[0].sin() * p[1]}, p[0].sum()), ([x, x],), ([v, v],),
                          has_aux=True)
    e = torch.func.jvp(lambda p: ({"y": p[0].sin() * p[1]}, p[0].sum()), ([tx, tx],), ([tv, tv],),
                       has_aux=True)
    close(out, e[0])
    close(t, e[1])
    close(aux, e[2])


@pytest.mark.parametrize("chunk_size", [None, 1, 2])
def test_jacobians(chunk_size):
    (x, tx), (y, ty) = pair(3), pair(2, 3)

    def g(a, b):
        return {"m": b @ a.sin(), "s": (a * a).sum()}
    for argnums in (0, (0, 1)):
        e = torch.func.jacrev(g, argnums=argnums)(tx, ty)
        close(ttf.jacrev(g, argnums=argnums, chunk_size=chunk_size)(x, y), e)
        close(ttf.jacfwd(g, argnums=argnums, chunk_size=chunk_size)(x, y), e)


def test_hessian_hvp_linearize():
    (x, tx), (y, ty), (v, tv) = pair(3), pair(3), pair(3)
    close(ttf.hessian(f_tt, argnums=(0, 1))(x, y), torch.func.hessian(f_torch, argnums=(0, 1))(tx, ty))
    val, hv = ttf.hvp(f_tt, (x, y), (v, v))
    eval_, ehv = torch.autograd.functional.hvp(f_torch, (tx, ty), (tv, tv))
    close(val, eval_)
    close(hv, ehv)
    out, fn = ttf.linearize(lambda a: a.sin() * a, x)
    eout, efn = torch.func.linearize(lambda a: a.sin() * a, tx)
    close(out, eout)
    close(fn(v), efn(tv))


def test_errors_name_the_function():
    x, _ = pair(3)

    def nonscalar(a):
        return a * 2
    with pytest.raises(RuntimeError, match=r"grad\(.*nonscalar\).*scalar.*shape \(3,\)"):
        ttf.grad(nonscalar)(x)
    with pytest.raises(RuntimeError, match=r"argnums=3 but only 1"):
        ttf.grad(lambda a: a.sum(), argnums=3)(x)
    with pytest.raises(RuntimeError, match=r"jvp\(.*\): primal 0 has shape \(3,\) but its tangent"):
        ttf.jvp(lambda a: a, (x,), (tt.ones(2, dtype=tt.float64),))
    with pytest.raises(RuntimeError, match=r"floating-point"):
        ttf.grad(lambda a: a.sum())(tt.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"chunk_size"):
        ttf.jacrev(nonscalar, chunk_size=0)
    out, fn = ttf.vjp(nonscalar, x)
    with pytest.raises(RuntimeError, match=r"cotangent 0 must be a Tensor of shape \(3,\)"):
        fn(tt.ones(4, dtype=tt.float64))
