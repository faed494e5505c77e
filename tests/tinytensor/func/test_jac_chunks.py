"""jacfwd / jacrev as vmap over a one-hot basis (func/_basis.py): chunk_size None, 1 and 3
give the same Jacobians (and torch.func's), and the batching cases that this leans on:
an unbatched primal with a batched tangent, batched cotangents for several outputs."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.func as ttf

from .test_transforms import close, pair


def g_tt(a, b):   # a multiplies its own tangent: the primal is used unbatched and batched
    return {"m": (b @ a).tanh() * a[:2], "s": (a * a).sum(), "z": b.sum() * 0}


def g_torch(a, b):
    return {"m": (b @ a).tanh() * a[:2], "s": (a * a).sum(), "z": b.sum() * 0}


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_chunk_sizes_give_identical_jacobians(jac):
    (x, tx), (y, ty) = pair(4), pair(2, 4)
    e = torch.func.jacrev(g_torch, argnums=(0, 1))(tx, ty)
    got = [getattr(ttf, jac)(g_tt, argnums=(0, 1), chunk_size=c)(x, y) for c in (None, 1, 3)]
    for j in got:
        close(j, e)
    for j in got[1:]:   # identical, not only close
        for k in ("m", "s", "z"):
            for a, b in zip(j[k], got[0][k]):
                assert np.array_equal(a.numpy(), b.numpy())


def test_jacfwd_has_aux_and_randomness_through_vmap():
    x, tx = pair(5)
    j, aux = ttf.jacfwd(lambda a: (a.sin() * a, a.cos().sum()), has_aux=True, chunk_size=2)(x)
    ej, eaux = torch.func.jacfwd(lambda a: (a.sin() * a, a.cos().sum()), has_aux=True)(tx)
    close(j, ej)
    close(aux, eaux)
    with pytest.raises(RuntimeError, match="random"):   # randomness="error", as torch.func
        ttf.jacfwd(lambda a: a * tt.randn(5, dtype=tt.float64))(x)
    same = ttf.jacfwd(lambda a: a * tt.randn(5, dtype=tt.float64), randomness="same")(x)
    assert np.allclose(same.numpy(), np.diag(np.diag(same.numpy())))   # one draw for all columns


def test_vmap_of_jvp_with_an_unbatched_primal_and_vmap_of_vjp_with_two_outputs():
    (x, tx), (w, tw) = pair(3), pair(3, 3)
    basis = np.eye(3)
    t = ttf.vmap(lambda v: ttf.jvp(lambda a: (w @ a).tanh() * a, (x,), (v,))[1])(tt.tensor(basis))
    et = torch.func.vmap(lambda v: torch.func.jvp(lambda a: (tw @ a).tanh() * a, (tx,), (v,))[1])(
        torch.tensor(basis))
    close(t, et)
    _, fn = ttf.vjp(lambda a: (a.sin(), a * a), x)
    _, efn = torch.func.vjp(lambda a: (a.sin(), a * a), tx)
    u = np.random.default_rng(1).standard_normal((2, 3, 3))
    close(ttf.vmap(fn)((tt.tensor(u[0]), tt.tensor(u[1]))),
          torch.func.vmap(efn)((torch.tensor(u[0]), torch.tensor(u[1]))))
