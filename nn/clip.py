"""Gradient clipping: clip_grad_norm_ and clip_grad_value_ on `.grad`, as torch.

Like an optimizer step these act on gradient arrays outside the tape; each gradient
Tensor keeps its identity and gets a new, clipped array (see `_grads` for why).
"""
import math

import numpy as np

import tinytensor as tt
from tinytensor.autograd import plain
from tinytensor.device import device_of_array, to_device_array

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


def _xp(a):
    return np if isinstance(a, np.ndarray) else device_of_array(a).xp


def _norm(xp, a, norm_type):
    return xp.asarray(_norm_value(xp, a.reshape(-1), norm_type))  # NumPy reduces to scalars


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


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their joint `norm_type` norm is at most
    `max_norm`; returns the norm before clipping (a 0-d Tensor).

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
    grads = _grads(parameters)
    if not grads:
        return tt.tensor(0.0)
    first = grads[0]
    xp = first.device.xp
    # the joint norm lives on the first gradient's device, in the widest float dtype
    out_dtype = np.result_type(*[g.data.dtype for g in grads])
    norms = xp.stack([to_device_array(_norm(_xp(g.data), g.data, norm_type), first.device)
                      .astype(out_dtype) for g in grads])
    total = _norm(xp, norms, norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                           f"gradients of {len(grads)} tensor(s) is {float(total)}, so they "
                           "cannot be clipped; pass error_if_nonfinite=False to allow it")
    coef = xp.asarray(xp.minimum(max_norm / (total + 1e-6), 1.0))
    for g in grads:
        c = to_device_array(coef, g.device).astype(g.data.dtype)
        g.data = g.data * c  # see _grads: never write into a gradient's array
        g._version[0] += 1
    return tt.Tensor._make(total, first.device, False)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.data = _xp(g.data).clip(g.data, -clip_value, clip_value)
        g._version[0] += 1
