"""torch's names for ops tinytensor already has under another name, and nonzero_static.

tinytensor has no storages and its views are copies where they cannot share memory, so
torch's "unsafe" (no view-aliasing checks) and "_copy" (never a view) variants are the same
ops as their plain forms. nonzero_static is nonzero padded or cut to a size fixed by the
caller: its shape never depends on the values, so it is one recorded op that a compiled
replay re-runs (nonzero itself is refused under tt.compile: its length is a value).
"""
import numpy as np

from ..core.function import Function
from ..core.tensor import Tensor
from .forward_mode import no_tangent
from .index_ops import as_strided
from .movement import chunk, split

__all__ = ["unsafe_chunk", "unsafe_split", "as_strided_copy", "nonzero_static"]


def unsafe_chunk(input, chunks, dim=0):
    """torch.unsafe_chunk: chunk (tinytensor's chunks are never checked views to begin with)."""
    return chunk(input, chunks, dim)


def unsafe_split(input, split_size, dim=0):
    """torch.unsafe_split: split."""
    return split(input, split_size, dim)


def as_strided_copy(input, size, stride, storage_offset=0):
    """torch.as_strided_copy: as_strided, which in tinytensor is a copy already."""
    return as_strided(input, size, stride, storage_offset)


class NonzeroStatic(Function):
    """The first `size` rows of argwhere(x), padded with `fill_value` rows: (size, ndim) int64."""
    name = "nonzero_static"
    jvp = staticmethod(no_tangent)

    @staticmethod
    def forward(ctx, x, size, fill_value):
        xp = np if isinstance(x, np.ndarray) else __import__("cupy").get_array_module(x)
        found = xp.argwhere(x)[:size].astype(np.int64)
        out = xp.full((size, x.ndim), fill_value, dtype=np.int64)
        out[:found.shape[0]] = found
        return out


def nonzero_static(input, *, size, fill_value=-1):
    """Indices of input's nonzero entries as a (size, input.ndim) int64 tensor: the first
    `size` of them in row-major order, the remaining rows filled with `fill_value`."""
    if not isinstance(input, Tensor):
        raise TypeError(f"nonzero_static: input must be a Tensor, got {type(input).__name__}")
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 0:
        raise ValueError(f"nonzero_static: size must be a non-negative int, got {size!r}")
    return NonzeroStatic.apply(input.detach(), size=int(size), fill_value=int(fill_value))
