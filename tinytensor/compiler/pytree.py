"""The tensors inside a step's arguments and results: nested tuples, lists, dicts and
namedtuples (flatten, rebuild), the parameters of the Modules and optimizers among them,
and the ownership of arrays handed to the caller."""
from ..core.tensor import Tensor


def known_tensors(obj):
    """{id: (tensor, name)} of the parameters and buffers of every Module among the
    arguments, and of every optimizer's parameters (found by duck typing: tinytensor
    cannot import nn)."""
    out = {}
    for o in walk(obj):
        if hasattr(o, "named_parameters") and hasattr(o, "training"):
            for n, p in o.named_parameters():
                out.setdefault(id(p), (p, n))
            for n, b in (o.named_buffers() if hasattr(o, "named_buffers") else ()):
                if isinstance(b, Tensor):
                    out.setdefault(id(b), (b, n))
        elif hasattr(o, "param_groups"):
            for gi, group in enumerate(o.param_groups):
                for pi, p in enumerate(group["params"]):
                    out.setdefault(id(p), (p, p.name or f"param_groups[{gi}]['params'][{pi}]"))
    return out


def walk(obj):
    if isinstance(obj, (tuple, list)):
        for o in obj:
            yield from walk(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from walk(o)
    elif not isinstance(obj, Tensor):
        yield obj


def flatten_tensors(obj):
    """The tensors inside nested tuples, lists and dicts, in order."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in flatten_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in flatten_tensors(o)]
    return []


def rebuild(obj, tensors, leaf=None):
    """`obj` with its tensors (in flatten_tensors order) replaced by `tensors`, and each other
    leaf by leaf(it) when given (a size the step returned, at this call's sizes)."""
    it = iter(tensors)

    def go(o):
        if isinstance(o, Tensor):
            return next(it)
        if isinstance(o, tuple) and hasattr(o, "_fields"):  # namedtuple
            return type(o)(*[go(x) for x in o])
        if isinstance(o, (tuple, list)):
            return type(o)(go(x) for x in o)
        if isinstance(o, dict):
            new = type(o)()
            for k, x in o.items():
                new[k] = go(x)
            return new
        return o if leaf is None else leaf(o)
    return go(obj)


def owner(a):
    """The object that owns `a`'s memory (itself, or the base of its views)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def own(a, handed, inputs=frozenset()):
    """`a`, or a copy of it when it must not be handed to the caller as it is: a read-only
    broadcast view, memory already handed out (two .grads of one array) or an input's
    (`inputs`: the ids of the owners of the input arrays, `owner`). Checked by owner, not
    np.may_share_memory: a replay hands out ~100 arrays against ~300 inputs, and the pairwise
    check alone cost 7 ms of a 320 ms GPT-2-style step."""
    base = owner(a)
    if not getattr(a.flags, "writeable", True) or id(base) in handed or id(base) in inputs:
        a = a.copy()
        base = a
    handed.add(id(base))
    return a
