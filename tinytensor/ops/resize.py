"""Tensor.resize_ and resize_as_: a new shape for a tensor in place, as torch.

The entries keep their order in memory (row-major): a smaller size keeps the first ones, a
larger size keeps them all and fills the new ones with zeros (torch leaves them
uninitialised; zeros make a result reproducible). Not differentiable, as in torch.
"""
import math

from ..core.grad_mode import STATE

__all__ = ["resize_", "resize_as_"]


def resize_(x, *size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise RuntimeError(f"resize_: sizes must be non-negative, got {size} for a tensor of "
                           f"shape {tuple(x.shape)}")
    if x.requires_grad:
        raise RuntimeError(f"resize_: cannot resize a tensor that requires grad (shape "
                           f"{tuple(x.shape)}); resize a detached copy instead")
    # a new shape for a traced value cannot be replayed
    STATE.hooks.refuse_inplace("resize_", (x,))
    if x._base is not None or x._version[1]:
        raise RuntimeError(f"resize_: tensor of shape {tuple(x.shape)} shares memory with a view; "
                           "resizing it would leave the view stale, clone() it first")
    xp = x.device.xp
    flat = x.data.reshape(-1)
    n = math.prod(size)
    if n > flat.size:
        flat = xp.concatenate([flat, xp.zeros(n - flat.size, dtype=flat.dtype)])
    x.data = flat[:n].reshape(size)   # a contiguous prefix: still x's memory when it shrinks
    x._version[0] += 1
    return x


def resize_as_(x, other):
    return resize_(x, tuple(other.shape))
