"""Guards: the signature a program was captured under. A call whose signature differs runs
a new capture; each part carries a label, so a recompilation can say what changed
("arg 0 shape (4, 16) -> (4, 17)").

Parts: for each tensor argument its shape, dtype, device and requires_grad; Python scalars
and strings by value; for each Module argument the training flag of every submodule and
the identity, shape, dtype and requires_grad of every parameter and buffer; for every
parameter (of Module and optimizer arguments, and leaves an earlier capture found) whether
its .grad is None (an eager backward adds into an existing one), unless the step clears it
first (opt.zero_grad() inside); for each optimizer the options of every parameter group
but the learning rate (betas, eps, weight decay, ... are baked into a captured update; the
learning rate is a program input, so a schedule does not recompile); the grad mode, the
fused kernel switch and the default dtype, which decide what the ops record.
"""
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..dtypes import get_default_dtype
from ..kernels import fusion
from ..messages import plain

_SCALARS = (bool, int, float, str, type(None))


def signature(args, kwargs, extra=(), cleared=frozenset(), labels=None):
    """[(label, value)] for a call; equal value tuples replay the same program.

    `cleared`: ids of parameters whose .grad the step clears before reading it, left out.
    `labels`, a dict, receives id(parameter) -> [labels of its .grad parts]."""
    parts = []
    grads = _Grads(parts, cleared, {} if labels is None else labels)
    for i, a in enumerate(args):
        _parts(parts, f"arg {i}", a, grads)
    for k, a in kwargs.items():
        _parts(parts, f"argument {k!r}", a, grads)
    for n, p in enumerate(extra):
        grads(f"leaf {p.name or n} .grad", p)
    parts.append(("grad mode", STATE.grad_enabled))
    parts.append(("fused kernels", tuple(fusion.enabled(f) for f in fusion.FAMILIES)))
    parts.append(("default dtype", get_default_dtype().name))
    ac = STATE.autocast  # the casts autocast inserts are baked into the captured program
    parts.append(("autocast", None if ac is None else (ac.device_type, ac.dtype.name)))
    return parts


def key(parts):
    return tuple(v for _, v in parts)


def changed(old, new):
    """What differs between two signatures, as 'label old -> new' (the first few)."""
    before = dict(old)
    diffs = [f"{label} {_show(before.get(label))} -> {_show(v)}" for label, v in new
             if before.get(label, _MISSING) != v]
    gone = [label for label, _ in old if label not in dict(new)]
    diffs += [f"{label} is gone" for label in gone]
    return "; ".join(diffs[:3]) or "nothing visible (an object argument's identity?)"


_MISSING = object()


def _show(v):
    return repr(plain(v))


class _Grads:
    """Adds the `.grad` part of a parameter, unless the step clears that .grad first."""

    def __init__(self, parts, cleared, labels):
        self.parts, self.cleared, self.labels = parts, cleared, labels

    def __call__(self, label, p):
        if id(p) not in self.cleared:
            self.parts.append((label, _grad_state(p)))
            self.labels.setdefault(id(p), []).append(label)


# optimizer options a captured update bakes in; the learning rate is read at each call
_READ_EACH_CALL = ("params", "lr", "initial_lr", "name")


def _parts(parts, label, a, grads):
    if isinstance(a, Tensor):
        parts += [(f"{label} shape", tuple(a.shape)), (f"{label} dtype", a.dtype.name),
                  (f"{label} device", str(a.device)), (f"{label} requires_grad", a.requires_grad)]
    elif isinstance(a, _SCALARS):
        parts.append((f"{label} value", (type(a).__name__, a)))
    elif isinstance(a, (tuple, list)):
        parts.append((f"{label} length", len(a)))
        for j, x in enumerate(a):
            _parts(parts, f"{label}[{j}]", x, grads)
    elif isinstance(a, dict):
        parts.append((f"{label} keys", tuple(a)))
        for k, x in a.items():
            _parts(parts, f"{label}[{k!r}]", x, grads)
    elif hasattr(a, "named_parameters") and hasattr(a, "training"):  # an nn.Module
        parts.append((f"{label} training flags", tuple(m.training for m in a.modules())))
        tensors = list(a.named_parameters())
        if hasattr(a, "named_buffers"):
            tensors += [(n, b) for n, b in a.named_buffers() if isinstance(b, Tensor)]
        for n, p in tensors:
            parts.append((f"{label} {n}", (id(p), tuple(p.shape), p.dtype.name, p.requires_grad)))
            if p.requires_grad:
                grads(f"{label} {n}.grad", p)
    elif hasattr(a, "param_groups"):  # an optimizer
        for gi, group in enumerate(a.param_groups):
            options = tuple((k, v if isinstance(v, _SCALARS + (tuple,)) else repr(v))
                            for k, v in group.items() if k not in _READ_EACH_CALL)
            parts.append((f"{label} param_groups[{gi}] options", options))
            for pi, p in enumerate(group["params"]):
                where = f"{label} param_groups[{gi}]['params'][{pi}]"
                parts.append((where, (id(p), tuple(p.shape), p.dtype.name)))
                grads(f"{where}.grad", p)
    else:
        parts.append((f"{label} object", (type(a).__name__, id(a))))


def _grad_state(p):
    g = p.grad
    return None if g is None else (tuple(g.shape), g.dtype.name)
