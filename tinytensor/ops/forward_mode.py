"""Helpers the ops' forward-mode rules share (issue 27, core/forward_ad.py)."""
from ..core.forward_ad import live_levels
from ..core.grad_mode import STATE


def carries_tangent(t):
    """True when tensor t carries a tangent on an open jvp level. A fused op that gives no
    derivative for an input (a class weight, an attention mask) must then not be picked,
    exactly as when that input requires grad: its reference decomposition differentiates it."""
    return t is not None and bool(STATE.fw_levels) and bool(live_levels((t,), STATE.fw_levels))


def add(a, b):
    """a + b where either may be None (a zero tangent)."""
    if a is None:
        return b
    return a if b is None else a + b


def no_tangent(ctx, *tangents):
    """The jvp of an op whose outputs carry no tangent (integer indices, counts, masks,
    booleans): None for each output, so forward mode never takes the double-vjp fallback."""
    n = len(ctx.out_meta)
    return None if n == 1 else (None,) * n
