"""Modules as functions of their parameters: functional_call and stack_module_state.

Duck-typed on nn.Module (named_modules, _parameters, _buffers): tinytensor does not import
tinytensor.nn (the layers run one way, DESIGN.md)."""
from ..core.tensor import Tensor


def _locations(module):
    """name -> (owner module, store, key) for every parameter and buffer (tied ones under each
    of their names), and id(tensor) -> all its locations."""
    by_name, by_id = {}, {}
    for mname, m in module.named_modules():
        for store in ("_parameters", "_buffers"):
            for key, t in getattr(m, store).items():
                if t is None:
                    continue
                name = f"{mname}.{key}" if mname else key
                loc = (m, store, key)
                by_name[name] = loc
                by_id.setdefault(id(t), []).append(loc)
    return by_name, by_id


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True,
                    strict=False):
    """module(*args, **kwargs) with its parameters and buffers replaced by the given tensors,
    for this call only: the module's own tensors are back in place afterwards, exception or
    not. With tie_weights, a value for one name of a tied tensor replaces all of them."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = dict(parameter_and_buffer_dicts)
    else:
        given = {}
        for d in parameter_and_buffer_dicts:
            dup = set(given) & set(d)
            if dup:
                raise ValueError(f"functional_call({type(module).__name__}): {sorted(dup)} appear "
                                 "in more than one of the dicts")
            given.update(d)
    by_name, by_id = _locations(module)
    unexpected = [k for k in given if k not in by_name]
    if unexpected:
        raise RuntimeError(f"functional_call({type(module).__name__}): unexpected key(s) "
                           f"{unexpected}; the module has {sorted(by_name)}")
    for k, v in given.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"functional_call({type(module).__name__}): the value for {k!r} must "
                            f"be a Tensor, got {type(v).__name__}")
    if strict:
        missing = [k for k in by_name if k not in given and not (
            tie_weights and any(g in given for g in _tied_names(k, by_name, by_id)))]
        if missing:
            raise RuntimeError(f"functional_call({type(module).__name__}, strict=True): missing "
                               f"key(s) {missing}")
    swaps = {}
    for k, v in given.items():
        m, store, key = by_name[k]
        old = getattr(m, store)[key]
        locs = by_id[id(old)] if tie_weights else [by_name[k]]
        for loc in locs:
            prev = swaps.get((id(loc[0]), loc[1], loc[2]))
            if prev is not None and prev[1] is not v and tie_weights:
                raise ValueError(f"functional_call({type(module).__name__}): tied weights got "
                                 f"different values (at {k!r})")
            swaps[(id(loc[0]), loc[1], loc[2])] = (loc, v)
    originals = []
    try:
        for (m, store, key), v in swaps.values():
            d = getattr(m, store)
            originals.append((d, key, d[key]))
            d[key] = v
        if not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for d, key, old in reversed(originals):
            d[key] = old


def _tied_names(name, by_name, by_id):
    m, store, key = by_name[name]
    locs = by_id[id(getattr(m, store)[key])]
    return [n for n, loc in by_name.items() if loc in locs]


def stack_module_state(models):
    """(params, buffers): each name's tensors from every model stacked along a new dim 0, as
    torch.func.stack_module_state; the stacked parameters are new leaves that require grad
    where the models' do."""
    from ..ops.movement import stack
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: expected at least one model, got none")
    first = models[0]
    kinds = ("named_parameters", "named_buffers")
    names = [dict(getattr(first, k)()) for k in kinds]
    for i, m in enumerate(models[1:], 1):
        if type(m) is not type(first):
            raise RuntimeError(f"stack_module_state: model {i} is a {type(m).__name__}, model 0 a "
                               f"{type(first).__name__}; all must be the same kind")
        for k, ref in zip(kinds, names):
            got = dict(getattr(m, k)())
            if list(got) != list(ref):
                raise RuntimeError(f"stack_module_state: model {i} has {k[6:]} {list(got)}, "
                                   f"model 0 has {list(ref)}")
            for n, t in got.items():
                if tuple(t.shape) != tuple(ref[n].shape):
                    raise RuntimeError(f"stack_module_state: {n!r} has shape {tuple(t.shape)} in "
                                       f"model {i} but {tuple(ref[n].shape)} in model 0")
    out = []
    for k, ref in zip(kinds, names):
        d = {}
        for n, t in ref.items():
            s = stack([dict(getattr(m, k)())[n].detach() for m in models])
            if k == "named_parameters" and t.requires_grad:
                s = s.detach().requires_grad_()
            d[n] = s
        out.append(d)
    return tuple(out)
