"""Does an array refer to one memory location from two of its elements? (a stride-0 view
from expand, or memory imported through DLPack with zero or overlapping strides, such as
torch's `expand` or `unfold`). An in-place write into such memory lands several times on
one place, so tinytensor refuses it, with torch's message.

Imports only NumPy (ops/inplace.py and interop.py both use it)."""
import numpy as np

TORCH_MESSAGE = ("unsupported operation: more than one element of the written-to tensor refers "
                 "to a single memory location. Please clone() the tensor before performing the "
                 "operation.")
_EXACT_LIMIT = 1 << 20  # elements past which an undecided layout is taken as overlapping


def overlaps(shape, strides, itemsize):
    """True if two elements of an array of `shape` and byte `strides` share a byte (True
    as well for a layout too large to decide exactly; such a layout comes only from
    as_strided-like constructions, never from slicing or permuting dense memory)."""
    if 0 in shape:
        return False
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    reach = itemsize - 1  # the last byte the dimensions so far reach, from the first element's
    for stride, n in dims:
        if stride <= reach:  # stride 0, or a step back into bytes already reached
            break
        reach += stride * (n - 1)
    else:
        return False  # each step clears everything below it: every element has its own bytes
    if dims[0][0] == 0:
        return True
    count = int(np.prod([n for _, n in dims], dtype=np.int64))
    if count > _EXACT_LIMIT:
        return True
    offsets = np.zeros(1, np.int64)
    for stride, n in dims:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * stride).ravel()
    offsets.sort()
    return bool((np.diff(offsets) < itemsize).any())


def array_overlaps(a):
    """overlaps() for a NumPy or CuPy array."""
    return overlaps(a.shape, a.strides, a.itemsize)
