"""tt.compile composed with tt.func (issue 27): a compiled transform captures one program that
replays equal to eager on new values (NaN included); a compiled function called inside a
transform, which a replay could not honour, refuses by name instead of answering wrong."""
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler.capture import CaptureError
from tinytensor.func import jvp, vmap

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ops without a jvp rule yet note their fallback once
        yield


def _f(x, w):
    return ((x @ w).tanh() * x.sum(-1, keepdim=True)).exp().sum(-1)


def _values(*shapes, nan=False):
    out = [RNG.standard_normal(s) for s in shapes]
    if nan:
        out[0][0, 0] = np.nan
    return [tt.tensor(a) for a in out]


def _same(a, b):   # the generated C rounds as NumPy does up to a few ulps (no fast-math)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-13)


def _calls(compiled, eager, shapes):
    """Three calls on fresh values (the last with a NaN): each equal to eager, one program."""
    for nan in (False, False, True):
        args = _values(*shapes, nan=nan)
        got, want = compiled(*args), eager(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            _same(g, w)
    assert len(compiled.programs) == 1
    return got


def test_compiled_vmap_replays_equal_to_eager_on_new_values():
    f = vmap(_f, in_dims=(0, None))
    out = _calls(tt.compile(f, backend="numpy"), f, [(5, 2, 3), (3, 4)])
    assert np.isnan(out.numpy()[0]).any() and np.isfinite(out.numpy()[1:]).all()


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_compiled_per_sample_gradients_capture_one_program_equal_to_eager(backend):
    from tinytensor.func import grad

    def loss(w, x, y):                    # one example: x (3,), y ()
        return ((x @ w).tanh().sum() - y) ** 2

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    compiled = tt.compile(per_sample, backend=backend)
    out = _calls(compiled, per_sample, [(3, 4), (5, 3), (5,)])
    assert out.shape == (5, 3, 4)
    # per example indeed: row i is the gradient of example i alone
    w, x, y = _values((3, 4), (5, 3), (5,))
    got = compiled(w, x, y)
    for i in range(5):
        _same(got[i], grad(loss)(w, x[i], y[i]))


@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "hvp"])
def test_compiled_reverse_transforms_record_their_backward(transform):
    # tt.func's reverse mode runs the backward itself: under capture it must be recorded
    # as ops (a gradient computed on raw arrays would be a constant of the program)
    import tinytensor.func as ttf

    def loss(w, x):
        return ((x @ w).tanh() ** 2).sum()

    fns = {"grad": lambda w, x: ttf.grad(loss)(w, x),
           "vjp": lambda w, x: ttf.vjp(lambda w: (x @ w).sin(), w)[1](x @ w)[0],
           "jacrev": lambda w, x: ttf.jacrev(lambda w: (x @ w).sin())(w),
           "hvp": lambda w, x: ttf.hvp(lambda w: loss(w, x), (w,), (x.sum(0)[:, None] * w,))[1][0]}
    _calls(tt.compile(fns[transform], backend="numpy"), fns[transform], [(3, 4), (2, 3)])


def test_jvp_through_compile_replays_equal_to_eager_on_new_values():
    def tangent(x, w, tx):
        return jvp(lambda x: _f(x, w), (x,), (tx,))
    compiled = tt.compile(tangent, backend="numpy")
    _calls(compiled, tangent, [(2, 3), (3, 4), (2, 3)])
    # the tangent is an input of the program, not a constant of the first call
    x, w, tx = _values((2, 3), (3, 4), (2, 3))
    _same(compiled(x, w, tx * 2.0)[1], tangent(x, w, tx)[1] * 2.0)


def test_a_compiled_function_inside_vmap_refuses_by_name():
    compiled = tt.compile(_f, backend="numpy")
    x, w = _values((5, 2, 3), (3, 4))
    compiled(x[0], w)   # compiled for one example's shapes: a replay would read the zeros of a batched tensor
    with pytest.raises(CaptureError, match=r"tt.compile: _f was called inside tt.func.vmap at .*"
                                           r"test_compile_transforms.py:\d+ .*tt.compile\(tt.func.vmap\(f\)\)"):
        vmap(compiled, in_dims=(0, None))(x, w)


def test_a_compiled_function_inside_jvp_refuses_by_name():
    compiled = tt.compile(_f, backend="numpy")
    x, w, tx = _values((2, 3), (3, 4), (2, 3))
    compiled(x, w)   # a replay would drop the tangent: J t would read as zero
    with pytest.raises(CaptureError, match=r"called inside tt.func.jvp at .*test_compile_transforms.py"):
        jvp(lambda x: compiled(x, w), (x,), (tx,))
