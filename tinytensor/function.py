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
"""
from .autograd import STATE, Node, SavedTensor, check_anomaly
from .device import array_context


class _Ctx:
    """The ctx handed to forward when no graph is recorded: saving is a no-op."""

    def save_for_backward(self, *arrays):
        pass

    def mark_non_differentiable(self, *arrays):
        pass


class Function:
    is_view = False   # True when output 0 may share memory with input 0 (reshape, transpose, ...)
    name = None       # op name on the tape; defaults to the lower-case class name

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__.lower()

    @staticmethod
    def forward(ctx, *arrays, **attrs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **attrs):
        from .tensor import Tensor
        device = None
        needs_grad = False
        arrays = []
        for t in inputs:
            if type(t) is not Tensor and not isinstance(t, Tensor):
                raise TypeError(f"{cls.name}: positional inputs must be Tensors, got "
                                f"{type(t).__name__}; pass non-tensor arguments as keywords")
            if device is None:
                device = t._device
            elif t._device is not device:
                _device_mismatch(cls.name, inputs)
            if t.requires_grad:
                needs_grad = True
            arrays.append(t.data)
        grad_on = needs_grad and STATE.grad_enabled
        track = grad_on or STATE.tapes or STATE.anomaly
        ctx = Node(cls, cls.name, attrs) if track else _Ctx()
        if device is None or device.type == "cpu":
            out = cls.forward(ctx, *arrays, **attrs)
        else:
            with array_context(device):
                out = cls.forward(ctx, *arrays, **attrs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if device is None:
            from .device import device_of_array
            device = device_of_array(outs[0])
        results = []
        for a in outs:
            t = Tensor._make(a, device, grad_on and a.dtype.kind == "f")
            results.append(t)
        if cls.is_view and inputs:
            src = inputs[0]
            results[0]._version = src._version
            src._version[1] = True  # the base now has views: in-place with autograd is refused
            results[0]._base = src._base if src._base is not None else src
        if track:
            _finish_node(ctx, cls, inputs, arrays, outs, results, grad_on, device)
        return results[0] if single else tuple(results)


def _finish_node(node, cls, inputs, arrays, outs, results, grad_on, device):
    node.in_meta = tuple((t.data.shape, t.dtype, device) for t in inputs)
    node.out_meta = tuple((r.data.shape, r.dtype, device) for r in results)
    if STATE.anomaly:
        check_anomaly(node, outs, "forward")
    if STATE.tapes:
        node.inputs = inputs
        for tape in STATE.tapes:
            tape.nodes.append(node)
    if not grad_on:
        node.to_save = None
        return
    node.edges = tuple(
        None if not t.requires_grad else ((t.grad_fn, t._out_index) if t.grad_fn is not None else t)
        for t in inputs)
    node.needs_input_grad = tuple(e is not None for e in node.edges)
    if node.non_differentiable:
        for r, a in zip(results, outs):
            if any(a is nd for nd in node.non_differentiable):
                r.requires_grad = False
    for i, r in enumerate(results):
        if r.requires_grad:
            r.grad_fn = node
            r._out_index = i
    saved = []
    for k, a in enumerate(node.to_save or ()):
        saved.append(_save(node, k, a, inputs, arrays, outs, results, device))
    node.saved = saved
    node.to_save = None


def _save(node, k, a, inputs, arrays, outs, results, device):
    from .tensor import Tensor
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
        return SavedTensor(a, None, None, None, False, device, k)
    if src.grad_fn is None and src.requires_grad:  # a leaf: keep the tensor itself
        return SavedTensor(src.data, None, src, src._version, True, device, k)
    edge = None
    if src.grad_fn is not None:
        # an output of this very node is stored as (None, index): no reference cycle
        edge = (None if src.grad_fn is node else src.grad_fn, src._out_index)
    return SavedTensor(src.data, edge, None, src._version, src.requires_grad, device, k)


def _device_mismatch(name, inputs):
    desc = ", ".join(f"{tuple(t.shape)} on {t._device}" for t in inputs)
    from .autograd import STATE as S
    where = f" in {S.scope_path}" if S.scope_path else ""
    raise RuntimeError(f"{name}: expected all tensors on one device, got {desc}{where}; "
                       "move them with .to(device)")
