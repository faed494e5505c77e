"""nn.utils.parametrize as torch's: `register_parametrization(module, "weight", P)` makes
`module.weight` be computed as P(original) on every access, the original kept (trained,
saved) at `module.parametrizations.weight.original` (or original0, original1, ... when
P.right_inverse returns several tensors). State-dict keys match torch's.

As torch does, the module's class is swapped for a subclass named Parametrized<Class>
that carries a property per parametrized name (its setter goes through right_inverse);
removing the last parametrization swaps the class back.
"""
import contextlib

import tinytensor as tt

from ..module import Module, ModuleDict, ModuleList, Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "ParametrizationList"]

_cache = {"depth": 0, "values": {}}


@contextlib.contextmanager
def cached():
    """Within the block each parametrized tensor is computed once (at its first access)
    and reused: one weight shared by several calls costs one parametrization."""
    _cache["depth"] += 1
    try:
        yield
    finally:
        _cache["depth"] -= 1
        if not _cache["depth"]:
            _cache["values"].clear()


def _register(module, name, tensor):
    if isinstance(tensor, Parameter):
        setattr(module, name, tensor)
    else:
        module.register_buffer(name, tensor)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s)."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        with tt.no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        trainable = isinstance(original, Parameter)
        if isinstance(new, tt.Tensor):
            self.is_tensor, self.ntensors = True, 1
            if tuple(new.shape) == tuple(original.shape) and new.dtype == original.dtype:
                with tt.no_grad():  # keep the original's identity (an optimizer may hold it)
                    original.copy_(new)
                _register(self, "original", original)
            else:
                _register(self, "original", _wrap(new, trainable, original))
        else:
            self.is_tensor, self.ntensors = False, len(new)
            for i, t in enumerate(new):
                _register(self, f"original{i}", _wrap(t, trainable, original))

    def right_inverse(self, value):
        """Store `value` as the parametrized tensor: through each right_inverse, last first."""
        with tt.no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       "right_inverse, so the tensor cannot be assigned")
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _wrap(t, trainable, original):
    t = t.detach()
    return Parameter(t, requires_grad=original.requires_grad) if trainable else t


def is_parametrized(module, tensor_name=None):
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p


def _inject_property(module, name):
    def get(self):
        plist = self.parametrizations[name]
        if not _cache["depth"]:
            return plist()
        key = (id(self), name)
        if key not in _cache["values"]:
            _cache["values"][key] = plist()
        return _cache["values"][key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: the parametrization must be a Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, tt.Tensor) or tuple(x.shape) != tuple(y.shape) \
                    or x.dtype != y.dtype:
                raise ValueError(f"register_parametrization: the parametrization of "
                                 f"'{tensor_name}' changes its shape or dtype (from "
                                 f"{tuple(y.shape)} {y.dtype.name}); pass unsafe=True to allow it")
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"register_parametrization: module {type(module).__name__} does not "
                         f"have a parameter, a buffer, or a parametrized element with name "
                         f"'{tensor_name}'")
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    if not unsafe:
        x = plist()
        if not isinstance(x, tt.Tensor) or tuple(x.shape) != tuple(original.shape) \
                or x.dtype != original.dtype:
            raise ValueError(f"register_parametrization: the parametrization of '{tensor_name}' "
                             f"changes its shape or dtype (from {tuple(original.shape)} "
                             f"{original.dtype.name}); pass unsafe=True to allow it")
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        object.__setattr__(module, "__class__",
                           type(f"Parametrized{cls.__name__}", (cls,), {"__module__": cls.__module__}))
        module.parametrizations = ModuleDict()
    _inject_property(module, tensor_name)
    module.parametrizations[tensor_name] = plist
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Back to a plain parameter (or buffer): the current parametrized value with
    leave_parametrized=True, else the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: module {type(module).__name__} does not "
                         f"have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with tt.no_grad():
                value = getattr(module, tensor_name)
            if tuple(value.shape) == tuple(original.shape) and value.dtype == original.dtype:
                with tt.no_grad():
                    original.copy_(value)
            else:
                original = _wrap(value, isinstance(original, Parameter), original)
    else:
        if not leave_parametrized:
            raise ValueError("remove_parametrizations: cannot leave unparametrized "
                             "(leave_parametrized=False) a tensor that is parametrized in terms "
                             "of a sequence of tensors")
        with tt.no_grad():
            value = getattr(module, tensor_name)
        original = _wrap(value, isinstance(plist.original0, Parameter), plist.original0)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        object.__setattr__(module, "__class__", type(module).__bases__[0])
    return module
