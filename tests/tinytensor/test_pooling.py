"""Pooling against PyTorch: values, indices, gradients and double backward in float64 over
a grid of kernel / stride / padding / dilation / ceil_mode / count_include_pad; a float32
pass; ties and -inf; the error messages."""
import itertools

import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.oracle import F, check
from tests.tinytensor.test_conv import assert_raises_saying
from tinytensor.testing import compare_with_torch


def case(name, fn, inputs, **kw):
    return pytest.param(fn, inputs, kw, id=name)


def op(name, *args, **kw):
    return lambda m, x: getattr(F(m), name)(x, *args, **kw)


MAX = [
    case("max1d", op("max_pool1d", 2), [(2, 3, 8)]),
    case("max1d_ceil_indices", op("max_pool1d", 3, stride=2, ceil_mode=True, return_indices=True), [(2, 3, 8)]),
    case("max1d_pad_dilation", op("max_pool1d", 3, stride=1, padding=1, dilation=2, return_indices=True), [(2, 2, 7)]),
    case("max2d", op("max_pool2d", 2), [(2, 3, 6, 6)]),
    case("max2d_odd_input", op("max_pool2d", 2, return_indices=True), [(2, 3, 7, 5)]),
    case("max2d_overlap_pad", op("max_pool2d", 3, stride=2, padding=1, return_indices=True), [(2, 3, 7, 6)]),
    case("max2d_ceil", op("max_pool2d", 3, stride=2, padding=1, ceil_mode=True), [(2, 3, 8, 7)]),
    case("max2d_ceil_no_pad", op("max_pool2d", 2, stride=2, ceil_mode=True, return_indices=True), [(1, 2, 5, 7)]),
    case("max2d_tuples_dilation", op("max_pool2d", (3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1),
                                      return_indices=True), [(2, 3, 9, 6)]),
    case("max2d_stride_list_empty", op("max_pool2d", 2, stride=[]), [(1, 2, 4, 6)]),
    case("max2d_unbatched", op("max_pool2d", 2, return_indices=True), [(3, 6, 4)]),
    case("max3d", op("max_pool3d", 2, stride=(1, 2, 2), padding=1, return_indices=True), [(1, 2, 3, 5, 4)]),
    case("max3d_ceil_dilation", op("max_pool3d", 2, stride=2, dilation=(1, 2, 1), ceil_mode=True),
         [(1, 2, 5, 6, 5)]),
]

AVG = [case(f"{name}_{'incl' if cip else 'excl'}", fn(cip), shape)
       for cip in (True, False) for name, fn, shape in [
           ("avg1d", lambda c: op("avg_pool1d", 3, count_include_pad=c), [(2, 3, 8)]),
           ("avg1d_pad_ceil", lambda c: op("avg_pool1d", 4, stride=3, padding=2, ceil_mode=True,
                                           count_include_pad=c), [(2, 3, 10)]),
           ("avg2d_pad", lambda c: op("avg_pool2d", 3, stride=2, padding=1, count_include_pad=c), [(2, 3, 7, 6)]),
           ("avg2d_ceil", lambda c: op("avg_pool2d", 3, stride=2, padding=1, ceil_mode=True,
                                       count_include_pad=c), [(2, 3, 8, 7)]),
           ("avg2d_ceil_no_pad", lambda c: op("avg_pool2d", 2, ceil_mode=True, count_include_pad=c), [(1, 2, 5, 7)]),
           ("avg2d_tuples", lambda c: op("avg_pool2d", (3, 2), stride=(1, 2), padding=(1, 0),
                                         count_include_pad=c), [(2, 2, 5, 6)]),
           ("avg3d", lambda c: op("avg_pool3d", (2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), ceil_mode=True,
                                  count_include_pad=c), [(1, 2, 4, 7, 8)]),
       ]] + [
    case("avg2d_divisor_override", op("avg_pool2d", 3, stride=2, padding=1, divisor_override=5), [(2, 3, 8, 7)]),
    case("avg3d_divisor_override", op("avg_pool3d", 2, divisor_override=3), [(1, 2, 4, 4, 4)]),
    case("avg2d_unbatched", op("avg_pool2d", 2), [(3, 4, 6)]),
]

ADAPTIVE = [
    case("aavg1d", op("adaptive_avg_pool1d", 5), [(2, 3, 7)]),
    case("aavg1d_grow", op("adaptive_avg_pool1d", 9), [(2, 3, 4)]),
    case("aavg2d", op("adaptive_avg_pool2d", (3, 4)), [(2, 3, 7, 9)]),
    case("aavg2d_int", op("adaptive_avg_pool2d", 1), [(2, 3, 5, 6)]),
    case("aavg2d_one_and_some", op("adaptive_avg_pool2d", (1, 4)), [(2, 3, 5, 9)]),   # a mean, then bins
    case("aavg3d_one_one_keep", op("adaptive_avg_pool3d", (1, 1, 4)), [(1, 2, 5, 7, 4)]),
    case("aavg2d_none", op("adaptive_avg_pool2d", (None, 4)), [(2, 3, 7, 9)]),
    case("aavg2d_unbatched", op("adaptive_avg_pool2d", (2, 3)), [(3, 5, 7)]),
    case("aavg3d", op("adaptive_avg_pool3d", (2, 3, 5)), [(1, 2, 5, 7, 4)]),
    case("amax1d", op("adaptive_max_pool1d", 4, return_indices=True), [(2, 3, 7)]),
    case("amax2d", op("adaptive_max_pool2d", (3, 4)), [(2, 3, 7, 9)]),
    case("amax2d_indices", op("adaptive_max_pool2d", (3, 4), return_indices=True), [(2, 3, 7, 9)]),
    case("amax2d_grow_none", op("adaptive_max_pool2d", (None, 7), return_indices=True), [(2, 3, 5, 4)]),
    case("amax2d_unbatched", op("adaptive_max_pool2d", 2, return_indices=True), [(3, 5, 5)]),
    case("amax3d", op("adaptive_max_pool3d", (2, 3, 3), return_indices=True), [(1, 2, 5, 7, 4)]),
]


def unpool(nd, k, stride, padding=0, size=False):
    def fn(m, x):
        y, i = getattr(F(m), f"max_pool{nd}d")(x, k, stride, padding, return_indices=True)
        out = tuple(x.shape[-nd:]) if size else None
        return getattr(F(m), f"max_unpool{nd}d")(y, i, k, stride, padding, output_size=out)
    return fn


UNPOOL = [
    case("unpool1d", unpool(1, 2, 2), [(2, 3, 8)]),
    case("unpool2d", unpool(2, 2, 2), [(2, 3, 6, 4)]),
    case("unpool2d_output_size", unpool(2, 2, 2, size=True), [(2, 3, 7, 5)]),
    case("unpool2d_pad", unpool(2, 3, 3, 1, size=True), [(1, 2, 7, 8)]),
    case("unpool3d", unpool(3, 2, 2), [(1, 2, 4, 4, 6)]),
]


@pytest.mark.parametrize("fn,inputs,kw", MAX + AVG + ADAPTIVE + UNPOOL)
def test_against_torch(fn, inputs, kw):
    check(fn, inputs, **kw)


def test_unpool_of_overlapping_windows_writes_each_element_once():
    # stride < kernel: one input element wins several windows and its index repeats
    fn = unpool(2, 3, 1)
    compare_with_torch(lambda x: fn(tt, x), lambda x: fn(torch, x), [(2, 3, 6, 5)])


@pytest.mark.parametrize("name,fn", [
    ("max2d", op("max_pool2d", 3, stride=2, padding=1, return_indices=True)),
    ("avg2d", op("avg_pool2d", 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("aavg2d", op("adaptive_avg_pool2d", (3, 2))),
    ("amax2d", op("adaptive_max_pool2d", (3, 2), return_indices=True)),
])
def test_float32(name, fn):
    check(lambda m, x: fn(m, x), [(2, 3, 7, 6)], dtype="float32")


def test_ties_and_infinities_pick_torchs_element():
    # ties go to the first element of the window; an all--inf window still returns a real index
    x = np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 1.0, 2.0, 2.0],
                    [-np.inf, -np.inf, 5.0, 5.0], [-np.inf, -np.inf, 5.0, 5.0]]]])
    for fn in (op("max_pool2d", 2, return_indices=True), op("max_pool2d", 3, 1, 1, return_indices=True),
               op("adaptive_max_pool2d", 3, return_indices=True)):
        compare_with_torch(lambda *a: fn(tt, *a), lambda *a: fn(torch, *a), [x], grad=False)


def test_integer_max_pool_keeps_the_dtype():
    x = np.array([[[3, -1, 7, 2, 0]]], dtype=np.int64)
    for fn in (op("max_pool1d", 2, return_indices=True), op("max_pool1d", 3, 1, 1, return_indices=True)):
        compare_with_torch(lambda *a: fn(tt, *a), lambda *a: fn(torch, *a), [x])


def _err(fn, kind, *words):
    return pytest.param(fn, kind, words, id=words[0])


X = tt.zeros(2, 4, 5, 5)
ERRORS = [
    _err(lambda: tt.functional.max_pool2d(X, 2, padding=2), ValueError,
         "max_pool2d: pad should be at most half of kernel size", "pad=2, kernel_size=2"),
    _err(lambda: tt.functional.avg_pool2d(X, 2, padding=2), ValueError,
         "avg_pool2d: pad should be at most half of kernel size"),
    _err(lambda: tt.functional.max_pool2d(X, 7), ValueError,
         "max_pool2d: given input size: (4 x 5 x 5). Calculated output size: (4 x 0 x 0). Output size is too small"),
    _err(lambda: tt.functional.avg_pool1d(tt.zeros(1, 2, 3), 4), ValueError, "avg_pool1d: given input size: (2 x 3)"),
    _err(lambda: tt.functional.max_pool2d(tt.zeros(5, 5), 2), ValueError,
         "max_pool2d: expected 3D (unbatched) or 4D (batched) input, but got input of size (5, 5)"),
    _err(lambda: tt.functional.max_pool2d(X, 0), ValueError, "max_pool2d: kernel_size should be greater than zero"),
    _err(lambda: tt.functional.max_pool2d(X, 2, stride=(1, 2, 3)), ValueError,
         "max_pool2d: expected stride to be a single integer value or a list of 2 values"),
    _err(lambda: tt.functional.avg_pool2d(X, 2, divisor_override=0), ValueError,
         "avg_pool2d: divisor must be not zero"),
    _err(lambda: tt.functional.adaptive_avg_pool2d(X, (1, 2, 3)), ValueError,
         "adaptive_avg_pool2d: output_size (1, 2, 3) must have 2 entries"),
    _err(lambda: tt.functional.max_unpool2d(X, tt.full((2, 4, 5, 5), 100, dtype=tt.int64), 2), IndexError,
         "max_unpool2d: found an invalid max index 100 (output volumes are of size 10x10): out of bounds"),
    _err(lambda: tt.functional.max_unpool2d(X, tt.zeros(2, 4, 5, 5), 2), TypeError,
         "max_unpool2d: indices must be an integer Tensor"),
    _err(lambda: tt.functional.max_unpool2d(X, tt.zeros(2, 4, 5, 4, dtype=tt.int64), 2), ValueError,
         "max_unpool2d: expected indices of the input's shape (2, 4, 5, 5), got (2, 4, 5, 4)"),
    _err(lambda: tt.functional.max_unpool2d(X, tt.zeros(2, 4, 5, 5, dtype=tt.int64), 2, output_size=(12, 10)),
         ValueError, "max_unpool2d: invalid output_size (12, 10)"),
]


@pytest.mark.parametrize("fn,kind,words", ERRORS)
def test_errors(fn, kind, words):
    assert_raises_saying(fn, kind, words)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_pool_refuses_exactly_the_windows_of_padding_only(n):
    """A dilation wider than the input can put a window wholly in the padding: torch gives
    -inf there (and an index outside the input), we refuse naming it; every other geometry
    of a small grid gives torch's values and indices."""
    rng = np.random.default_rng(n)
    refused = 0
    for s, k, d, p, st, ceil in itertools.product((1, 2, 4), (2, 3), (1, 3, 5), (0, 1, 2), (1, 2, 3), (False, True)):
        if p > k // 2:
            continue
        x = rng.standard_normal((1, 2) + (s,) * n)
        kw = dict(kernel_size=k, stride=st, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
        try:
            ty, ti = getattr(torch.nn.functional, f"max_pool{n}d")(torch.tensor(x), **kw)
        except RuntimeError:
            continue
        try:
            y, i = getattr(tt.functional, f"max_pool{n}d")(tt.tensor(x), **kw)
        except ValueError as e:
            # torch computes this geometry: refusing it is a defect (ceil_mode's last window
            # was dropped with a negative span), unless the window covers only padding
            assert "covers only padding" in str(e), (s, k, d, p, st, ceil, str(e))
            assert np.isneginf(ty.numpy()).any(), (s, k, d, p, st, ceil)
            refused += 1
            continue
        np.testing.assert_array_equal(y.numpy(), ty.numpy())
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert refused > 0


@pytest.mark.parametrize("n", [1, 2])
def test_avg_pool_output_sizes_and_values_follow_torch_in_ceil_mode(n):
    # a window longer than the input still counts once in ceil_mode (torch floors a negative
    # span); the output-size rule is the one max_pool shares
    rng = np.random.default_rng(n)
    for s, k, p, st, ceil in itertools.product((1, 2, 3, 5), (1, 2, 3), (0, 1), (1, 2, 3), (False, True)):
        if p > k // 2:
            continue
        x = rng.standard_normal((1, 2) + (s,) * n)
        kw = dict(kernel_size=k, stride=st, padding=p, ceil_mode=ceil)
        try:
            ty = getattr(torch.nn.functional, f"avg_pool{n}d")(torch.tensor(x), **kw)
        except RuntimeError:
            with pytest.raises(ValueError, match="Output size is too small"):
                getattr(tt.functional, f"avg_pool{n}d")(tt.tensor(x), **kw)
            continue
        y = getattr(tt.functional, f"avg_pool{n}d")(tt.tensor(x), **kw)
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12, atol=1e-15)


def test_max_pool2d_of_an_empty_batch_is_empty_as_torch():
    import torch
    x = tt.zeros(0, 2, 4, 5, requires_grad=True)
    y = tt.functional.max_pool2d(x, 2)
    y.sum().backward()
    assert tuple(y.shape) == tuple(torch.nn.functional.max_pool2d(torch.zeros(0, 2, 4, 5), 2).shape)
    assert tuple(x.grad.shape) == (0, 2, 4, 5)


@pytest.mark.parametrize("size", [(2, 2), (1, 5), (3, 1), (3, 4)])
def test_adaptive_avg_pool_keeps_an_inf_or_nan_in_its_own_bins(size):
    # each bin averages its own elements (an averaging matrix of 0s and 1s once spread a nan
    # or inf to every bin: 0 * inf): values and gradients match torch's nan/inf pattern
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 10))
    x[0, 0, 0, 0], x[1, 2, 7, 9] = np.nan, np.inf
    g = np.random.default_rng(10).standard_normal((2, 3) + size)
    g[0, 1, 0, 0] = np.nan
    X, T = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = tt.functional.adaptive_avg_pool2d(X, size), torch.nn.functional.adaptive_avg_pool2d(T, size)
    y.backward(tt.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=1e-12, equal_nan=True)
