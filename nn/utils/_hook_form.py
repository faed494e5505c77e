"""The bookkeeping weight_norm and spectral_norm share in their hook form (the older
torch.nn.utils API; nn/utils/weight_norm.py, spectral_norm.py): one hook per parameter
name, kept in the module's __dict__ under `_<kind>_hooks`, refused twice, and undone by
turning the computed weight back into a plain Parameter."""
from ..module import Parameter


def hooks(module, kind):
    """{parameter name: (hook, handle)} of this kind ("weight_norm", "spectral_norm")."""
    return module.__dict__.setdefault(f"_{kind}_hooks", {})


def check_new(module, name, kind):
    if name in hooks(module, kind):
        raise RuntimeError(f"{kind}: cannot register two {kind} hooks on the same "
                           f"parameter {name}")


def original(module, name, kind):
    """The parameter the hook form will take over, which must exist."""
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"{kind}: {type(module).__name__} has no parameter '{name}'")
    return weight


def install(module, name, kind, hook):
    hooks(module, kind)[name] = (hook, module.register_forward_pre_hook(hook))
    return module


def remove(module, name, kind, suffixes, compute):
    """Undo the hook form: the weight compute(hook) gives becomes a Parameter again and the
    attributes name + suffix go."""
    if name not in hooks(module, kind):
        raise ValueError(f"{kind} of '{name}' not found in {type(module).__name__}")
    hook, handle = hooks(module, kind).pop(name)
    weight = compute(hook).detach()
    handle.remove()
    delattr(module, name)
    for suffix in suffixes:
        delattr(module, name + suffix)
    setattr(module, name, Parameter(weight))
    return module
