"""A user's own op, as a test of the transforms meets it: a Function with a backward and
nothing else (no jvp rule, no batching rule), so forward mode falls back to the double-vjp
identity and vmap to the per-example loop."""
import tinytensor as tt


class Cube(tt.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x
