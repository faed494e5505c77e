"""Activation modules beyond ReLU/GELU/SiLU (nn/layers.py): each calls its F.* function with
torch.nn's constructor arguments, and prints like torch.nn (`ELU(alpha=1.0)`)."""
import tinytensor.functional as F

from ._one_call import _OneCall
from .module import Module


class ELU(_OneCall):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(F.elu, alpha=alpha, inplace=inplace)


class CELU(_OneCall):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(F.celu, alpha=alpha, inplace=inplace)


class SELU(_OneCall):
    def __init__(self, inplace=False):
        super().__init__(F.selu, inplace=inplace)


class Mish(_OneCall):
    def __init__(self, inplace=False):
        super().__init__(F.mish, inplace=inplace)


class Hardswish(_OneCall):
    def __init__(self, inplace=False):
        super().__init__(F.hardswish, inplace=inplace)

    def extra_repr(self):
        return ""  # torch.nn.Hardswish does not show inplace


class Hardsigmoid(_OneCall):
    def __init__(self, inplace=False):
        super().__init__(F.hardsigmoid, inplace=inplace)

    def extra_repr(self):
        return ""  # torch.nn.Hardsigmoid does not show inplace


class Hardtanh(_OneCall):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        if max_val <= min_val:  # torch.nn asserts this, though F.hardtanh accepts equal bounds
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        super().__init__(F.hardtanh, min_val=min_val, max_val=max_val, inplace=inplace)


class ReLU6(_OneCall):
    def __init__(self, inplace=False):
        super().__init__(F.relu6, inplace=inplace)


class LogSigmoid(Module):
    def forward(self, x):
        return F.logsigmoid(x)


class Softmin(Module):
    """dim=None takes torch's implicit dim, with its warning."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmin(x, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class LeakyReLU(_OneCall):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(F.leaky_relu, negative_slope=negative_slope, inplace=inplace)


class Softplus(_OneCall):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__(F.softplus, beta=beta, threshold=threshold)


class Softmax(Softmin):
    """dim=None takes torch's implicit dim, with its warning (see F.softmax)."""

    def forward(self, x):
        return F.softmax(x, self.dim, _stacklevel=5)


class LogSoftmax(Softmin):
    def forward(self, x):
        return F.log_softmax(x, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """softmax over the channels of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expects a 3-D (C, H, W) or 4-D (N, C, H, W) input, "
                             f"got shape {tuple(x.shape)}")
        return F.softmax(x, -3)
