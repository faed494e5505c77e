"""In-place ops (`add_`, `mul_`, `zero_`, `fill_`, `copy_`, setitem) and their guards.

Without autograd involved an in-place op writes into the array and bumps the tensor's
version counter, which views share; a tensor saved for backward that has since changed
makes backward raise. With autograd involved, the op is recorded on a clone of the old
value and the result is written back, and the tensor takes the new node as its grad_fn.
"""

from ..core.forward_ad import live_levels
from ..core.grad_mode import STATE, no_grad
from ..core.tensor import Tensor
from ..overlap import TORCH_MESSAGE, array_overlaps
from .elementwise import add, as_tensor_like, clamp, clone, div, mul, sub, where
from .movement import expand


def apply_inplace(x, op, fn, *others, _key_tensors=()):
    """Run out-of-place `fn(x, *others)` and store the result into x in place."""
    # refused where it involves the step's values
    STATE.hooks.refuse_inplace(op, (x,) + others + tuple(_key_tensors))
    if STATE.fw_levels and live_levels([x] + [o for o in others if isinstance(o, Tensor)],
                                       STATE.fw_levels):
        _dual_guard(x, op)
    needs_graph = STATE.grad_enabled and (
        x.requires_grad or any(isinstance(o, Tensor) and o.requires_grad for o in others))
    if not needs_graph:
        with no_grad():
            out = fn(x, *others)
        _write(x, out, op)
        x._version[0] += 1
        x._fw = _tangents_of(out)
        return x
    if x.grad_fn is None and x.requires_grad:
        raise RuntimeError(
            f"{op}: a leaf tensor that requires grad (shape {tuple(x.shape)}) is being modified "
            "in place; wrap the update in `with tt.no_grad():` or use an out-of-place op")
    if x._base is not None or x._version[1]:
        raise RuntimeError(
            f"{op}: in-place modification of a tensor that shares memory with a view, while "
            "autograd records it, is not supported (its views would keep stale history); "
            "use an out-of-place op or .clone() first")
    out = fn(clone(x), *others)
    if any(out is o for o in others):
        # copy_/fill_ of a same-shape tensor hand back that tensor: x needs a node of its
        # own, else it would become a second leaf (w.grad never filled) or alias w's history
        out = clone(out)
    if x.requires_grad and not out.requires_grad:
        # the new value ignores the old one (zero_, fill_, copy_ of a constant): like torch,
        # x stays in the graph, and its history gets a zero gradient
        old = clone(x)
        out = where(Tensor._make(x.device.xp.zeros(x.shape, dtype=bool), x.device, False), old, out)
    _write(x, out, op)
    x._version[0] += 1
    x.grad_fn, x._out_index, x.requires_grad = out.grad_fn, out._out_index, out.requires_grad
    x._fw = _tangents_of(out)
    return x


def _dual_guard(x, op):
    """In-place on a tensor inside an open jvp level: x takes the result's tangent, which is
    right for x itself; a view or a base of views would keep a stale tangent, so refuse."""
    if x._base is not None or x._version[1]:
        raise RuntimeError(
            f"{op}: in-place modification of a tensor that shares memory with a view, inside "
            "tt.func.jvp (a forward-mode tangent is attached), is not supported: its views would "
            "keep a stale tangent; use an out-of-place op or .clone() first")


def _tangents_of(out):
    # the result's tangent dict, copied: x must not share later entries with `out`
    return dict(out._fw) if out._fw else None


def _write(x, out, op):
    if out.shape != x.shape:
        raise RuntimeError(f"{op}: the result has shape {tuple(out.shape)}, which does not match "
                           f"the in-place tensor's shape {tuple(x.shape)}")
    if out.dtype.category > x.dtype.category:
        raise RuntimeError(f"{op}: result type {out.dtype.name} cannot be cast to the in-place "
                           f"tensor's dtype {x.dtype.name}")
    if not getattr(x.data.flags, "writeable", True) or x.device.type != "cpu":
        if array_overlaps(x.data):  # an expand view, or memory imported so (CuPy has no flag)
            strides = tuple(s // x.data.itemsize for s in x.data.strides)
            raise RuntimeError(f"{op}: {TORCH_MESSAGE} (shape {tuple(x.shape)}, strides {strides})")
        if not getattr(x.data.flags, "writeable", True):
            raise RuntimeError(f"{op}: tensor of shape {tuple(x.shape)} is read-only memory (from "
                               "a read-only array, through tt.from_dlpack or a loader); clone() it "
                               "before modifying it in place")
    x.data[...] = out.data


def add_(x, other, alpha=None):
    return apply_inplace(x, "add_", lambda t, o: add(t, o, alpha=alpha), other)


def sub_(x, other, alpha=None):
    return apply_inplace(x, "sub_", lambda t, o: sub(t, o, alpha=alpha), other)


def mul_(x, other):
    return apply_inplace(x, "mul_", mul, other)


def div_(x, other):
    return apply_inplace(x, "div_", div, other)


def clamp_(x, min=None, max=None):
    return apply_inplace(x, "clamp_", lambda t: clamp(t, min, max))


def masked_fill_(x, mask, value):
    return apply_inplace(x, "masked_fill_", lambda t: t.masked_fill(mask, value))  # indexing lies above: via the method


def fill_(x, value):
    v = as_tensor_like(value, x) if not isinstance(value, Tensor) else value.to(x.dtype)
    return apply_inplace(x, "fill_", lambda t, val: expand(val, *t.shape), v)


def zero_(x):
    return fill_(x, 0)


def copy_(x, src):
    if not isinstance(src, Tensor):
        src = Tensor(src, device=x.device)
    if src.device is not x.device:
        src = src.to(x.device)
    src = src.to(x.dtype)
    return apply_inplace(x, "copy_", lambda t, s: expand(s, *t.shape), src)
