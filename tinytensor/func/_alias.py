"""The identity op the transforms wrap their inputs in: a new Tensor object on the same data,
connected to the original on the tape, that carries the transform's own tangent or gradient
without touching the caller's tensor."""
from ..core.function import Function


class Alias(Function):
    complex_rule = "own"   # the identity is the identity on complex numbers too
    # a NumPy view (a new array object on the same memory): forward's arrays stay told apart
    # from their inputs by identity, which is how saved tensors are found
    @staticmethod
    def forward(ctx, x):
        return x.view()

    backward = jvp = staticmethod(lambda ctx, g: g)   # the identity's gradient and tangent


def alias(x):
    return Alias.apply(x)
