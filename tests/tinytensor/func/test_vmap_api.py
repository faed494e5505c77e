"""tt.func.vmap's interface as torch.func.vmap's: in_dims / out_dims (None, negative, pytrees),
nesting, chunk_size, randomness modes, the per-example fallback and its warning, errors."""
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.func import vmap

from .user_ops import Cube


def A(a):
    return tt.tensor(np.asarray(a))


def close(a, b):
    a = a.detach().numpy() if isinstance(a, tt.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


RNG = np.random.default_rng(0)
X, Y, W = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5))


@pytest.mark.parametrize("in_dims, out_dims, b", [
    (0, 0, X * 2),                  # both batched along 0
    ((1, None), 1, X[:, 0]),        # batched along dim 1, b shared by every example
    ((-1, 0), -1, X.T),             # negative in_dim and out_dim
    ((-2, None), -2, X[0]),
])
def test_in_dims_and_out_dims_match_torch(in_dims, out_dims, b):
    def g(a, b):
        return (a * b).exp() + a.sum()
    got = vmap(g, in_dims=in_dims, out_dims=out_dims)(A(X), A(b))
    exp = torch.func.vmap(g, in_dims=in_dims, out_dims=out_dims)(torch.tensor(X), torch.tensor(b))
    close(got, exp)


def test_pytrees_shared_arguments_and_nesting():
    def f(d, lst, w):
        return {"y": d["x"] @ w + lst[0], "z": (lst[1] * 2,)}
    x, b, c = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 5)), RNG.standard_normal(2)
    got = vmap(f, in_dims=({"x": 0}, [0, None], None))({"x": A(x)}, [A(b), A(c)], A(W))
    exp = torch.func.vmap(f, in_dims=({"x": 0}, [0, None], None))(
        {"x": torch.tensor(x)}, [torch.tensor(b), torch.tensor(c)], torch.tensor(W))
    close(got["y"], exp["y"])
    close(got["z"][0], exp["z"][0])   # an unbatched output comes out expanded over the batch
    # vmap of vmap: an outer product of two batches, and a batch of batches
    outer = vmap(vmap(lambda a, b: (a * b).sum(), in_dims=(None, 0)), in_dims=(0, None))
    close(outer(A(X), A(Y.T)), torch.func.vmap(torch.func.vmap(
        lambda a, b: (a * b).sum(), in_dims=(None, 0)), in_dims=(0, None))(torch.tensor(X), torch.tensor(Y.T)))
    z = RNG.standard_normal((2, 4, 3))
    close(vmap(vmap(lambda a: a.softmax(-1) @ A(W)), in_dims=1)(A(z)),
          torch.func.vmap(torch.func.vmap(lambda a: a.softmax(-1) @ torch.tensor(W)), in_dims=1)(torch.tensor(z)))


def test_chunk_size_gives_the_same_result():
    f = lambda a: (a @ A(W)).tanh()  # noqa: E731
    close(vmap(f, chunk_size=3)(A(X)), vmap(f)(A(X)))
    close(vmap(f, chunk_size=1, out_dims=1)(A(X)), vmap(f, out_dims=1)(A(X)))


def test_errors_name_the_arguments_and_sizes():
    with pytest.raises(ValueError, match=r"args\[0\] \(shape \(4, 3\).*and 3 for args\[1\]"):
        vmap(lambda a, b: a + b)(A(X), A(W))
    with pytest.raises(ValueError, match="in_dim=2 for args\\[0\\].*-2 <= in_dim < 2"):
        vmap(lambda a: a, in_dims=2)(A(X))
    with pytest.raises(ValueError, match="at least one input must be batched"):
        vmap(lambda a: a, in_dims=None)(A(X))
    with pytest.raises(ValueError, match="in_dim=0 for args\\[1\\], which is a float"):
        vmap(lambda a, s: a * s)(A(X), 2.0)
    with pytest.raises(ValueError, match="in_dims has 1 entries but .* got 2"):
        vmap(lambda a, b: a, in_dims=(0,))(A(X), A(X))
    with pytest.raises(ValueError, match="output is batched, so its out_dim cannot be None"):
        vmap(lambda a: a * 2, out_dims=None)(A(X))
    with pytest.raises(ValueError, match="randomness"):
        vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(RuntimeError, match="vmap: bool\\(\\) reads the value of a batched tensor"):
        vmap(lambda a: a * 2 if a.sum() > 0 else a)(A(X))
    with pytest.raises(RuntimeError, match="backward\\(\\) inside vmap"):
        vmap(lambda a: a.sum().backward())(tt.tensor(X, requires_grad=True))
    leaked = []
    vmap(lambda a: leaked.append(a) or a)(A(X))
    with pytest.raises(RuntimeError, match="escaped"):
        leaked[0] + 1


def test_randomness_modes():
    x = A(np.ones((3, 1000)))
    drop = lambda a: F.dropout(a, 0.5, training=True)  # noqa: E731
    with pytest.raises(RuntimeError, match="random operation 'dropout_mask'.*randomness='error'"):
        vmap(drop)(x)
    with pytest.raises(RuntimeError, match="random operation 'randn'"):
        vmap(lambda a: a + tt.randn(1000, dtype=tt.float64))(x)
    for r in (lambda a: F.dropout(a, 0.5, training=True), lambda a: a * tt.rand(1000, dtype=tt.float64)):
        diff = vmap(r, randomness="different")(x).numpy()
        same = vmap(r, randomness="same")(x).numpy()
        assert not np.array_equal(diff[0], diff[1])
        assert np.array_equal(same[0], same[1]) and np.array_equal(same[1], same[2])




def test_an_op_without_a_rule_runs_per_example_with_one_warning():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = vmap(lambda a: Cube.apply(a).sum())(A(X))
        vmap(lambda a: Cube.apply(a))(A(X))
    msgs = [str(w.message) for w in rec if "no batching rule" in str(w.message)]
    assert len(msgs) == 1 and "'cube'" in msgs[0]
    close(out, (X ** 3).sum(1))
    g = vmap(tt.func.grad(lambda a: Cube.apply(a).sum()))(A(X))   # differentiable too
    close(g, 3 * X ** 2)


def test_the_plain_path_is_untouched_outside_vmap():
    from tinytensor.core.grad_mode import STATE
    vmap(lambda a: a + 1)(A(X))
    assert STATE.vmap == ()
    assert type(A(X) + 1) is tt.Tensor
