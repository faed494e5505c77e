"""Nested transforms against torch.func (perturbation confusion: x * f'(x)-style functions),
forward-over-reverse against reverse-over-reverse, and the forward-mode engine's edges:
the double-vjp fallback, in-place ops, views, the no-grad and array backward paths."""
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.func as ttf

from .user_ops import Cube

from .test_transforms import close, pair


def test_nested_jvp_perturbation_confusion():
    (x, tx), (u, tu), (v, tv) = pair(3), pair(3), pair(3)

    def inner(F, a, t):   # a * d/dy (a * y . sin(y)) along t: the inner tangent must not leak
        return lambda z: z * F.jvp(lambda y: a * y.sin() * y, (z,), (t,))[1]
    got = ttf.jvp(lambda a: inner(ttf, a, v)(a), (x,), (u,))
    exp = torch.func.jvp(lambda a: inner(torch.func, a, tv)(a), (tx,), (tu,))
    close(got, exp)
    # third order: jvp of jvp of jvp
    f3 = lambda F, one: lambda a: F.jvp(lambda b: F.jvp(lambda c: (c.exp() * b * a).sum(0), (b,), (one,))[1],
                                       (a,), (one,))[1]
    close(ttf.jvp(f3(ttf, tt.ones_like(x)), (x,), (u,)), torch.func.jvp(f3(torch.func, torch.ones_like(tx)), (tx,), (tu,)))


def test_nested_grad_and_mixed():
    (x, tx), (v, tv) = pair(3), pair(3)
    g = lambda F: F.grad(lambda a: (a * F.grad(lambda b: (a * b.sin() * b).sum())(a)).sum())
    close(g(ttf)(x), g(torch.func)(tx))
    # jvp inside grad (reverse over forward) and grad inside jvp (forward over reverse)
    rof = lambda F, t: F.grad(lambda a: F.jvp(lambda b: (b.tanh() * a).sum(), (a,), (t,))[1])
    close(rof(ttf, v)(x), rof(torch.func, tv)(tx))
    close(ttf.jvp(ttf.grad(lambda a: (a.tanh() * a).sum()), (x,), (v,)),
          torch.func.jvp(torch.func.grad(lambda a: (a.tanh() * a).sum()), (tx,), (tv,)))
    # a grad of a grad of a grad
    g3 = lambda F: F.grad(lambda a: F.grad(lambda b: F.grad(lambda c: (c ** 4).sum())(b).sum())(a).sum())
    close(g3(ttf)(x), g3(torch.func)(tx))


OPS = {
    "sin_mul": lambda a, b: (a.sin() * b).sum(),
    "matmul_tanh": lambda a, b: (a.reshape(2, 2) @ b.reshape(2, 2)).tanh().sum(),
    "div_exp": lambda a, b: (a.exp() / (b * b + 1.0)).sum(),
    "cumprod_flip": lambda a, b: (a.cumprod(0) * b.flip(0)).sum(),
    "logsumexp_amax": lambda a, b: a.logsumexp(0) + (a * b).amax(0),
    "getitem_cat": lambda a, b: (tt.cat([a[1:], b[:2]]) ** 3).sum(),
    "norm_std": lambda a, b: a.norm() * b.std(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_forward_over_reverse_equals_reverse_over_reverse(name):
    f = OPS[name]
    (x, _), (y, _), (v, _) = pair(4), pair(4), pair(4)
    fwd = ttf.jvp(ttf.grad(f), (x, y), (v, tt.zeros_like(y)))[1]
    rev = ttf.grad(lambda a: (ttf.grad(f)(a, y) * v).sum())(x)
    close(fwd, rev, 1e-9)




class CubeRule(Cube):
    @staticmethod
    def jvp(ctx, t):
        return t * 3 * ctx.saved_tensor(0) ** 2


def test_custom_function_rule_and_fallback():
    (x, tx), (v, tv) = pair(3), pair(3)
    with pytest.warns(UserWarning, match="op 'cube' has no jvp rule"):
        got = ttf.jvp(Cube.apply, (x,), (v,))
    close(got, (tx ** 3, 3 * tx ** 2 * tv))
    close(ttf.jvp(CubeRule.apply, (x,), (v,)), (tx ** 3, 3 * tx ** 2 * tv))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # warned once per op
        second = ttf.jvp(lambda a: ttf.jvp(Cube.apply, (a,), (v,))[1], (x,), (v,))[1]
    close(second, 6 * tx * tv * tv)


def test_inplace_and_views_inside_jvp():
    (x, tx), (v, tv) = pair(3), pair(3)

    def f(F):
        def g(a):
            b = a * 2
            b.mul_(a)          # in place on a dual tensor: b takes the product's tangent
            b.add_(1.0)
            return b
        return g
    close(ttf.jvp(f(ttf), (x,), (v,)), torch.func.jvp(f(torch.func), (tx,), (tv,)))

    def viewed(a):
        b = a * 2
        b[0:2].mul_(3.0)
        return b
    with pytest.raises(RuntimeError, match=r"mul_: in-place modification of a tensor that shares "
                                           r"memory with a view, inside tt.func.jvp"):
        ttf.jvp(viewed, (x,), (v,))


def test_tangents_stay_inside_their_level():
    (x, _), (v, _) = pair(3), pair(3)
    out, t = ttf.jvp(lambda a: a.exp(), (x,), (v,))
    y = out * 2    # after the level closed: an ordinary op, no Node, no tangent
    assert y._fw is None and y.grad_fn is None
    assert x._fw is None      # the caller's primal never carries the tangent
    from tinytensor.core.grad_mode import STATE
    assert STATE.fw_levels == ()


def test_grad_inside_jvp_takes_the_array_path_off():
    """tt.grad without create_graph inside a jvp level: the gradient still carries its
    tangent (the engine runs backward as Tensor ops while a level is open)."""
    (x, tx), (v, tv) = pair(3), pair(3)

    def g(a):
        a = a.detach().requires_grad_() if False else a
        w = tt.tensor(np.ones(3), requires_grad=True)
        (gw,) = tt.grad(((w * a.sin()) ** 2).sum(), [w])
        return gw
    exp = torch.func.jvp(lambda a: 2 * a.sin() ** 2, (tx,), (tv,))
    close(ttf.jvp(g, (x,), (v,)), exp)


def test_no_tangent_path_unchanged_under_no_grad():
    (x, tx), (v, tv) = pair(3), pair(3)
    with tt.no_grad():
        close(ttf.jvp(lambda a: (a * a).sum(0), (x,), (v,)), torch.func.jvp(lambda a: (a * a).sum(0), (tx,), (tv,)))
