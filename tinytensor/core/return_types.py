"""Tuples whose items are also readable by name, like torch.return_types (`.values` and
`.indices` of max, `.min`/`.max` of aminmax, ...). Each stays a plain tuple built from one
iterable, `ValuesIndices((v, i))`, so unpacking, indexing and equality are a tuple's."""
from operator import itemgetter


def named_tuple(name, fields, doc, module):
    """A tuple subclass called `name` (placed in `module`, for repr and pickling) with one
    read-only property per field, reading the item at that position."""
    attrs = {"__doc__": doc, "__module__": module, "__qualname__": name}
    for i, field in enumerate(fields):
        attrs[field] = property(itemgetter(i), doc=f"item {i} of the tuple")
    return type(name, (tuple,), attrs)
