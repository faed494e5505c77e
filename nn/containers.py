"""ParameterList and ParameterDict: parameters held by position or by name, registered
under those names ("0", "1", ... or the keys) so that state dicts match torch's.

A plain Tensor put in is wrapped in a Parameter (torch does the same); any other value is
kept as a plain attribute, not in the state dict.
"""
from collections import OrderedDict

import tinytensor as tt

from .module import Module, Parameter


def _param(value):
    if isinstance(value, tt.Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(p):
    if isinstance(p, tt.Tensor):
        size = "x".join(str(s) for s in p.shape)
        kind = "Parameter containing" if isinstance(p, Parameter) else "Tensor"
        return f"{kind}: [{p.dtype.name} of size {size}]"
    return f"Object of type: {type(p).__name__}"


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def _get(self, key):
        return self._parameters[key] if key in self._parameters else getattr(self, key)

    def _index(self, i):
        n = self._size
        i = i.__index__()
        if not -n <= i < n:
            raise IndexError(f"ParameterList: index {i} is out of range for {n} parameters")
        return str(i % n)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ParameterList([self[j] for j in range(self._size)[i]])
        return self._get(self._index(i))

    def __setitem__(self, i, value):
        setattr(self, self._index(i), _param(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(self._size))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        i = self._size
        object.__setattr__(self, "_size", i + 1)
        setattr(self, str(i), _param(value))
        return self

    def extend(self, values):
        for v in list(values):
            self.append(v)
        return self

    def forward(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called")

    def extra_repr(self):
        return "\n" + "\n".join(f"  ({i}): {_describe(p)}" for i, p in enumerate(self)) + "\n" \
            if self._size else ""


class ParameterDict(Module):
    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", {})  # insertion order of every key, tensor or not
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self._parameters[key] if key in self._parameters else getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        if "." in key or key == "":
            raise KeyError(f"ParameterDict: parameter name can't contain \".\" or be empty, got "
                           f"{key!r}")
        self._keys[key] = None
        setattr(self, key, _param(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))

    def keys(self):
        return list(self._keys)

    def values(self):
        return [self[k] for k in self._keys]

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        k = list(self._keys)[-1]
        return k, self.pop(k)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def copy(self):
        return ParameterDict(self.items())

    def update(self, values):
        """From a mapping (a plain dict is taken in sorted key order, as torch) or from
        (key, value) pairs."""
        if isinstance(values, (ParameterDict, OrderedDict)):
            pairs = values.items()
        elif isinstance(values, dict):
            pairs = sorted(values.items())
        else:
            pairs = values
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ParameterDict.update: element #{j} should have 2 elements "
                                 f"(key, value), has {len(pair)}")
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called")

    def extra_repr(self):
        return "\n" + "\n".join(f"  ({k}): {_describe(v)}" for k, v in self.items()) + "\n" \
            if self._keys else ""
