"""State objects: plain Python objects among a compiled function's arguments that hold
tensors, such as a KV cache (models.DecoderCache -> [nn.KVCache] -> .key, .value).

A step may read those tensors and store new ones in their place (a cache appending this
token's keys). The capture makes each tensor it finds in a slot an input of the program,
and each slot the step filled with a new tensor (or emptied) an output that a replay stores
back into the same slot of the object the call was given. So a compiled decoder with a
cache replays its whole step, the cache update included, and with dynamic=True one program
serves every cache length.

A slot is an attribute of an object or an item of a list/tuple/dict an object holds, found
by walking (a few levels deep) what the arguments hold; Modules, optimizers and tensors
themselves are not state objects. A slot's path is relative to the arguments, so a later
call with another object of the same layout (the next generate() call's new cache) replays
the same program. Python numbers and strings in those objects are part of the signature.
"""
from ..core.tensor import Tensor

DEPTH = 4
_SCALARS = (bool, int, float, str, type(None))


def is_state_object(o):
    return (hasattr(o, "__dict__") and not isinstance(o, (Tensor, type))
            and not (hasattr(o, "named_parameters") and hasattr(o, "training"))
            and not hasattr(o, "param_groups") and not callable(o))


def _reach(args, kwargs):
    """(path, item) of every argument and of everything inside their tuples, lists and
    dicts (not inside other objects): where a call's tensors and state objects sit."""
    def go(a, path):
        if isinstance(a, (tuple, list)):
            for j, x in enumerate(a):
                yield from go(x, path + (("item", j),))
        elif isinstance(a, dict):
            for k, x in a.items():
                yield from go(x, path + (("item", k),))
        else:
            yield path, a
    for i, a in enumerate(args):
        yield from go(a, (("arg", i),))
    for k, a in kwargs.items():
        yield from go(a, (("kwarg", k),))


def slots(args, kwargs):
    """[(path, value)] of every tensor, scalar or None slot of the state objects inside
    the arguments; path = (("arg", i) | ("kwarg", k), then ("attr", name) | ("item", key)...)."""
    return [(path + p, v) for path, a in _reach(args, kwargs) if is_state_object(a)
            for p, v in slots_of(a)]


def _object(o, path, out, depth):
    items = (vars(o).items() if not isinstance(o, (list, tuple, dict))
             else (o.items() if isinstance(o, dict) else enumerate(o)))
    step = "attr" if not isinstance(o, (list, tuple, dict)) else "item"
    for k, v in list(items):
        p = path + ((step, k),)
        if isinstance(v, Tensor) or isinstance(v, _SCALARS):
            out.append((p, v))
        elif depth > 1 and (isinstance(v, (list, tuple, dict)) or is_state_object(v)):
            _object(v, p, out, depth - 1)


def slots_of(o):
    """[(path from o, value)] of one state object's slots."""
    out = []
    _object(o, (), out, DEPTH)
    return out


def describe_tail(path):
    return "".join(f".{k}" if kind == "attr" else f"[{k!r}]" for kind, k in path)


def snapshot(args, kwargs):
    """{id(state object): its slots now} for every state object among the arguments: the
    layout a capture began from, for a signature computed after the step changed it."""
    return {id(a): slots_of(a) for _, a in _reach(args, kwargs) if is_state_object(a)}


def walk_tensors(args, kwargs):
    """The tensors of a call in the order guards' walk meets them (arguments, nested
    containers and state objects' slots in place; not Modules' or optimizers'), with a
    readable name each: what dynamic=True numbers its tensors by."""
    out = []
    for path, a in _reach(args, kwargs):
        if isinstance(a, Tensor):
            out.append((a, describe(path)))
        elif is_state_object(a):
            out += [(v, describe(path + p)) for p, v in slots_of(a) if isinstance(v, Tensor)]
    return out


def read(args, kwargs, path):
    o = args[path[0][1]] if path[0][0] == "arg" else kwargs[path[0][1]]
    for kind, k in path[1:]:
        o = getattr(o, k) if kind == "attr" else o[k]
    return o


def write(args, kwargs, path, value):
    holder = read(args, kwargs, path[:-1])
    kind, k = path[-1]
    if kind == "attr":
        setattr(holder, k, value)
    else:
        holder[k] = value


def describe(path):
    head = f"arg {path[0][1]}" if path[0][0] == "arg" else f"argument {path[0][1]!r}"
    return head + describe_tail(path[1:])
