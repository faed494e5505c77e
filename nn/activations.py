"""Activation modules beyond ReLU/GELU/SiLU (nn/layers.py): each calls its F.* function with
torch.nn's constructor arguments, and prints like torch.nn (`ELU(alpha=1.0)`)."""
import tinytensor.functional as F

from .module import Module


class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ELU(_Inplace):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, x):
        return F.celu(x, self.alpha, self.inplace)


class SELU(_Inplace):
    def forward(self, x):
        return F.selu(x, self.inplace)


class Mish(_Inplace):
    def forward(self, x):
        return F.mish(x, self.inplace)


class Hardswish(_Inplace):
    def forward(self, x):
        return F.hardswish(x, self.inplace)

    def extra_repr(self):
        return ""  # torch.nn.Hardswish does not show inplace


class Hardsigmoid(_Inplace):
    def forward(self, x):
        return F.hardsigmoid(x, self.inplace)

    def extra_repr(self):
        return ""  # torch.nn.Hardsigmoid does not show inplace


class Hardtanh(_Inplace):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__(inplace)
        if max_val <= min_val:  # torch.nn asserts this, though F.hardtanh accepts equal bounds
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(_Inplace):
    def forward(self, x):
        return F.relu6(x, self.inplace)


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


class LeakyReLU(_Inplace):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


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
