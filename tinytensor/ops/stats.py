"""isclose / allclose, and var_mean / std_mean (both moments of one pass, as torch returns them)."""
import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from ..messages import plain
from .forward_mode import no_tangent
from .movement import broadcast_tensors
from .reduce import bool_dim_is_unbiased, mean, std, var

__all__ = ["isclose", "allclose", "var_mean", "std_mean"]


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise; infinities equal only themselves."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"isclose: expected two Tensors, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    if input.dtype is not other.dtype:  # torch refuses to compare across dtypes here
        raise TypeError(f"isclose: {input.dtype.name} did not match {other.dtype.name}: both tensors "
                        f"should have the same dtype")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={plain(rtol)} and "
                         f"atol={plain(atol)}")
    a, b = broadcast_tensors(input, other)
    return IsClose.apply(a, b, rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan))


class IsClose(Function):
    """NumPy's isclose of two arrays of one shape (a bool array): a recorded op."""
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, a, b, rtol, atol, equal_nan):
        xp = np if isinstance(a, np.ndarray) else __import__("cupy").get_array_module(a)
        return xp.asarray(xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Python bool: every entry isclose."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def var_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """(var, mean) over dim, var with `correction` (default 1) as torch.var_mean."""
    dim, unbiased = bool_dim_is_unbiased(dim, unbiased)
    return (var(input, dim, unbiased=unbiased, keepdim=keepdim, correction=correction),
            mean(input, dim, keepdim=keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """(std, mean) over dim, as torch.std_mean."""
    dim, unbiased = bool_dim_is_unbiased(dim, unbiased)
    return (std(input, dim, unbiased=unbiased, keepdim=keepdim, correction=correction),
            mean(input, dim, keepdim=keepdim))
