"""torch.nn modules around the functions issue 24 added to tinytensor.functional: GLU,
PReLU, RReLU, Hardshrink, Softshrink, Tanhshrink, Threshold; Dropout1d/2d/3d, AlphaDropout,
FeatureAlphaDropout; PixelShuffle, PixelUnshuffle, ChannelShuffle;
FractionalMaxPool2d/3d, LPPool1d/2d/3d; Bilinear, EmbeddingBag,
PairwiseDistance.

Constructor arguments, defaults, parameter names (state-dict keys) and `extra_repr` are
torch.nn's, so `repr(module)` and a torch state dict carry over.
"""
import math

import tinytensor as tt
import tinytensor.functional as F

from ._one_call import _OneCall
from .module import Module, Parameter


# ---------------------------------------------------------------- activations
class GLU(_OneCall):
    def __init__(self, dim=-1):
        super().__init__(F.glu, dim=dim)


class PReLU(Module):
    """x if x > 0 else a * x, with one learnable a or one per channel (init 0.25)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(tt.full((num_parameters,), float(init), device=device,
                                        dtype=dtype))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Hardshrink(_OneCall):
    def __init__(self, lambd=0.5):
        super().__init__(F.hardshrink, lambd=lambd)

    def extra_repr(self):
        return f"{self.lambd}"  # torch.nn prints the bare value: Hardshrink(0.5)


class Softshrink(_OneCall):
    def __init__(self, lambd=0.5):
        super().__init__(F.softshrink, lambd=lambd)

    extra_repr = Hardshrink.extra_repr


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class Threshold(_OneCall):
    def __init__(self, threshold, value, inplace=False):
        super().__init__(F.threshold, threshold=threshold, value=value, inplace=inplace)


# ---------------------------------------------------------------- dropouts
class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 "
                             f"and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)


# ---------------------------------------------------------------- shuffles, upsampling
class PixelShuffle(_OneCall):
    def __init__(self, upscale_factor):
        super().__init__(F.pixel_shuffle, upscale_factor=upscale_factor)


class PixelUnshuffle(_OneCall):
    def __init__(self, downscale_factor):
        super().__init__(F.pixel_unshuffle, downscale_factor=downscale_factor)


class ChannelShuffle(_OneCall):
    def __init__(self, groups):
        super().__init__(F.channel_shuffle, groups=groups)


# UpsamplingNearest2d / UpsamplingBilinear2d: nn/shape_layers.py (subclasses of Upsample, as torch's)


# ---------------------------------------------------------------- pooling
class _FractionalMaxPool(Module):
    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, "
                             f"or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        ratios = output_ratio if isinstance(output_ratio, (list, tuple)) else (
            [] if output_ratio is None else [output_ratio])
        if any(not 0 < r < 1 for r in ratios):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size, self.output_size = kernel_size, output_size
        self.output_ratio, self.return_indices = output_ratio, return_indices
        self.register_buffer("_random_samples", _random_samples)


class FractionalMaxPool2d(_FractionalMaxPool):
    def forward(self, input):
        return F.fractional_max_pool2d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)


class FractionalMaxPool3d(_FractionalMaxPool):
    def forward(self, input):
        return F.fractional_max_pool3d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)


class _LPPool(Module):
    fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input):
        return type(self).fn(input, float(self.norm_type), self.kernel_size, self.stride,
                             self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPool):
    fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPool):
    fn = staticmethod(F.lp_pool3d)


# ---------------------------------------------------------------- bilinear, bags, distances
class Bilinear(Module):
    """y = x1^T A x2 + b; weight (out, in1, in2), uniform(-1/sqrt(in1), 1/sqrt(in1)) as torch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        self.weight = Parameter(_uniform((out_features, in1_features, in2_features), bound,
                                         device, dtype))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound, device, dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


def _uniform(shape, bound, device, dtype):
    return (tt.rand(*shape, device=device, dtype=dtype) * 2.0 - 1.0) * bound


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embedding rows (torch.nn.EmbeddingBag)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            w = tt.randn(num_embeddings, embedding_dim, device=device, dtype=dtype)
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = _weight.detach()
        self.weight = Parameter(w)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
