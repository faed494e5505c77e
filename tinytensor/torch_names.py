"""Top-level torch names that have no other home here: small queries and switches torch
scripts call (`torch.is_tensor`, `torch.finfo`, `torch.set_float32_matmul_precision`, ...)."""
import numpy as np

from .core.tensor import Tensor
from .dtypes import DType, from_any, get_default_dtype
from .random import initial_seed  # noqa: F401  (re-exported)

__all__ = ["is_tensor", "numel", "initial_seed", "dtype", "finfo", "iinfo",
           "set_float32_matmul_precision", "get_float32_matmul_precision"]

dtype = DType  # `isinstance(x, torch.dtype)`

_matmul_precision = ["highest"]


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def set_float32_matmul_precision(precision):
    """torch's TF32 switch for float32 matmuls ("highest", "high", "medium"). Recorded and
    without effect: tinytensor's float32 products are always full float32 (see tt.backends)."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or "
                         f"'medium', got {precision!r}")
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    return _matmul_precision[0]


class finfo:
    """torch.finfo: the limits of a floating dtype (bits, eps, max, min, tiny,
    smallest_normal, resolution), from NumPy's finfo of its storage type."""

    def __init__(self, type=None):
        d = get_default_dtype() if type is None else from_any(type)
        if d.category not in (2, 3):
            raise TypeError(f"torch.finfo() requires a floating point input type, got {d.name}")
        f = np.finfo(d.np)
        self.dtype, self.bits = d.name, f.bits
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.tiny = self.smallest_normal = float(f.tiny)
        self.resolution = 10.0 ** -f.precision  # torch: a power of ten, as a Python float

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.smallest_normal}, tiny={self.tiny}, "
                f"dtype={self.dtype})")


class iinfo:
    """torch.iinfo: the limits of an integer dtype (bits, min, max)."""

    def __init__(self, type):
        d = from_any(type)
        if d.category not in (0, 1) or d.name == "bool":
            raise TypeError(f"torch.iinfo() requires an integer input type, got {d.name}")
        i = np.iinfo(d.np)
        self.dtype, self.bits, self.min, self.max = d.name, i.bits, int(i.min), int(i.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
