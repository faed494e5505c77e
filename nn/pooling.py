"""Pooling layers: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool and MaxUnpool in
1d/2d/3d, each a Module over the function of the same name in tinytensor.functional,
with torch.nn's argument names and defaults (stride defaults to kernel_size)."""
import tinytensor.ops.pooling as P

from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


class _MaxPool(Module):
    n = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return P.max_pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices, self.n, f"max_pool{self.n}d")

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPool):
    n = 1


class MaxPool2d(_MaxPool):
    n = 2


class MaxPool3d(_MaxPool):
    n = 3


class _AvgPool(Module):
    n = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return P.avg_pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override, self.n, f"avg_pool{self.n}d")

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPool):
    n = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPool):
    n = 2


class AvgPool3d(_AvgPool):
    n = 3


class _AdaptiveAvgPool(Module):
    n = 2

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return P.adaptive_avg_pool(input, self.output_size, self.n, f"adaptive_avg_pool{self.n}d")

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    n = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    n = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    n = 3


class _AdaptiveMaxPool(Module):
    n = 2

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return P.adaptive_max_pool(input, self.output_size, self.return_indices, self.n,
                                   f"adaptive_max_pool{self.n}d")

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    n = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    n = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    n = 3


class _MaxUnpool(Module):
    n = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return P.max_unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size,
                            self.n, f"max_unpool{self.n}d")

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    n = 1


class MaxUnpool2d(_MaxUnpool):
    n = 2


class MaxUnpool3d(_MaxUnpool):
    n = 3
