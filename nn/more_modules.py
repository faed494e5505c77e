"""torch.nn's module classes over the rest of torch.nn.functional: GLU, the shrinks,
Threshold, PReLU, RReLU, the Dropout1d/2d/3d and alpha dropouts, PixelShuffle,
PixelUnshuffle, ChannelShuffle, PairwiseDistance, Bilinear and NLLLoss. Each holds torch's
constructor arguments and calls its F.* function (the ops and their gradients live in
tinytensor/ops/activations_more.py, dropout_more.py, spatial.py, distances.py, losses.py);
printed forms and parameter names are torch's."""
import math

import tinytensor as tt
import tinytensor.functional as F

from .losses import _as_buffer, _check_reduction
from .module import Module, Parameter


def _inplace(flag):
    return ", inplace=True" if flag else ""


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.glu(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return F.hardshrink(x, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, x):
        return F.softshrink(x, self.lambd)


class Tanhshrink(Module):
    def forward(self, x):
        return F.tanhshrink(x)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x):
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace(self.inplace)}"


class PReLU(Module):
    """max(0, x) + weight * min(0, x); one learned slope, or one per channel (dim 1)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(tt.full((num_parameters,), init, device=device, dtype=dtype))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Leaky ReLU with a slope drawn from U(lower, upper) per element in training, the mean
    slope (lower + upper) / 2 in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x):
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace(self.inplace)}"


class _DropoutNd(Module):
    fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 "
                             f"and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return getattr(F, self.fn)(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""
    fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs."""
    fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps a SELU network's mean and variance."""
    fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    fn = "feature_alpha_dropout"


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        return F.channel_shuffle(x, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Bilinear(Module):
    """y = x1^T A x2 + b with weight (out, in1, in2); torch's init U(-k, k), k = 1/sqrt(in1)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        kw = dict(device=device, dtype=dtype)
        self.weight = Parameter(
            (tt.rand(out_features, in1_features, in2_features, **kw) * 2.0 - 1.0) * bound)
        if bias:
            self.bias = Parameter((tt.rand(out_features, **kw) * 2.0 - 1.0) * bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class NLLLoss(Module):
    """Negative log likelihood of class indices under log-probabilities (N, C[, d...]);
    class weights are a buffer, as in torch.nn."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            raise ValueError("NLLLoss: size_average and reduce are deprecated in torch; pass "
                             "reduction='mean', 'sum' or 'none'")
        _check_reduction(reduction, "NLLLoss")
        self.register_buffer("weight", _as_buffer(weight, "weight", "NLLLoss"))
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)
