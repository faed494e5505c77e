"""Convolutions against PyTorch: values, gradients of input, weight and bias, and double
backward (through each op's own backward: see oracle.with_squares), in float64 over a grid
of stride / padding / dilation / groups; a float32 pass; the error messages."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.oracle import F, check

# torch's own note about its 'same' padding with even kernels, not about the result
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")


def case(name, fn, inputs, **kw):
    return pytest.param(fn, inputs, kw, id=name)


def conv(nd, **kw):
    return lambda m, x, w: getattr(F(m), f"conv{nd}d")(x, w, **kw)


def conv_b(nd, **kw):
    return lambda m, x, w, b: getattr(F(m), f"conv{nd}d")(x, w, b, **kw)


def convt(nd, **kw):
    return lambda m, x, w: getattr(F(m), f"conv_transpose{nd}d")(x, w, **kw)


def convt_b(nd, **kw):
    return lambda m, x, w, b: getattr(F(m), f"conv_transpose{nd}d")(x, w, b, **kw)


CONV = [
    case("1d", conv(1), [(2, 3, 7), (4, 3, 3)]),
    case("1d_bias_stride_pad", conv_b(1, stride=2, padding=1), [(2, 3, 8), (4, 3, 3), (4,)]),
    case("1d_dilation_groups", conv(1, dilation=2, groups=3, padding=2), [(2, 6, 9), (3, 2, 3)]),
    case("1d_stride_skips_tail", conv(1, stride=4), [(1, 2, 10), (3, 2, 3)]),
    case("1d_same_even_kernel", conv(1, padding="same"), [(2, 3, 7), (2, 3, 4)]),
    case("1d_same_dilated", conv(1, padding="same", dilation=3), [(2, 3, 8), (2, 3, 2)]),
    case("1d_valid", conv(1, padding="valid"), [(2, 3, 7), (2, 3, 5)]),
    case("1d_unbatched", conv(1, padding=1), [(3, 7), (2, 3, 3)]),
    case("2d", conv(2), [(2, 3, 6, 5), (4, 3, 3, 3)]),
    case("2d_bias", conv_b(2, padding=1), [(2, 3, 6, 5), (4, 3, 3, 3), (4,)]),
    case("2d_stride_pad_tuples", conv(2, stride=(2, 3), padding=(1, 2)), [(2, 3, 7, 8), (4, 3, 3, 2)]),
    case("2d_dilation", conv(2, dilation=(2, 1), padding=(2, 0)), [(1, 2, 7, 6), (3, 2, 3, 3)]),
    case("2d_groups", conv_b(2, groups=2, stride=2, padding=1), [(2, 4, 7, 6), (6, 2, 3, 2), (6,)]),
    case("2d_depthwise", conv(2, groups=4, padding=1), [(2, 4, 5, 5), (8, 1, 3, 3)]),
    case("2d_1x1", conv(2), [(2, 5, 4, 3), (3, 5, 1, 1)]),
    case("2d_kernel_equals_input", conv(2), [(2, 3, 3, 4), (2, 3, 3, 4)]),
    case("2d_same_asymmetric", conv(2, padding="same", dilation=(1, 2)), [(2, 3, 6, 7), (4, 3, 4, 2)]),
    case("2d_patch_embed", conv_b(2, stride=4), [(2, 3, 8, 8), (5, 3, 4, 4), (5,)]),
    case("2d_unbatched", conv(2, stride=2, padding=1), [(3, 5, 6), (2, 3, 3, 3)]),
    # small images, wide channels: the images go through one GEMM side by side (_one_gemm)
    case("2d_small_image_one_gemm", conv_b(2, padding=1), [(3, 8, 2, 3), (16, 8, 3, 3), (16,)]),
    case("1d_short_one_gemm", conv(1, stride=2, padding=1), [(4, 8, 5), (12, 8, 3)]),
    case("3d", conv(3), [(1, 2, 4, 5, 4), (3, 2, 2, 3, 2)]),
    case("3d_all", conv_b(3, stride=(1, 2, 3), padding=(1, 0, 2), dilation=(2, 1, 1), groups=2),
         [(2, 4, 5, 6, 7), (4, 2, 2, 3, 3), (4,)]),
    case("3d_same", conv(3, padding="same"), [(1, 2, 4, 4, 5), (2, 2, 3, 2, 3)]),
]

CONV_T = [
    case("t1d", convt(1), [(2, 3, 5), (3, 4, 3)]),
    case("t1d_bias_stride", convt_b(1, stride=2, padding=1, output_padding=1), [(2, 3, 5), (3, 4, 3), (4,)]),
    case("t1d_dilation_output_padding", convt(1, dilation=2, output_padding=1), [(2, 3, 5), (3, 2, 3)]),
    case("t1d_groups", convt(1, groups=3, stride=3, padding=2), [(2, 6, 5), (6, 2, 4)]),
    case("t1d_unbatched", convt(1, stride=2), [(3, 5), (3, 2, 3)]),
    case("t2d", convt(2), [(2, 3, 4, 5), (3, 2, 3, 3)]),
    case("t2d_bias_stride_pad", convt_b(2, stride=2, padding=1, output_padding=1),
         [(2, 3, 4, 5), (3, 4, 3, 3), (4,)]),
    case("t2d_tuples", convt(2, stride=(2, 3), padding=(0, 1), output_padding=(1, 2), dilation=(1, 2)),
         [(1, 2, 4, 3), (2, 3, 2, 3)]),
    case("t2d_groups", convt(2, groups=2, stride=2), [(2, 4, 3, 3), (4, 3, 3, 2)]),
    case("t2d_pad_crops", convt(2, padding=2), [(1, 2, 4, 4), (2, 3, 3, 3)]),
    case("t3d", convt_b(3, stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0), groups=2),
         [(1, 4, 3, 3, 2), (4, 1, 2, 3, 3), (2,)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CONV + CONV_T)
def test_against_torch(fn, inputs, kw):
    check(fn, inputs, **kw)


@pytest.mark.parametrize("fn,inputs", [
    (conv(2, stride=2, padding=1, groups=2), [(2, 4, 9, 8), (6, 2, 3, 3)]),
    (conv_b(1, padding="same", dilation=2), [(2, 3, 11), (4, 3, 4), (4,)]),
    (convt(2, stride=2, padding=1, output_padding=1), [(2, 3, 5, 4), (3, 4, 3, 3)]),
    (conv(3, padding=1), [(1, 2, 4, 5, 3), (3, 2, 3, 3, 3)]),
])
def test_float32(fn, inputs):
    check(fn, inputs, dtype="float32", atol=1e-4, rtol=1e-4)


def test_conv_transpose_is_the_input_gradient_of_conv():
    rng = np.random.default_rng(1)
    x = tt.tensor(rng.standard_normal((2, 3, 10, 9)), requires_grad=True)
    w = tt.tensor(rng.standard_normal((4, 3, 3, 2)))
    y = tt.functional.conv2d(x, w, stride=(2, 3), padding=1, dilation=(1, 2))
    g = tt.tensor(rng.standard_normal(y.shape))
    (gx,) = tt.grad(y, x, g)
    # output_padding recovers the rows the strided conv never read
    xt = tt.functional.conv_transpose2d(g, w, stride=(2, 3), padding=1, dilation=(1, 2),
                                        output_padding=(1, 2))
    np.testing.assert_allclose(xt.numpy(), gx.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_input_is_promoted_like_other_float_ops():
    x = tt.tensor(np.arange(2 * 3 * 5).reshape(1, 2, 3, 5))
    w = tt.ones(1, 2, 2, 2)
    y = tt.functional.conv2d(x, w)
    assert y.dtype == tt.float32
    ref = torch.nn.functional.conv2d(torch.arange(30.0).reshape(1, 2, 3, 5), torch.ones(1, 2, 2, 2))
    np.testing.assert_array_equal(y.numpy(), ref.numpy())


def _err(fn, kind, *words):
    return pytest.param(fn, kind, words, id=words[0])


X4, W4 = tt.zeros(2, 4, 5, 5), tt.zeros(6, 4, 3, 3)
ERRORS = [
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(6, 3, 3, 3)), ValueError,
         "conv2d: given groups=1, weight of size (6, 3, 3, 3), expected input(2, 4, 5, 5) to have 3 "
         "channels, but got 4 channels instead"),
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(5, 2, 3, 3), groups=2), ValueError,
         "conv2d: given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight "
         "of size (5, 2, 3, 3)"),
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(6, 4, 7, 7)), ValueError,
         "conv2d: calculated padded input size per channel: (5 x 5). Kernel size: (7 x 7). Kernel "
         "size can't be greater than actual input size"),
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(6, 4, 3, 3), dilation=3), ValueError,
         "Kernel size: (7 x 7)"),
    _err(lambda: tt.functional.conv2d(X4, W4, stride=2, padding="same"), ValueError,
         "conv2d: padding='same' is not supported for strided convolutions"),
    _err(lambda: tt.functional.conv2d(X4, W4, padding="full"), ValueError,
         "conv2d: invalid padding string 'full'"),
    _err(lambda: tt.functional.conv2d(X4, W4, stride=(1, 1, 1)), ValueError,
         "conv2d: expected stride to be a single integer value or a list of 2 values"),
    _err(lambda: tt.functional.conv2d(X4, W4, stride=0), ValueError, "conv2d: non-positive stride (0, 0)"),
    _err(lambda: tt.functional.conv2d(X4, W4, dilation=(1, 0)), ValueError, "conv2d: non-positive dilation"),
    _err(lambda: tt.functional.conv2d(X4, W4, padding=-1), ValueError, "conv2d: negative padding (-1, -1)"),
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(6, 2, 3, 3), groups=0), ValueError,
         "conv2d: non-positive groups 0"),
    _err(lambda: tt.functional.conv2d(X4, W4, tt.zeros(5)), ValueError,
         "conv2d: given weight of size (6, 4, 3, 3), expected bias to be 1-dimensional with 6 "
         "elements, but got bias of size (5,)"),
    _err(lambda: tt.functional.conv2d(tt.zeros(5, 5), W4), ValueError,
         "conv2d: expected 3D (unbatched) or 4D (batched) input, but got input of size (5, 5)"),
    _err(lambda: tt.functional.conv2d(X4, tt.zeros(6, 4, 3)), ValueError,
         "conv2d: expected a 4-d weight (out_channels, in_channels/groups, kh, kw), got weight of "
         "size (6, 4, 3)"),
    _err(lambda: tt.functional.conv2d(X4, W4.to(tt.float64)), TypeError,
         "conv2d: input dtype float32 and weight dtype float64 should be the same"),
    _err(lambda: tt.functional.conv_transpose2d(X4, tt.zeros(3, 2, 3, 3)), ValueError,
         "conv_transpose2d: given groups=1, weight of size (3, 2, 3, 3), expected input(2, 4, 5, 5) to "
         "have 3 channels"),
    _err(lambda: tt.functional.conv_transpose2d(X4, tt.zeros(4, 2, 3, 3), stride=2, output_padding=2),
         ValueError, "conv_transpose2d: output padding must be smaller than either stride or dilation"),
    _err(lambda: tt.functional.conv_transpose2d(X4, tt.zeros(4, 2, 3, 3), padding=5), ValueError,
         "conv_transpose2d: given input of size (2, 4, 5, 5), weight (4, 2, 3, 3), stride (1, 1), "
         "padding (5, 5): the calculated output size (-3, -3) is too small"),
    _err(lambda: tt.functional.conv_transpose2d(X4, tt.zeros(4, 2, 3, 3), padding="same"), TypeError,
         "conv_transpose2d: padding must be an int or a tuple of ints, not str"),
    _err(lambda: tt.functional.conv_transpose1d(tt.zeros(1, 4, 5), tt.zeros(4, 2, 3), groups=3),
         ValueError, "conv_transpose1d: given groups=3, expected weight to be divisible by 3"),
]


def assert_raises_saying(fn, kind, words):
    """fn() raises `kind` with every one of `words` in its message."""
    with pytest.raises(kind) as e:
        fn()
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("fn,kind,words", ERRORS)
def test_errors(fn, kind, words):
    assert_raises_saying(fn, kind, words)


def test_error_names_the_module_path():
    from tinytensor import nn
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(5, 2, 3))
    with pytest.raises(ValueError, match=r"conv2d: .* in 1$"):
        net(tt.zeros(1, 3, 8, 8))


def test_the_table_covers_both_gemm_layouts():
    # one GEMM per image (a big image) and one for all images (small images, wide channels)
    from tinytensor.ops.conv import _one_gemm
    assert not _one_gemm(2, 4, 3 * 9, 4 * 3, 1)        # "2d": (2, 3, 6, 5) -> 4 x (4, 3)
    assert _one_gemm(3, 16, 8 * 9, 2 * 3, 1)           # "2d_small_image_one_gemm"
    assert _one_gemm(4, 12, 8 * 3, 3, 1)               # "1d_short_one_gemm"
    assert not _one_gemm(1, 16, 72, 6, 1) and not _one_gemm(3, 16, 72, 6, 2)   # one image; groups
