"""Random draws as recorded ops.

A mask drawn on the host and multiplied in as a constant would be frozen by anything that
replays the tape (the compiler): the draw itself must be an op. `DropoutMask` has no tensor
inputs and draws from tinytensor's generator of its device each time its forward runs, so a
replay draws the same numbers eager would, in the same order: same seed, same result.
Passes read `Function.random` to never merge, fold or drop such an op.
"""
from ..core.function import Function
from ..random import uniform
from .forward_mode import no_tangent


class DropoutMask(Function):
    random = True

    @staticmethod
    def forward(ctx, shape, dtype, device, p):
        keep = uniform(device, shape, dtype) >= p
        return (keep * (1.0 / (1.0 - p))).astype(dtype.np)

    @staticmethod
    def backward(ctx):  # no tensor inputs: nothing to differentiate
        return ()

    jvp = staticmethod(no_tangent)   # never called (no tensor input carries a tangent): complete


def dropout_mask(x, p):
    """0 with probability p, else 1/(1-p), of x's shape, dtype and device."""
    return DropoutMask.apply(shape=tuple(x.shape), dtype=x.dtype, device=x.device, p=float(p))
