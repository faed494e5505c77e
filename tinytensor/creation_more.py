"""More creation functions: tril_indices, triu_indices, logspace, scalar_tensor,
empty_strided and empty_permuted (the Tensor methods new_empty and new_empty_strided call
these too)."""
import numpy as np

from .creation import _finish, _refuse_bool, _resolve, empty
from .core.tensor import Tensor
from .device import array_context
from .dtypes import int64


def _tri_indices(np_fn, op, row, col, offset, dtype, device):
    row, col, offset = int(row), int(col), int(offset)
    if row < 0 or col < 0:
        raise ValueError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    dev, dt = _resolve(device, dtype, default=int64)
    if dt.is_floating_point or dt.name == "bool":
        raise TypeError(f"{op}: dtype must be an integer dtype, got {dt.name}")
    # NumPy's order is torch's: row by row, columns increasing
    rows, cols = np_fn(row, offset, col)
    with array_context(dev):
        arr = dev.xp.asarray(np.stack([rows, cols]).astype(dt.np).reshape(2, -1))
    return _finish(arr, dev, False)


def tril_indices(row, col, offset=0, dtype=None, device=None):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix."""
    return _tri_indices(np.tril_indices, "tril_indices", row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, dtype=None, device=None):
    """The (2, N) row and column indices of the upper triangle of a row x col matrix."""
    return _tri_indices(np.triu_indices, "triu_indices", row, col, offset, dtype, device)


def _number(v, what):
    if isinstance(v, Tensor):   # torch's tensor overload: a 0-d tensor is its number
        if v.numel() != 1 or v.ndim != 0:
            raise ValueError(f"logspace: {what} must be a 0-dimensional tensor, got shape "
                             f"{tuple(v.shape)}")
        return v.item()
    return v


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """base ** e for `steps` exponents e evenly spaced from start to end. The exponents are
    computed as torch does, the first half from start and the second from end, so that both
    ends are exact."""
    start, end = _number(start, "start"), _number(end, "end")
    steps = int(steps)
    if steps < 0:
        raise ValueError(f"logspace: number of steps must be non-negative, got {steps}")
    dev, dt = _resolve(device, dtype)
    _refuse_bool(dt, "logspace")
    idx = np.arange(steps, dtype=np.float64)
    if steps == 1:
        e = np.full(1, float(start))
    else:
        step = (float(end) - float(start)) / (steps - 1)
        e = np.where(idx < steps // 2, float(start) + step * idx,
                     float(end) - step * (steps - 1 - idx))
    vals = np.power(float(base), e)
    if not dt.is_floating_point:
        vals = np.trunc(vals)   # torch casts the float power to the integer dtype
    with array_context(dev):
        arr = dev.xp.asarray(vals.astype(dt.np))
    return _finish(arr, dev, requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number s, of the default float dtype unless told."""
    dev, dt = _resolve(device, dtype)
    with array_context(dev):
        arr = dev.xp.asarray(np.asarray(s).astype(dt.np))
    return _finish(arr, dev, requires_grad)


def empty_strided(size, stride, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of `size`. tinytensor's arrays are laid out by NumPy/CuPy, so
    the result is C-contiguous whatever `stride` asks (values and shape are what torch's
    are; only `.stride()` can differ)."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise ValueError(f"empty_strided: size {size} and stride {stride} must have the same length")
    return empty(size, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of `size` (C-contiguous, see empty_strided)."""
    size, layout = tuple(int(s) for s in size), tuple(int(d) for d in physical_layout)
    if sorted(layout) != list(range(len(size))):
        raise ValueError(f"empty_permuted: physical_layout {layout} must be a permutation of the "
                         f"{len(size)} dimensions of size {size}")
    return empty(size, dtype=dtype, device=device, requires_grad=requires_grad)
