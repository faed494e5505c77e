"""Module, Parameter and the containers (Sequential, ModuleList, ModuleDict).

A Module registers Parameters, buffers and submodules by attribute, like torch.nn.
Calling a module pushes its name onto the tape's scope stack, so every op recorded
inside knows its module path (`blocks.3.attn.q_proj`); graph export, anomaly reports
and error messages read that path.
"""
import contextlib
from collections import OrderedDict

import numpy as np

import tinytensor as tt
from tinytensor.autograd import STATE, enter_scope, exit_scope
from tinytensor.core.return_types import named_tuple


class Parameter(tt.Tensor):
    """A Tensor that a Module registers as a trainable parameter (requires grad by default)."""
    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        if isinstance(data, tt.Tensor):
            data = data.detach()
            self._init(data.data, data.device)
        else:
            super().__init__(data)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce__(self):  # copy.deepcopy and pickle keep it a Parameter
        return (_rebuild_parameter, (self.detach().numpy(), str(self.device), self.requires_grad))


def _rebuild_parameter(array, device, requires_grad):
    return Parameter(tt.tensor(array, device=device), requires_grad=requires_grad)


class ToShortcuts:
    """cpu(), float(), double(), half(): self.to(...) spelled as torch spells it, for Module
    and PackedSequence alike (each defines its own `to` and `cuda`)."""
    __slots__ = ()   # adds no __dict__ to a tuple subclass (PackedSequence)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(tt.float32)

    def double(self):
        return self.to(tt.float64)

    def half(self):
        return self.to(tt.float16)


class Module(ToShortcuts):
    """Base class of every layer and model."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_forward_pre_hooks", [])
        object.__setattr__(self, "_forward_hooks", [])
        object.__setattr__(self, "_scope_name", "")   # attribute name in the first parent
        object.__setattr__(self, "_path", None)       # full path from the root module
        object.__setattr__(self, "_names_valid", False)
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning "
                               "attributes in __init__")
        if isinstance(value, Parameter):
            target = self._parameters
        elif isinstance(value, Module):
            target = self._modules
            if not value._scope_name:
                object.__setattr__(value, "_scope_name", name)
        elif name in self.__dict__.get("_buffer_names", ()) and (value is None or isinstance(value, tt.Tensor)):
            target = self._buffers
        elif name in self._parameters and value is not None:
            raise TypeError(f"{type(self).__name__}: cannot assign a {type(value).__name__} to "
                            f"parameter '{name}' (an nn.Parameter or None is expected); to change "
                            f"its values use `with tt.no_grad(): module.{name}.copy_(value)`")
        elif name in self._parameters:
            target = self._parameters
        else:
            target = None
        for store in (self._parameters, self._buffers, self._modules):
            if store is not target:  # reassigning keeps the entry's place, as in torch
                store.pop(name, None)
        if target is None:
            object.__setattr__(self, name, value)
            return
        target[name] = value
        self.__dict__.pop(name, None)
        object.__setattr__(self, "_names_valid", False)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param if isinstance(param, Parameter) else Parameter(param))

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that belongs to the module's state but is not trained (e.g. a mask)."""
        if tensor is not None and not isinstance(tensor, tt.Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a Tensor or None")
        names = self.__dict__.setdefault("_buffer_names", set())
        names.add(name)
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        setattr(self, name, module)

    # ------------------------------------------------------------------ calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        if not STATE.scope and not self._names_valid:
            self._assign_names()
        path = self._path
        prev = enter_scope(path, absolute=True) if path is not None else enter_scope(self._scope_name)
        try:   # tt.module_scope's body, without a generator context manager per call
            for hook in self._forward_pre_hooks:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
            out = self.forward(*args, **kwargs)
            for hook in self._forward_hooks:
                r = hook(self, args, out)
                if r is not None:
                    out = r
        finally:
            exit_scope(prev)
        return out

    def _assign_names(self):
        # modules know their path from this root, and parameters their full name, so that
        # tapes, graphs and errors can say where an op ran and which weight it used. The
        # first root to name a module keeps it: calling a slice or a submodule on its own
        # later does not rename the layers it shares with the whole model.
        for name, m in self.named_modules():
            if m._path is None:
                object.__setattr__(m, "_path", name)
            object.__setattr__(m, "_names_valid", True)
        for name, p in self.named_parameters():
            if p.name is None:
                p.name = name
        for name, b in self.named_buffers():
            if b.name is None:
                b.name = name

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a returned value replaces args."""
        return _Handle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a returned value replaces output."""
        return _Handle(self._forward_hooks, hook)

    # ------------------------------------------------------------------ traversal
    def named_modules(self, prefix="", memo=None):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, attr, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in modules:
            for name, t in getattr(m, attr).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mname}.{name}" if mname else name), t

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only=False):
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # ------------------------------------------------------------------ modes and moves
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    @contextlib.contextmanager
    def evaluating(self):
        """eval() for the duration of a block; afterwards every submodule gets back its own
        mode (a layer the user froze in eval mode stays in eval mode)."""
        modes = [(m, m.training) for m in self.modules()]
        self.eval()
        try:
            yield self
        finally:
            for m, mode in modes:
                object.__setattr__(m, "training", mode)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = tt.zeros_like(p.grad)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """Move (and/or cast floating) parameters and buffers in place; returns self."""
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for name, t in store.items():
                    if t is None:
                        continue
                    moved = _move(t, args, kwargs)
                    if moved is not t:
                        if isinstance(t, Parameter):
                            t.data, t._device = moved.data, moved.device
                            t._version[0] += 1
                            if t.grad is not None:
                                t.grad = _move(t.grad, args, kwargs)
                        else:
                            store[name] = moved
        return self

    def cuda(self, index=None):
        return self.to("cuda" if index is None else f"cuda:{index}")

    # ------------------------------------------------------------------ state
    def state_dict(self, prefix=""):
        """name -> Tensor (detached, sharing memory) for every parameter and persistent buffer."""
        out = OrderedDict()
        for mname, m in self.named_modules(prefix):
            for name, p in m._parameters.items():
                if p is not None:
                    out[f"{mname}.{name}" if mname else name] = p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[f"{mname}.{name}" if mname else name] = b.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy tensors in by name. Every missing, unexpected and mis-shaped key is reported
        at once; with strict=False missing and unexpected keys are returned, not raised."""
        own = self.state_dict()
        # entries older checkpoints lack (BatchNorm's num_batches_tracked before torch 0.4.1):
        # a module names them in _state_optional; missing, they keep their value, as in torch
        optional = {f"{mname}.{k}" if mname else k for mname, m in self.named_modules()
                    for k in getattr(m, "_state_optional", ())}
        missing = [k for k in own if k not in state_dict and k not in optional]
        unexpected = [k for k in state_dict if k not in own]
        wrong = [(k, tuple(own[k].shape), tuple(_shape_of(state_dict[k])))
                 for k in own if k in state_dict and tuple(own[k].shape) != tuple(_shape_of(state_dict[k]))]
        problems = []
        if wrong:
            problems.append("wrong shape: " + ", ".join(f"{k} expects {a} but got {b}" for k, a, b in wrong))
        if strict and missing:
            problems.append("missing: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected: " + ", ".join(unexpected))
        if problems:
            raise RuntimeError(f"load_state_dict for {type(self).__name__}: " + "; ".join(problems))
        with tt.no_grad():
            for k, target in own.items():
                if k in state_dict:
                    target.copy_(_as_tensor(state_dict[k], target))
        return _LoadResult((missing, unexpected))

    # ------------------------------------------------------------------ printing
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        extra = self.extra_repr()
        own = sum(p.numel() for p in self._parameters.values() if p is not None)
        if not self._modules:
            return f"{type(self).__name__}({extra})" + (f"  # {own:,} params" if own else "")
        return (f"{type(self).__name__}({extra}\n" + "\n".join(lines)
                + f"\n)  # {self.num_parameters():,} params")


def _shape_of(v):
    return v.shape if hasattr(v, "shape") else np.shape(v)


def _as_tensor(v, like):
    if isinstance(v, tt.Tensor):
        return v.to(like.device)
    return tt.tensor(np.asarray(v), device=like.device)


def _move(t, args, kwargs):
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    for a in args:
        if isinstance(a, (tt.dtypes.DType, type)) or (isinstance(a, str) and not a.startswith(("cpu", "cuda"))):
            dtype = a
        else:
            device = a
    out = t
    if device is not None:
        out = out.detach().to(device)
    if dtype is not None and out.is_floating_point():
        out = out.detach().to(dtype)
    return out


_LoadResult = named_tuple(
    "_LoadResult", ("missing_keys", "unexpected_keys"),
    "(missing_keys, unexpected_keys) of load_state_dict, like torch's return value.", __name__)


class _Handle:
    def __init__(self, hooks, hook):
        self.hooks, self.hook = hooks, hook
        hooks.append(hook)

    def remove(self):
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


class _ModuleSequence(Module):
    """Indexing, len() and iteration over the submodules in order (Sequential, ModuleList),
    and torch's list editing: setting, deleting (the rest renumbered 0..n-1, as torch),
    append, insert, extend, pop, + and +=. A slice is handed to `_from_slice` as
    (name, module) pairs."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._from_slice(list(self._modules.items())[i])
        return self._modules[self._key(i)]

    def _key(self, i):
        n = len(self._modules)
        i = _index(i)
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__}: index {i} is out of range for {n} modules")
        return list(self._modules)[i % n]

    def __setitem__(self, i, module):
        setattr(self, self._key(i), module)

    def __delitem__(self, i):
        if isinstance(i, slice):
            for k in list(self._modules)[i]:
                del self._modules[k]
        else:
            del self._modules[self._key(i)]
        self._renumber(list(self._modules.values()))

    def _renumber(self, modules):
        self._modules.clear()
        for j, m in enumerate(modules):
            self._modules[str(j)] = m
            if not m._scope_name:
                object.__setattr__(m, "_scope_name", str(j))
        object.__setattr__(self, "_names_valid", False)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in list(modules):  # list(): `seq.extend(seq)` must not loop on itself
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert before `index` (torch's list.insert rule for out-of-range indices)."""
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.insert: expects a Module, got "
                            f"{type(module).__name__}")
        modules = list(self._modules.values())
        modules.insert(_index(index), module)
        self._renumber(modules)
        return self

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def __iadd__(self, other):
        return self.extend(other)

    def __add__(self, other):
        # as torch: a Sequential adds only a Sequential; a ModuleList any iterable of modules
        if isinstance(self, Sequential) and not isinstance(other, Sequential):
            raise ValueError(f"Sequential + {type(other).__name__}: the add operator supports "
                             "only objects of Sequential class")
        return type(self)._from_slice(self, [(None, m) for m in list(self) + list(other)])


def _index(i):
    if not hasattr(i, "__index__"):
        raise TypeError(f"module index must be an int or a slice, got {type(i).__name__}")
    return i.__index__()


class Sequential(_ModuleSequence):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, m in modules[0].items():
                setattr(self, name, m)
        else:
            for i, m in enumerate(modules):
                setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def _from_slice(self, items):
        # as torch: a slice is a Sequential (callable) keeping the names; a sum renumbers
        if any(k is None for k, _ in items):
            return Sequential(*[m for _, m in items])
        return Sequential(dict(items))


class ModuleList(_ModuleSequence):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def _from_slice(self, items):
        return ModuleList(m for _, m in items)


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, name):
        return self._modules[name]

    def __setitem__(self, name, module):
        setattr(self, name, module)

    def __delitem__(self, name):
        del self._modules[name]
        object.__setattr__(self, "_names_valid", False)

    def __contains__(self, name):
        return name in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, name):
        m = self._modules[name]
        del self[name]
        return m

    def clear(self):
        self._modules.clear()
        object.__setattr__(self, "_names_valid", False)

    def update(self, modules):
        """From a mapping or from (name, module) pairs, in order."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict.update: element #{j} should have 2 elements (name, "
                                 f"module), has {len(pair)}")
            self[pair[0]] = pair[1]
