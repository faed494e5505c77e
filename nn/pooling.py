"""Pooling layers: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool and MaxUnpool in
1d/2d/3d, each a Module over the function of the same name in tinytensor.functional,
with torch.nn's argument names and defaults (stride defaults to kernel_size)."""
import tinytensor.ops.pooling as P

from ._per_dim import per_dim
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


class _Window(Module):
    """A pooling layer's window: kernel_size, stride (torch's default: the window moves by
    its own size) and padding, as given, or as n-tuples where torch's layer keeps them so
    (`tuples`: AvgPool1d and MaxUnpoolNd), so that attributes and repr read as torch's."""
    n = 2
    tuples = False

    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        stride = stride if stride is not None else kernel_size
        if self.tuples:
            kernel_size, stride, padding = (v if isinstance(v, tuple) else (v,) * self.n
                                            for v in (kernel_size, stride, padding))
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _MaxPool(_Window):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding)
        self.dilation = dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return P.max_pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices, self.n, f"max_pool{self.n}d")

    def extra_repr(self):
        return f"{super().extra_repr()}, dilation={self.dilation}, ceil_mode={self.ceil_mode}"


MaxPool1d, MaxPool2d, MaxPool3d = per_dim(_MaxPool, "MaxPool")


class _AvgPool(_Window):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return P.avg_pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override, self.n, f"avg_pool{self.n}d")


class AvgPool1d(_AvgPool):
    n = 1
    tuples = True

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


# AvgPool1d has no divisor_override (as in torch), so it is written out above
AvgPool2d, AvgPool3d = per_dim(_AvgPool, "AvgPool", dims=(2, 3))


class _AdaptiveAvgPool(Module):
    n = 2

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return P.adaptive_avg_pool(input, self.output_size, self.n, f"adaptive_avg_pool{self.n}d")

    def extra_repr(self):
        return f"output_size={self.output_size}"


AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = per_dim(_AdaptiveAvgPool, "AdaptiveAvgPool")


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


AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d = per_dim(_AdaptiveMaxPool, "AdaptiveMaxPool")


class _MaxUnpool(_Window):
    tuples = True

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__(kernel_size, stride, padding)

    def forward(self, input, indices, output_size=None):
        return P.max_unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size,
                            self.n, f"max_unpool{self.n}d")


MaxUnpool1d, MaxUnpool2d, MaxUnpool3d = per_dim(_MaxUnpool, "MaxUnpool")
