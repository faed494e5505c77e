"""`Function`: the contract every differentiable op follows, built-in or user-written.

    class Cube(tt.Function):
        @staticmethod
        def forward(ctx, x):            # x is a raw array (numpy or cupy)
            ctx.save_for_backward(x)
            return x ** 3
        @staticmethod
        def backward(ctx, grad):        # grad is a Tensor; use tinytensor ops here
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    y = Cube.apply(x)

Positional arguments to `apply` are Tensors; keyword arguments are attributes, passed to
forward as keywords, recorded on the tape and shown in graphs. `backward` returns one
gradient (or None) per positional input. Because backward is written in tinytensor ops,
`create_graph=True` makes the gradient itself differentiable. Saving an input or an
output keeps its place in the graph; any other saved array is a constant.

An op may also define `backward_arrays(ctx, *grad_arrays)`: the same first-order
gradient on raw arrays (returning arrays or None), read from `ctx.saved_arrays` /
`ctx.saved_array(k)`. The engine calls it instead of `backward` when no graph of the
gradient is built (no `create_graph`), so no Tensor is made and no op is recorded;
`backward` still serves `create_graph` and the compiler. Ops never look at the grad
mode themselves. A `backward_arrays` that serves only some calls (NumPy arrays, say) returns
`NotImplemented` for the others, and the engine runs `backward` on Tensors for them.
"""
import re

from numpy import may_share_memory as _may_share, ndarray as _ndarray

from ..device import array_context, device_of_array
from ..dtypes import _BY_NUMPY, from_numpy_dtype, is_floating_np
from ..messages import OpError
from .forward_ad import live_levels, push_tangents, saved_tangents
from .grad_mode import STATE, check_anomaly
from .node import Node
from .tensor import Tensor


# modules whose Functions are refused complex inputs unless registered (ops/complex_rules.py)
# (tinytensor.nn and tinytensor.models included; the tools' programs are users like any other)
_BUILT_IN = "tinytensor."
_USER = "tinytensor.tools."


# tt.func.vmap's two entry points (func/batching.py fills them in when it is imported):
# (inputs holding a batched tensor, inputs that need grad or no inputs inside vmap)
BATCHING = [None, None]


def arrays_serve(g):
    """Whether a `backward_arrays` that runs its `backward`'s ops' forwards straight on the
    arrays serves this call (else it returns NotImplemented): a NumPy gradient (a CuPy op
    allocates on the device that apply makes current first) and no record() open (its tape
    shows those ops, as it did before they had a fast form)."""
    return g.__class__ is _ndarray and not STATE.tapes


class _Ctx:
    """The ctx handed to forward when no graph is recorded: saving is a no-op."""
    records = False   # a forward may skip work only its backward would read

    def save_for_backward(self, *arrays):
        pass

    def mark_non_differentiable(self, *arrays):
        pass


class Function:
    is_view = False   # True when output 0 may share memory with input 0 (reshape, transpose, ...)
    name = None       # op name on the tape; defaults to the lower-case class name
    # An op whose one result is a fresh C-contiguous array may also define
    # `forward_into(out, *arrays, **attrs)`: forward's result written into `out` (that shape
    # and dtype) and returned. The compiler's C runner then computes it into its arena, as
    # it does matmuls, instead of allocating (and page-faulting) a new array per call.
    forward_into = None
    # complex inputs (issue 23, ops/complex_rules.py): None refuses them by name (the safe
    # default for built-in ops not checked against torch); "holomorphic": backward is the
    # real formula, and the engine turns it into torch's conjugate convention by conjugating
    # the incoming and outgoing gradients; "own": forward and backward handle complex
    complex_rule = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "complex_rule" not in cls.__dict__ and (not cls.__module__.startswith(_BUILT_IN)
                                              or cls.__module__.startswith(_USER)):
            cls.complex_rule = "own"  # a user's Function: its own business, as in torch
        if "name" not in cls.__dict__:  # LeakyRelu -> leaky_relu
            cls.name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).lower()

    @staticmethod
    def forward(ctx, *arrays, **attrs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    backward_arrays = None  # optional: staticmethod(ctx, *grad_arrays) -> arrays, first order only
    # optional forward mode (issue 27, core/forward_ad.py): staticmethod(ctx, *tangents) ->
    # the output tangent(s); tangents[i] is input i's tangent Tensor or None, the result is
    # computed in tinytensor ops from ctx.saved_tensor(k) / ctx.attrs (None: a zero tangent).
    # Without it, jvp falls back to the double-vjp identity through backward.
    jvp = None
    # a multi-output op's outputs that got no gradient reach backward as zeros; False: as None
    # (a compiled call, whose backward must leave their terms out, compiler/absent.py)
    materialize_grads = True

    @classmethod
    def apply(cls, *inputs, **attrs):
        device = None
        needs_grad = False
        arrays = []
        # read once per call, not per input (complex_rules.py sets it after the class is made);
        # most hot ops take complex, and then no input's dtype is looked at here
        refuse_complex = cls.complex_rule is None
        for t in inputs:
            if t.__class__ is not Tensor:
                if not isinstance(t, Tensor):
                    raise TypeError(f"{cls.name}: positional inputs must be Tensors, got "
                                    f"{type(t).__name__}; pass non-tensor arguments as keywords")
                if t._level is not None:  # a tt.func.vmap batched tensor: its batching rule
                    return BATCHING[0](cls, inputs, attrs)
            if device is None:
                device = t._device
            elif t._device is not device:
                _device_mismatch(cls.name, inputs)
            if t.requires_grad:
                needs_grad = True
            a = t.data
            if refuse_complex and a.dtype.kind == "c":
                _complex_refused(cls.name, inputs)
            arrays.append(a)
        state = STATE
        if state.vmap and (needs_grad or not inputs or state.fw_levels):
            # inside tt.func.vmap: a tensor that requires grad joins the batch (so a gradient
            # taken inside vmap is per example), a random op draws per randomness=
            out = BATCHING[1](cls, inputs, attrs)
            if out is not None:
                return out
        grad_on = needs_grad and state.grad_enabled
        # forward mode: one check of the open levels when none is open (the usual case)
        dual = state.fw_levels and live_levels(inputs, state.fw_levels)
        track = grad_on or state.tapes or state.anomaly or dual
        ctx = Node(cls, cls.name, attrs) if track else _Ctx()
        hooks = state.hooks
        if hooks.symbolic:
            # tt.compile(dynamic=True): the node keeps the size formulas, NumPy gets numbers
            attrs = hooks.numbers(attrs)
        try:
            if device is None or device.type == "cpu":
                out = cls.forward(ctx, *arrays, **attrs)
            else:
                with array_context(device):
                    out = cls.forward(ctx, *arrays, **attrs)
        except ValueError as e:  # e.g. NumPy's broadcast error: say which op, shapes, module
            err = _forward_error(cls.name, arrays, e)
            if err is e:
                raise
            raise err from e
        if hooks.capturing and (any(a.dtype.kind == "c" for a in arrays) or any(
                a.dtype.kind == "c" for a in (out if out.__class__ is tuple else (out,)))):
            hooks.refuse_complex(cls.name, list(arrays) + list(out if out.__class__ is tuple else (out,)))
        make = Tensor._make
        if out.__class__ is not tuple:
            if device is None:
                device = device_of_array(out)
            r = make(out, device, grad_on and (out.dtype.kind in "fc" or is_floating_np(out.dtype)))
            results = [r]
            outs = (out,)
        else:
            outs = out
            if device is None:
                device = device_of_array(outs[0])
            results = [make(a, device, grad_on and (a.dtype.kind in "fc" or is_floating_np(a.dtype)))
                       for a in outs]  # the second test only for non-NumPy floats (bfloat16)
        # a view op shares the version counter only when it really returned a view (reshape
        # of a non-contiguous array copies); CuPy arrays are taken as views, conservatively
        if cls.is_view and inputs and (device.type != "cpu" or _may_share(arrays[0], outs[0])):
            src = inputs[0]
            results[0]._version = src._version
            src._version[1] = True  # the base now has views: in-place with autograd is refused
            results[0]._base = src._base if src._base is not None else src
        if track:
            if dual:
                nd = ctx.non_differentiable
                for r, a in zip(results, outs):
                    if (a.dtype.kind in "fc" or is_floating_np(a.dtype)) and not (
                            nd and any(a is n for n in nd)):
                        r._fw = {}
            _finish_node(ctx, inputs, arrays, outs, results, grad_on, device, dual)
            if dual:
                push_tangents(cls, ctx, inputs, results, dual)
        return results[0] if out.__class__ is not tuple else tuple(results)


def _finish_node(node, inputs, arrays, outs, results, grad_on, device, dual=()):
    meta = _BY_NUMPY
    node.out_meta = [(a.shape, meta.get(a.dtype) or from_numpy_dtype(a.dtype), device) for a in outs]
    in_meta = []
    edges = []
    needs = []
    for t in inputs:
        a = t.data
        in_meta.append((a.shape, meta.get(a.dtype) or from_numpy_dtype(a.dtype), device))
        if t.requires_grad and grad_on:
            edges.append(t if t.grad_fn is None else (t.grad_fn, t._out_index))
            needs.append(True)
        else:
            edges.append(None)
            needs.append(False)
    node.in_meta = in_meta
    state = STATE
    if state.anomaly:
        check_anomaly(node, outs, "forward")
    if state.tapes:
        node.inputs = inputs
        for tape in state.tapes:
            tape.add(node, results)
    if dual and node.to_save:   # the jvp rule reads what forward saved, with their tangents
        saved_tangents(node, node.to_save, inputs, arrays, outs, results)
    if not grad_on:
        if dual:
            node.needs_input_grad = [False] * len(inputs)
            node.saved = [_save(node, a, inputs, arrays, outs, results, device)
                          for a in node.to_save] if node.to_save else ()
        node.to_save = None
        return
    node.edges = edges
    node.needs_input_grad = needs
    if node.non_differentiable:
        for r, a in zip(results, outs):
            if any(a is nd for nd in node.non_differentiable):
                r.requires_grad = False
    if len(results) == 1:
        r = results[0]
        if r.requires_grad:
            r.grad_fn = node
    else:
        for i, r in enumerate(results):
            if r.requires_grad:
                r.grad_fn = node
                r._out_index = i
    to_save = node.to_save
    if to_save:
        node.saved = [_save(node, a, inputs, arrays, outs, results, device) for a in to_save]
        node.to_save = None
    else:
        node.saved = ()


def _save(node, a, inputs, arrays, outs, results, device):
    """The saved-tensor tuple of array `a` (laid out as core/node.py's SAVED_* say)."""
    if isinstance(a, Tensor):  # allow saving a Tensor directly
        src = a
    else:
        src = None
        for t, arr in zip(inputs, arrays):
            if arr is a:
                src = t
                break
        else:
            for r, arr in zip(results, outs):
                if arr is a:
                    src = r
                    break
    if src is None:  # an intermediate array: a constant for backward
        return (a, None, None, None, 0, False, device)
    if src.grad_fn is None and src.requires_grad:  # a leaf: keep the tensor itself
        return (src.data, None, src, src._version, src._version[0], True, device)
    edge = None
    if src.grad_fn is not None:
        # an output of this very node is stored as (None, index): no reference cycle
        edge = (None if src.grad_fn is node else src.grad_fn, src._out_index)
    return (src.data, edge, None, src._version, src._version[0], src.requires_grad, device)


def _forward_error(name, arrays, e):
    msg = str(e)
    if msg.startswith(f"{name}:"):
        return e
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
    where = f" in {STATE.scope_path}" if STATE.scope_path else ""
    return OpError(f"{name}: {msg.strip()} (input shapes {shapes}){where}")


def _complex_refused(name, inputs):
    desc = ", ".join(f"{tuple(t.shape)} {t.dtype.name}" for t in inputs)
    where = f" in {STATE.scope_path}" if STATE.scope_path else ""
    raise TypeError(f"{name}: complex tensors are not supported by this op (inputs {desc}){where}; "
                    "torch either refuses them too (ordering, max/min, clamp) or tinytensor has "
                    "not checked it against torch for complex yet: take .real/.imag/.abs() first")


def _device_mismatch(name, inputs):
    desc = ", ".join(f"{tuple(t.shape)} on {t._device}" for t in inputs)
    where = f" in {STATE.scope_path}" if STATE.scope_path else ""
    raise RuntimeError(f"{name}: expected all tensors on one device, got {desc}{where}; "
                       "move them with .to(device)")
