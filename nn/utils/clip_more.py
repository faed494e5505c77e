"""get_total_norm and clip_grads_with_norm_: the two halves of clip_grad_norm_ (torch
2.6's split), here written over nn/clip.py's recorded norm."""
import math

import tinytensor as tt

from ..clip import _GradNorm, _set_grads, _grads


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The `norm_type` norm of the norms of `tensors` (the tensors themselves, not their
    .grad); a 0-d tensor."""
    tensors = [tensors] if isinstance(tensors, tt.Tensor) else list(tensors)
    norm_type = math.inf if norm_type in ("inf", math.inf) else float(norm_type)
    if not tensors:
        return tt.tensor(0.0)
    with tt.no_grad():
        first = tensors[0]
        norms = tt.stack([_GradNorm.apply(t.detach(), norm_type=norm_type).to(first.device)
                          for t in tensors])
        total = _GradNorm.apply(norms, norm_type=norm_type)
    if error_if_nonfinite and not bool(tt.isfinite(total)):
        raise RuntimeError(f"get_total_norm: the total norm of order {norm_type} of {len(tensors)} "
                           f"tensor(s) is {float(total)}; pass error_if_nonfinite=False to allow it")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by min(1, max_norm / (total_norm + 1e-6)), as clip_grad_norm_
    does after computing total_norm."""
    if not isinstance(parameters, tt.Tensor):
        parameters = list(parameters)
    grads = _grads(parameters)
    if not grads:
        return
    with tt.no_grad():
        coef = tt.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        _set_grads(parameters, {id(g): g * coef.to(g.device).to(g.dtype) for g in grads})
