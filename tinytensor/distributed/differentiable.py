"""`all_reduce_sum`: a collective on the tape, for statistics that several ranks share
(SyncBatchNorm's mean and variance).

The collectives in collectives.py work in place outside autograd. Here the sum over ranks
is an op: forward returns a new tensor holding the sum of every rank's input, and since
every rank's loss depends on that sum, the gradient of the sum of the ranks' losses with
respect to one rank's input is the sum over ranks of the upstream gradients, which
backward computes with the same op (so it is differentiable again). Every rank must run
the same forward and backward, as with any collective. tt.compile does not capture
collectives: under capture it refuses by name.
"""
from ..core.function import Function
from ..core.grad_mode import STATE
from .collectives import _agree
from .process_group import ReduceOp, group


class AllReduceSum(Function):
    name = "all_reduce_sum"

    @staticmethod
    def forward(ctx, a):
        g = group()
        _agree(g, "all_reduce_sum", ReduceOp.SUM, [(tuple(a.shape), str(a.dtype))])
        buf = a.copy()   # C-contiguous (NumPy's and CuPy's default order), ours to overwrite
        g.allreduce(buf, ReduceOp.SUM)
        return buf

    @staticmethod
    def backward(ctx, g):
        return AllReduceSum.apply(g)

    @staticmethod
    def jvp(ctx, t):   # linear: the tangents summed over the ranks alike
        return AllReduceSum.apply(t)


def all_reduce_sum(t, op_name="all_reduce_sum"):
    """The sum of `t` over every rank, as a recorded differentiable op."""
    hooks = STATE.hooks
    if hooks.capturing:
        hooks.fail(f"tt.compile: {hooks.fn_name}: {op_name} runs a collective over the "
                   f"ranks (at {hooks.where()}); collectives are not captured: call it "
                   "outside the compiled function")
    return AllReduceSum.apply(t)
