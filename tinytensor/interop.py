"""Zero-copy exchange with other array libraries through DLPack.

In: `tt.from_dlpack(x)` for anything exporting `__dlpack__` (torch, NumPy, CuPy, JAX, ...).
Out: `Tensor.__dlpack__` / `__dlpack_device__` (core/tensor.py), so `torch.from_dlpack(t)`,
`np.from_dlpack(t)` and `cupy.from_dlpack(t)` share a tensor's memory.

bfloat16 travels too, although NumPy's DLPack refuses ml_dtypes' bfloat16: _dlpack_capsule.py
rewrites and reads those capsules itself (DLPack type code 4, 16 bits, 1 lane).

Writes through the other library are not seen by tinytensor's version counter (torch has
the same blind spot), so do not modify a tensor that autograd saved for backward.

Memory in which two elements share a place (torch's `expand` has stride 0, `unfold` strides
that overlap) is imported read-only, as tinytensor's own expand views are: an in-place write
would land several times on one place, and is refused with torch's message.
"""
import numpy as np

from ._dlpack_capsule import CPU_DEVICES as _CPU_DEVICES, import_bf16
from .core import Tensor
from .device import CPU, cupy_module, device_of_array
from .dtypes import BF16_NP, SUPPORTED
from .overlap import array_overlaps

_CUDA_DEVICES = {2: "CUDA", 13: "CUDA managed"}  # DLPack device types CuPy reads
_EXACT = {d.np for d in SUPPORTED}


def _shape(x):
    shape = getattr(x, "shape", None)
    return "?" if shape is None else tuple(int(n) for n in shape)


def from_dlpack(x):
    """A Tensor sharing memory with `x`, any object with `__dlpack__` (torch.Tensor,
    numpy.ndarray, cupy.ndarray, ...). The result does not require grad; a torch tensor
    that does is refused by torch, as `torch.from_dlpack` refuses (use `x.detach()`)."""
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"tt.from_dlpack: {type(x).__name__} does not implement the DLPack "
                        "protocol (__dlpack__ and __dlpack_device__); use tt.tensor(x) to copy it")
    what = f"{type(x).__module__.split('.')[0]}.{type(x).__name__}"
    kind, index = (int(v) for v in x.__dlpack_device__())
    if kind in _CPU_DEVICES:
        xp = np
    elif kind in _CUDA_DEVICES:
        xp = cupy_module()
    else:
        raise TypeError(f"tt.from_dlpack: {what} lives on DLPack device type {kind} (index "
                        f"{index}); tinytensor reads CPU (1) and CUDA (2) memory")
    if xp is np and BF16_NP is not None and isinstance(x, np.ndarray) and x.dtype == BF16_NP:
        return Tensor._make(_guarded(x), CPU, False)  # NumPy cannot export it, nor needs DLPack
    try:
        arr = xp.from_dlpack(x)
    except BufferError as e:  # the producer refused to export (requires grad, ...)
        raise BufferError(f"tt.from_dlpack: {what} refused to export: {e}") from None
    except (RuntimeError, TypeError, ValueError) as e:  # NumPy/CuPy cannot represent it
        arr = import_bf16(x, what) if xp is np else None  # bfloat16 is the one dtype NumPy lacks
        if arr is None:
            raise TypeError(f"tt.from_dlpack: cannot read {what} of shape {_shape(x)} and dtype "
                            f"{getattr(x, 'dtype', '?')}: {e}") from None
    if arr.dtype not in _EXACT:  # converting would copy, which from_dlpack promises not to do
        raise TypeError(f"tt.from_dlpack: {what} has dtype {arr.dtype}, which has no tinytensor "
                        "dtype (" + ", ".join(d.name for d in SUPPORTED) + "), so its memory cannot be "
                        "shared; cast it first or copy it with tt.tensor(x)")
    if xp is np:
        return Tensor._make(_guarded(arr), CPU, False)
    return Tensor._make(arr, device_of_array(arr), False)  # CuPy has no read-only flag: _write checks


def _guarded(arr):
    """`arr`, or a read-only view of it if two of its elements share memory (a stride-0
    expand, an unfold): tinytensor's own expand views are read-only too, and in-place ops
    refuse such memory with torch's message (ops/inplace.py)."""
    if arr.flags.writeable and array_overlaps(arr):
        arr = arr.view()
        arr.flags.writeable = False
    return arr
