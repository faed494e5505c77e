"""`nn.recompute(fn, *args)`: activation checkpointing, the job of torch.utils.checkpoint
(named so that `nn.checkpoint` stays the checkpoint *files*).

Forward runs `fn` under no_grad and keeps only its inputs; backward reruns `fn` with grad
enabled on detached copies of them, with the random generators (the CPU's and each input
device's) set back to where they were for the forward (so dropout draws the same masks),
backpropagates through that graph and hands the inputs' gradients on. Memory: one block's activations at a time instead of all of
them, for one extra forward per recomputed call.

As torch's reentrant checkpoint: parameters used inside `fn` get their gradient
accumulated into `.grad` during the replay, so use `loss.backward()`, not `tt.grad(loss,
params)`; double backward (`create_graph=True`) and `tt.compile` are not supported.
"""
import contextlib

import tinytensor as tt
from tinytensor import Tensor
from tinytensor.autograd import Function, run_backward
from tinytensor.random import generator, get_rng_state, set_rng_state


def recompute(fn, *args, preserve_rng_state=True):
    """`fn(*args)`, its activations recomputed in backward instead of kept. Tensors among
    `args` are differentiated; other arguments are passed through as they are."""
    if not callable(fn):
        raise TypeError(f"nn.recompute: fn must be callable, got {type(fn).__name__}")
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not tt.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return fn(*args)  # no graph would be kept anyway (and params alone get their grads plainly)
    plan = _Plan(fn, args, _rng_states(tensors) if preserve_rng_state else None)
    return _Recompute.apply(*tensors, fn=plan)


class _Plan:
    """What backward needs besides the saved inputs; its repr names fn in graphs."""

    def __init__(self, fn, args, rng):
        self.fn, self.rng = fn, rng
        self.slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.others = [None if isinstance(a, Tensor) else a for a in args]

    def __call__(self, tensors):
        args = list(self.others)
        for i, t in zip(self.slots, tensors):
            args[i] = t
        out = self.fn(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if not outs or not all(isinstance(o, Tensor) for o in outs):
            bad = next((o for o in outs if not isinstance(o, Tensor)), out)
            raise TypeError(f"nn.recompute: fn must return a Tensor or a tuple of Tensors, got "
                            f"{type(bad).__name__}")
        return outs

    def __repr__(self):
        return getattr(self.fn, "__qualname__", type(self.fn).__name__)


class _Recompute(Function):
    name = "recompute"

    @staticmethod
    def forward(ctx, *arrays, fn):
        ctx.save_for_backward(*arrays)  # the inputs only: the activations inside are not kept
        with tt.no_grad():
            outs = fn([tt.as_tensor(a) for a in arrays])
        return outs[0].data if len(outs) == 1 else tuple(o.data for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        if tt.is_grad_enabled():  # the engine enables grad in backward only for create_graph
            raise NotImplementedError("nn.recompute: differentiating through a recomputed call "
                                      "again (create_graph=True, tt.compile) is not supported")
        plan = ctx.attrs["fn"]
        inputs = [t.detach().requires_grad_(need)
                  for t, need in zip(ctx.saved_tensors, ctx.needs_input_grad)]
        with _replayed(plan.rng), tt.enable_grad():
            outs = plan(inputs)
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
        if pairs:
            run_backward([o for o, _ in pairs], [g for _, g in pairs], False, False)
        return tuple(t.grad if need else None for t, need in zip(inputs, ctx.needs_input_grad))

    @staticmethod
    def jvp(ctx, *tangents):
        """forward ran fn under no_grad, where no tangent flows: rerun it (generators set back,
        as backward does) in a jvp of its own over the saved inputs, which still carry the
        outer levels' tangents. One extra forward, as backward's replay."""
        from tinytensor.func import jvp
        plan = ctx.attrs["fn"]
        inputs = ctx.saved_tensors
        ts = tuple(t if t is not None else tt.zeros_like(x) for t, x in zip(tangents, inputs))
        with _replayed(plan.rng):
            _, touts = jvp(lambda *xs: plan(list(xs)), tuple(inputs), ts)
        return touts


def _rng_states(tensors):
    """The generator and its state of the CPU and of each device among the inputs."""
    devices = {tt.device("cpu")} | {t.device for t in tensors}
    return {dev: (generator(dev), get_rng_state(dev)) for dev in devices}


@contextlib.contextmanager
def _replayed(states):
    """The generators as they were at the forward, put back to where they are now afterwards,
    so the replay does not shift the draws of later code."""
    if states is None:
        yield
        return
    now = {}
    for dev, (g, state) in states.items():
        if generator(dev) is not g:
            raise RuntimeError("nn.recompute: tt.manual_seed was called between the forward and "
                               "the backward of a recomputed call, so its dropout masks cannot "
                               "be replayed")
        now[dev] = get_rng_state(dev)
        set_rng_state(dev, state)
    try:
        yield
    finally:
        for dev, state in now.items():
            set_rng_state(dev, state)
