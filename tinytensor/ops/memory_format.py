"""memory_format= of .to / .contiguous / .float ...: torch's layouts, by name.

tinytensor tensors are arrays, so a layout changes strides, never values:
preserve_format keeps the array, contiguous_format makes it C-contiguous, and
channels_last / channels_last_3d lay a 4-d / 5-d tensor out with its channels (dim 1)
innermost, as torch does, through a recorded op whose gradient passes through. Both
tinytensor's constants (tt.channels_last) and torch's (torch.channels_last) are taken,
by name, so ported code runs unchanged.
"""
import numpy as np

from ..core.function import Function
from ..messages import OpError

__all__ = ["MemoryFormat", "contiguous_format", "preserve_format", "channels_last",
           "channels_last_3d", "apply_memory_format"]


class MemoryFormat:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"tinytensor.{self.name}"


contiguous_format = MemoryFormat("contiguous_format")
preserve_format = MemoryFormat("preserve_format")
channels_last = MemoryFormat("channels_last")
channels_last_3d = MemoryFormat("channels_last_3d")
_RANK = {"channels_last": 4, "channels_last_3d": 5}
_NAMES = ("contiguous_format", "preserve_format") + tuple(_RANK)


def format_name(fmt, op):
    if fmt is None:
        return "preserve_format"
    name = fmt.name if isinstance(fmt, MemoryFormat) else str(fmt).removeprefix("torch.")
    if name not in _NAMES:
        raise ValueError(f"{op}: memory_format must be one of {', '.join(_NAMES)}, got {fmt!r}")
    return name


class ChannelsLast(Function):
    """x's values in memory with dim 1 innermost (torch's channels_last strides)."""
    name = "channels_last"

    @staticmethod
    def forward(ctx, x):
        xp = np if isinstance(x, np.ndarray) else __import__("cupy").get_array_module(x)
        perm = (0,) + tuple(range(2, x.ndim)) + (1,)
        back = tuple(int(i) for i in np.argsort(perm))
        return xp.ascontiguousarray(x.transpose(perm)).transpose(back)

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):   # the same values: the tangent is laid out alike
        return ChannelsLast.apply(t)


def apply_memory_format(t, fmt, op, default="preserve_format"):
    """t in the layout `fmt` asks for (None: `default`)."""
    from .movement import contiguous
    name = default if fmt is None else format_name(fmt, op)
    if name == "preserve_format":
        return t
    if name == "contiguous_format":
        return contiguous(t)
    if t.ndim != _RANK[name]:
        raise OpError(f"{op}: memory_format={name} needs a {_RANK[name]}-d tensor, got shape "
                      f"{tuple(t.shape)}")
    return ChannelsLast.apply(t)
