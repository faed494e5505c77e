"""Pytrees of tensors for the transforms: tuples, lists, dicts (and namedtuples) nest; every
other object is a leaf. flatten gives the leaves in order and a spec that rebuilds the tree."""


def flatten(tree):
    leaves = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(x, leaves):
    if isinstance(x, (tuple, list)):
        kids = tuple(_flatten(v, leaves) for v in x)
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return ("namedtuple", type(x), kids)
        return (type(x).__name__ if type(x) in (tuple, list) else type(x), None, kids)
    if isinstance(x, dict):
        keys = list(x)
        return ("dict", (type(x), keys), tuple(_flatten(x[k], leaves) for k in keys))
    leaves.append(x)
    return None


def unflatten(spec, leaves):
    it = iter(leaves)
    out = _build(spec, it)
    return out


def _build(spec, it):
    if spec is None:
        return next(it)
    kind, extra, kids = spec
    vals = [_build(k, it) for k in kids]
    if kind == "tuple":
        return tuple(vals)
    if kind == "list":
        return vals
    if kind == "namedtuple":
        return extra(*vals)
    if kind == "dict":
        cls, keys = extra
        d = dict(zip(keys, vals))
        return d if cls is dict else cls(d)
    return kind(vals)


def structure(spec):
    """The tree's shape for an error message: (*, [*, *])."""
    if spec is None:
        return "*"
    kind, extra, kids = spec
    inner = ", ".join(structure(k) for k in kids)
    if kind == "list":
        return f"[{inner}]"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {structure(v)}" for k, v in zip(extra[1], kids)) + "}"
    return f"({inner}{',' if len(kids) == 1 else ''})"
