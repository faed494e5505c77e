"""Gradient clipping: clip_grad_norm_ and clip_grad_value_ on `.grad`, as torch.

The norms and the clipped gradients are computed with recorded ops (the norm of one
gradient is `_GradNorm`, its array code in forward), so `tt.compile` captures a step that
clips: the program recomputes them from each call's gradients. Eagerly each gradient
Tensor keeps its identity and gets a new, clipped array (see `_grads` for why); while
capturing, each parameter's `.grad` becomes the clipped tensor, which the program hands
back as that parameter's gradient (an optimizer step after it reads it).
"""
import math
import os

import numpy as np

import tinytensor as tt
from tinytensor.autograd import plain
from tinytensor.core.function import Function
from tinytensor.core.grad_mode import STATE
from tinytensor.device import xp_of as _xp

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters):
    """The distinct gradient Tensors of `parameters`.

    Their arrays are replaced, not written into: backward may hand out one array as the
    gradient of two parameters (of x and y in x + y), a read-only broadcast view (of x
    in x.sum()) or a view of the caller's own output gradient."""
    if isinstance(parameters, tt.Tensor):
        parameters = [parameters]
    grads, seen = [], set()
    for p in parameters:
        if p.grad is not None and id(p.grad) not in seen:
            seen.add(id(p.grad))
            grads.append(p.grad)
    return grads


class _GradNorm(Function):
    """The `norm_type` norm of all of an array's entries, as a 0-d array of its dtype."""
    name = "grad_norm"

    @staticmethod
    def forward(ctx, a, norm_type):
        xp = _xp(a)
        out = xp.asarray(_norm_value(xp, a.reshape(-1), norm_type))  # NumPy reduces to scalars
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def jvp(ctx, t):
        """A gradient that carries a tangent (forward-over-reverse inside tt.func.jvp): the
        norm's directional derivative, sum(|a|^(p-1) sign(a) t) / n^(p-1); for p = inf the
        mean of sign(a) t over the entries of largest |a|; 0 at a = 0 (as torch's norm)."""
        a, n = ctx.saved_tensor(0), ctx.saved_tensor(1)
        p = ctx.attrs["norm_type"]
        if a.numel() == 0:
            return None
        s = tt.sign(a) * t
        if p == math.inf:
            hit = (tt.abs(a) == n).to(a.dtype)
            return (s * hit).sum() / hit.sum()
        if p == 1.0:
            return s.sum()
        safe = tt.where(n == 0, 1.0, n)
        d = (tt.abs(a) ** (p - 1.0) * s).sum() / safe ** (p - 1.0)
        return tt.where(n == 0, 0.0, d)


def _norm_value(xp, a, norm_type):
    if a.size == 0:
        return xp.zeros((), dtype=a.dtype)
    if norm_type == math.inf:
        return xp.abs(a).max()
    if norm_type == 2.0:
        return xp.sqrt(xp.dot(a, a)) if a.dtype.kind == "f" else xp.linalg.norm(a)
    if norm_type == 1.0:
        return xp.abs(a).sum()
    return (xp.abs(a) ** norm_type).sum() ** (1.0 / norm_type)


def _set_grads(parameters, new):
    """Give each gradient its clipped value `new[id(old grad)]` (a tensor)."""
    if STATE.hooks.capturing:
        # the capture follows tensors, not arrays: the clipped tensor becomes the .grad
        params = [parameters] if isinstance(parameters, tt.Tensor) else parameters
        for p in params:
            if p.grad is not None and id(p.grad) in new:
                p.grad = new[id(p.grad)]
        return
    for g in _grads(parameters if isinstance(parameters, tt.Tensor) else list(parameters)):
        g.data = new[id(g)].data  # see _grads: never write into a gradient's array
        g._version[0] += 1


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all gradients together so that their joint `norm_type` norm is at most
    `max_norm`; returns the norm before clipping (a 0-d Tensor). `foreach` (torch's choice
    of kernel) is accepted and changes nothing: there is one implementation.

    The joint norm is the norm of the per-tensor norms. The scale is
    min(1, max_norm / (norm + 1e-6)), applied without a host round trip."""
    if isinstance(norm_type, str):
        if norm_type != "inf":
            raise ValueError(f"clip_grad_norm_: norm_type must be a number or 'inf', got "
                             f"{plain(norm_type)!r}")
        norm_type = math.inf
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive, got {norm_type}")
    if not isinstance(parameters, tt.Tensor):
        parameters = list(parameters)   # read twice (a generator of model.parameters())
    grads = _grads(parameters)
    if not grads:
        return tt.tensor(0.0)
    first = grads[0]
    hooks = STATE.hooks
    if error_if_nonfinite and hooks.capturing:
        hooks.fail(
            f"tt.compile: clip_grad_norm_(error_if_nonfinite=True) at "
            f"{hooks.where(skip=(os.path.dirname(os.path.abspath(__file__)),))} reads the "
            "gradients' norm into Python to decide whether to raise, which a compiled program "
            "cannot replay; pass error_if_nonfinite=False inside the compiled function (and "
            "check the returned norm outside it)")
    with tt.no_grad():
        # the joint norm lives on the first gradient's device, in the widest float dtype
        out_dtype = tt.dtypes.from_numpy_dtype(np.result_type(*[g.data.dtype for g in grads]))
        norms = tt.stack([_GradNorm.apply(g, norm_type=norm_type).to(first.device).to(out_dtype)
                          for g in grads])
        total = _GradNorm.apply(norms, norm_type=norm_type)
        if error_if_nonfinite and not bool(tt.isfinite(total)):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                               f"gradients of {len(grads)} tensor(s) is {float(total)}, so they "
                               "cannot be clipped; pass error_if_nonfinite=False to allow it")
        coef = tt.clamp(max_norm / (total + 1e-6), max=1.0)
        _set_grads(parameters, {id(g): g * coef.to(g.device).to(g.dtype) for g in grads})
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):  # foreach: as clip_grad_norm_
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    if not isinstance(parameters, tt.Tensor):
        parameters = list(parameters)
    with tt.no_grad():
        _set_grads(parameters, {id(g): tt.clamp(g, -clip_value, clip_value) for g in _grads(parameters)})
