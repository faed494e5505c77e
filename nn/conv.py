"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d, as torch.nn lays them out.

Conv weights are (out_channels, in_channels / groups, *kernel_size) and transposed-conv
weights (in_channels, out_channels / groups, *kernel_size), so a torch state_dict loads
as is. Initial values follow torch: kaiming-uniform with a=sqrt(5) for the weight, which
is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias.
"""
import math

import tinytensor as tt
from tinytensor.messages import plain
from tinytensor.ops.conv import conv, conv_transpose, ntuple

from . import init
from ._per_dim import per_dim
from .module import Module, Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    n = 2
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                 bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for what, v in (("in_channels", in_channels), ("out_channels", out_channels),
                        ("groups", groups)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name}: {what} must be a positive integer, got {plain(v)!r}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{plain(padding_mode)!r}")
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r} is not supported yet; "
                                      f"only 'zeros' (pad the input with F.pad first)")
        n = self.n
        if isinstance(padding, str):
            if self.transposed or padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}" +
                                 ("" if self.transposed else "; expected 'same' or 'valid'"))
            if padding == "same" and any(s != 1 for s in ntuple(stride, n, "stride", name)):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        else:
            padding = ntuple(padding, n, "padding", name)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ntuple(kernel_size, n, "kernel_size", name)
        self.stride = ntuple(stride, n, "stride", name)
        self.padding = padding
        self.dilation = ntuple(dilation, n, "dilation", name)
        self.output_padding = ntuple(output_padding, n, "output_padding", name)
        self.groups, self.padding_mode = groups, padding_mode
        shape = ((in_channels, out_channels // groups) if self.transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(tt.empty(*shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(tt.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self.n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups, op=f"conv{self.n}d")


Conv1d, Conv2d, Conv3d = per_dim(
    _Conv, "Conv", doc="torch.nn.{name}: (N, C_in, {spatial}) -> (N, C_out, {spatial_out}).")


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device=device, dtype=dtype)

    def forward(self, input, output_size=None):
        """output_size (spatial, or with the batch and channel dims) picks among the sizes a
        strided conv_transpose can produce; it sets output_padding for this call."""
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        return conv_transpose(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                              self.groups, self.dilation, op=f"conv_transpose{self.n}d")

    def _output_padding(self, input, output_size):
        n, name = self.n, type(self).__name__
        size = tuple(int(s) for s in output_size)
        if len(size) in (n + 1, n + 2):
            size = size[-n:]
        if len(size) != n:
            raise ValueError(f"{name}: output_size must have {n} or {n + 2} elements, got "
                             f"{plain(tuple(output_size))}")
        spatial = tuple(input.shape[-n:])
        least = tuple((s - 1) * st - 2 * p + d * (k - 1) + 1 for s, st, p, d, k in
                      zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size))
        for want, lo, st in zip(size, least, self.stride):
            if not lo <= want < lo + st:
                raise ValueError(f"{name}: requested an output size of {size}, but valid sizes range "
                                 f"from {least} to {tuple(a + s - 1 for a, s in zip(least, self.stride))} "
                                 f"(for an input of spatial size {spatial})")
        return tuple(w - lo for w, lo in zip(size, least))


ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = per_dim(
    _ConvTranspose, "ConvTranspose", doc="torch.nn.{name}: (N, C_in, {spatial}) -> (N, C_out, {spatial_out}).")
