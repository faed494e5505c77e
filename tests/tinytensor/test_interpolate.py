"""F.interpolate against torch in float64: nearest, nearest-exact, linear, bilinear,
trilinear and area, up and down, by size and by scale_factor (the factor itself sets the
source positions unless recompute_scale_factor), align_corners both ways; values, gradients
(entries used by several outputs add up) and double backward; torch's refusals."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import case
from .oracle import F, check


def interp(**kw):
    return lambda m, x: F(m).interpolate(x, **kw)


CASES = [
    case("nearest_up", interp(size=7), [(2, 3, 4)]),
    case("nearest_down", interp(size=3), [(2, 3, 7)]),
    case("nearest_double", interp(scale_factor=2), [(1, 2, 5)]),
    case("nearest_scale_1.7", interp(scale_factor=1.7), [(1, 2, 5)]),
    case("nearest_scale_0.6", interp(scale_factor=0.6), [(1, 2, 8)]),
    case("nearest_2d", interp(size=(5, 3)), [(1, 2, 3, 4)]),
    case("nearest_2d_scales", interp(scale_factor=(1.5, 0.5)), [(1, 2, 3, 4)]),
    case("nearest_3d", interp(size=(3, 5, 2)), [(1, 1, 2, 3, 4)]),
    case("nearest_exact", interp(size=7, mode="nearest-exact"), [(2, 3, 4)]),
    case("nearest_exact_2d", interp(scale_factor=0.7, mode="nearest-exact"), [(1, 2, 5, 6)]),
    case("linear_up", interp(size=7, mode="linear"), [(2, 3, 4)]),
    case("linear_down", interp(size=3, mode="linear"), [(2, 3, 8)]),
    case("linear_align", interp(size=7, mode="linear", align_corners=True), [(2, 3, 4)]),
    case("linear_align_to_1", interp(size=1, mode="linear", align_corners=True), [(1, 2, 4)]),
    case("linear_scale", interp(scale_factor=2.5, mode="linear"), [(1, 2, 4)]),
    case("linear_scale_recompute", interp(scale_factor=2.5, mode="linear", recompute_scale_factor=True),
         [(1, 2, 4)]),
    case("linear_from_1", interp(size=4, mode="linear"), [(1, 2, 1)]),
    case("bilinear", interp(size=(5, 7), mode="bilinear"), [(2, 2, 3, 4)]),
    case("bilinear_align", interp(size=(5, 7), mode="bilinear", align_corners=True), [(2, 2, 3, 4)]),
    case("bilinear_down", interp(scale_factor=0.5, mode="bilinear"), [(1, 2, 6, 5)]),
    case("bilinear_scales", interp(scale_factor=(1.5, 2), mode="bilinear"), [(1, 1, 3, 4)]),
    case("trilinear", interp(size=(3, 4, 2), mode="trilinear"), [(1, 2, 2, 3, 4)]),
    case("trilinear_align", interp(scale_factor=1.5, mode="trilinear", align_corners=True),
         [(1, 1, 2, 3, 2)]),
    case("area", interp(size=(2, 3), mode="area"), [(1, 2, 5, 6)]),
    case("same_size", interp(size=4, mode="linear"), [(1, 2, 4)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_against_torch(fn, inputs, kw):
    check(fn, inputs, **kw)


def test_float32():
    check(interp(size=(5, 7), mode="bilinear"), [(2, 2, 3, 4)], dtype="float32")
    check(interp(scale_factor=1.3), [(1, 2, 3, 4)], dtype="float32")


@pytest.mark.parametrize("n_in,n_out", [(3, 5), (5, 3), (7, 10), (13, 4), (30, 22), (30, 26)])
def test_nearest_indices_as_torch(n_in, n_out):
    """nearest computes source positions in float32, like torch's kernel; a float64 formula
    would pick another neighbour for 30 -> 22 and 30 -> 26."""
    x = np.arange(n_in, dtype=np.float64).reshape(1, 1, n_in)
    ours = F(tt).interpolate(tt.tensor(x), size=n_out)
    theirs = F(torch).interpolate(torch.tensor(x), size=n_out)
    assert ours.tolist() == theirs.tolist()


def test_uint8_nearest_and_integer_refusals():
    x = np.arange(12, dtype=np.uint8).reshape(1, 2, 6)
    ours, theirs = F(tt).interpolate(tt.tensor(x), size=4), F(torch).interpolate(torch.tensor(x), size=4)
    assert ours.dtype.name == "uint8" and ours.tolist() == theirs.tolist()
    for data, mode in ((x, "linear"), (x.astype(np.int64), "nearest")):
        with pytest.raises(NotImplementedError):
            F(torch).interpolate(torch.tensor(data), size=4, mode=mode)
        with pytest.raises(NotImplementedError, match=f"interpolate: mode '{mode}' is not implemented "
                                                      f"for {data.dtype} inputs, as in torch"):
            F(tt).interpolate(tt.tensor(data), size=4, mode=mode)


def test_result_is_a_new_tensor():
    x = tt.zeros(1, 1, 3)
    y = F(tt).interpolate(x, size=3)
    y += 1
    assert x.tolist() == [[[0.0, 0.0, 0.0]]]


BAD = [  # (shape, kwargs, torch's exception type, our message)
    ((1, 1, 4), dict(size=3, mode="nearest", align_corners=True), ValueError,
     r"interpolate: align_corners can only be set with the interpolating modes"),
    ((1, 1, 4), dict(), ValueError, r"interpolate: give exactly one of size and scale_factor, got neither"),
    ((1, 1, 4), dict(size=3, scale_factor=2.0), ValueError, r"got both"),
    ((1, 1, 4), dict(size=(2, 3)), ValueError, r"interpolate: size \(2, 3\) must give one entry per "
                                               r"spatial dimension of the input \(1\)"),
    ((1, 1, 4), dict(size=3, mode="bilinear"), NotImplementedError,
     r"interpolate: mode 'bilinear' needs a 4-d input, got shape \(1, 1, 4\)"),
    ((4,), dict(size=2), NotImplementedError, r"expected a 3-d, 4-d or 5-d input"),
    ((1, 1, 4), dict(scale_factor=0.1), RuntimeError,
     r"interpolate: input and output sizes must be greater than 0, got input \(4,\) and output \(0,\)"),
    ((1, 1, 4), dict(size=3, mode="bogus"), NotImplementedError,
     r"interpolate: mode 'bogus' is not supported"),
]


@pytest.mark.parametrize("shape,kw,exc,match", BAD, ids=[str(b[1]) for b in BAD])
def test_refusals_match_torch(shape, kw, exc, match):
    with pytest.raises(exc):
        F(torch).interpolate(torch.zeros(shape), **kw)
    with pytest.raises(exc, match=match):
        F(tt).interpolate(tt.zeros(*shape), **kw)
