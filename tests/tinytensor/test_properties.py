"""Property tests: broadcasting binary ops and reductions over random shapes and dims.

Forward values are checked against NumPy, gradients (and double backward) against PyTorch.
"""
import numpy as np
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import tinytensor as tt
from tinytensor.testing import compare_with_torch

SETTINGS = settings(max_examples=int(__import__("os").environ.get("TT_EXAMPLES", 30)), deadline=None)

BINARY = {  # name: (tinytensor/torch function of (m, x, y), numpy reference)
    "add": (lambda m, x, y: x + y, np.add),
    "sub": (lambda m, x, y: x - y, np.subtract),
    "mul": (lambda m, x, y: x * y, np.multiply),
    "maximum": (lambda m, x, y: m.maximum(x, y), np.maximum),
    "minimum": (lambda m, x, y: m.minimum(x, y), np.minimum),
}


def arrays(rng, shape, integer_valued):
    """Random float64 data; integer-valued data makes ties (maximum/minimum) common."""
    if integer_valued:
        return rng.integers(-2, 3, size=shape).astype(np.float64)
    return rng.uniform(-2, 2, size=shape)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3),
       name=st.sampled_from(sorted(BINARY)), integer_valued=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_broadcast_binary(shapes, name, integer_valued, seed):
    fn, reference = BINARY[name]
    rng = np.random.default_rng(seed)
    x, y = (arrays(rng, s, integer_valued) for s in shapes.input_shapes)
    out = compare_with_torch(lambda a, b: fn(tt, a, b), lambda a, b: fn(torch, a, b), [x, y],
                             double_backward=True, seed=seed)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(out.detach().numpy(), reference(x, y), rtol=1e-12, atol=0)


def _np_logsumexp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


REDUCE = {  # name: (tinytensor function of (x, dim, keepdim), NumPy reference of (x, axis, keepdims))
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), lambda x, d, k: x.sum(axis=d, keepdims=k)),
    "mean": (lambda x, d, k: x.mean(d, keepdim=k), lambda x, d, k: x.mean(axis=d, keepdims=k)),
    "prod": (lambda x, d, k: tt.prod(x, d, keepdim=k), lambda x, d, k: x.prod(axis=d, keepdims=k)),
    "amax": (lambda x, d, k: tt.amax(x, d, keepdim=k), lambda x, d, k: x.max(axis=d, keepdims=k)),
    "amin": (lambda x, d, k: x.amin(axis=d, keepdims=k), lambda x, d, k: x.min(axis=d, keepdims=k)),
    "var": (lambda x, d, k: x.var(d, keepdim=k), lambda x, d, k: x.var(axis=d, keepdims=k, ddof=1)),
    "std": (lambda x, d, k: x.std(d, keepdim=k, correction=0), lambda x, d, k: x.std(axis=d, keepdims=k)),
    "logsumexp": (lambda x, d, k: tt.logsumexp(x, d, keepdim=k), _np_logsumexp),
    "norm": (lambda x, d, k: x.norm(dim=d, keepdim=k),
             lambda x, d, k: np.sqrt((x * x).sum(axis=d, keepdims=k))),
}


@st.composite
def shape_and_dims(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    if not shape or draw(st.booleans()):
        return shape, None
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    # write some of them as negative dims
    dims = tuple(a - len(shape) if draw(st.booleans()) else a for a in axes)
    return shape, dims[0] if len(dims) == 1 and draw(st.booleans()) else dims


@SETTINGS
@given(sd=shape_and_dims(), keepdim=st.booleans(), name=st.sampled_from(sorted(REDUCE)),
       integer_valued=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_reduce_against_numpy(sd, keepdim, name, integer_valued, seed):
    shape, dims = sd
    fn, reference = REDUCE[name]
    rng = np.random.default_rng(seed)
    x = arrays(rng, shape, integer_valued)
    t = tt.tensor(x, requires_grad=True)
    out = fn(t, dims, keepdim)
    axis = dims if dims is None or isinstance(dims, int) else tuple(dims)
    with np.errstate(all="ignore"):
        want = np.asarray(reference(x, axis, keepdim))
    assert out.shape == want.shape, (out.shape, want.shape)
    assert out.dtype is tt.float64
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    # the gradient is checked against torch where torch takes the same arguments
    if name != "prod" and not (name == "norm" and dims is not None and not isinstance(dims, int)
                               and len(dims) > 2):
        th_fn = {"amax": lambda x, d, k: torch.amax(x, () if d is None else d, keepdim=k),
                 "amin": lambda x, d, k: torch.amin(x, () if d is None else d, keepdim=k),
                 "logsumexp": lambda x, d, k: torch.logsumexp(
                     x, tuple(range(x.ndim)) if d is None else d, keepdim=k)}.get(name, fn)
        # torch's second derivative of norm/std at 0 is nan, tinytensor's is 0: compare it away from 0
        at_zero = name in ("norm", "std") and integer_valued
        compare_with_torch(lambda a: fn(a, dims, keepdim), lambda a: th_fn(a, dims, keepdim), [x],
                           double_backward=not at_zero, seed=seed)
