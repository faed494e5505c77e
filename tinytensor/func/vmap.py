"""`tt.func.vmap`: a function of one example mapped over a batch, as torch.func.vmap.

    per_example = tt.func.vmap(f)(xs)                    # f(xs[0]), f(xs[1]), ... stacked
    tt.func.vmap(f, in_dims=(None, 0))(w, xs)            # w shared by every example
    tt.func.vmap(tt.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)  # per-sample grads

Inputs and outputs are pytrees (tuples, lists, dicts of tensors); `in_dims` / `out_dims`
are an int or None for all, or a tree matching a prefix of the arguments / outputs. The
function sees batched tensors of one example's shape; the ops' batching rules run the
whole batch at once (batching.py, batching_rules.py).
"""
import functools

from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from . import batching_wrappers  # noqa: F401  (gives ops and creation their vmap wrappers)
from .batching import _RANDOMNESS, Level, wrap, _Popped
from .batching_rules import expand_batch, move


# ---------------------------------------------------------------- pytrees
def _is_tuple(x):
    return isinstance(x, tuple)


def tree_flatten(x):
    """(leaves, spec): tuples (namedtuples too), lists and dicts are nodes."""
    if isinstance(x, (list, tuple)):
        parts = [tree_flatten(v) for v in x]
        return [leaf for p in parts for leaf in p[0]], (type(x), None, [p[1] for p in parts])
    if isinstance(x, dict):
        keys = list(x)
        parts = [tree_flatten(x[k]) for k in keys]
        return [leaf for p in parts for leaf in p[0]], (dict, keys, [p[1] for p in parts])
    return [x], None


def tree_unflatten(leaves, spec):
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, keys, children = s
        vals = [build(c) for c in children]
        if kind is dict:
            return dict(zip(keys, vals))
        if hasattr(kind, "_fields"):
            return kind(*vals)
        return kind(vals)
    return build(spec)


def _broadcast(prefix, tree, what):
    """`prefix` (an int/None, or a tree that is a prefix of `tree`) spread over tree's leaves."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, (list, tuple)) and isinstance(tree, (list, tuple)) and \
            len(prefix) == len(tree):
        return [d for p, t in zip(prefix, tree) for d in _broadcast(p, t, what)]
    if isinstance(prefix, dict) and isinstance(tree, dict) and set(prefix) == set(tree):
        return [d for k in tree for d in _broadcast(prefix[k], tree[k], what)]
    raise ValueError(what)


def _describe(tree):
    if isinstance(tree, (list, tuple)):
        inner = ", ".join(_describe(v) for v in tree)
        return f"({inner}{',' if len(tree) == 1 and isinstance(tree, tuple) else ''})" \
            if isinstance(tree, tuple) else f"[{inner}]"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in tree.items()) + "}"
    return "T" if isinstance(tree, Tensor) else type(tree).__name__


def _paths(tree, root="args"):
    if isinstance(tree, (list, tuple)):
        return [p for i, v in enumerate(tree) for p in _paths(v, f"{root}[{i}]")]
    if isinstance(tree, dict):
        return [p for k, v in tree.items() for p in _paths(v, f"{root}[{k!r}]")]
    return [root]


# ---------------------------------------------------------------- vmap
def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dim `in_dims` of its inputs (see the module docstring)."""
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")
    if not (in_dims is None or isinstance(in_dims, (int, tuple, list, dict))):
        raise ValueError(f"vmap: in_dims must be an int, None or a tuple, got {in_dims!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")
    name = getattr(func, "__name__", type(func).__name__)

    @functools.wraps(func)
    def mapped(*args, **kwargs):
        return _call(func, name, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return mapped


def _call(func, name, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    head = f"vmap({name}, in_dims={in_dims!r})"
    if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
        raise ValueError(f"{head}: in_dims has {len(in_dims)} entries but {name} got "
                         f"{len(args)} positional arguments; give one in_dim per argument")
    leaves, spec = tree_flatten(args)
    dims = _broadcast(in_dims if not isinstance(in_dims, list) else tuple(in_dims), args,
                      f"{head}: in_dims is not compatible with the structure of the inputs "
                      f"{_describe(args)}")
    paths = _paths(args)
    size, first = None, None
    norm = []
    for leaf, d, path in zip(leaves, dims, paths):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(leaf, Tensor):
            raise ValueError(f"{head}: got in_dim={d} for {path}, which is a "
                             f"{type(leaf).__name__}, not a tensor; use in_dim None for it")
        n = leaf.ndim
        if not -n <= d < n:
            raise ValueError(f"{head}: got in_dim={d} for {path}, a tensor of shape "
                             f"{tuple(leaf.shape)} (dimensionality {n}), so in_dim must satisfy "
                             f"{-n} <= in_dim < {n}")
        d %= n
        s = int(leaf.shape[d])
        if size is None:
            size, first = s, (path, tuple(leaf.shape), d)
        elif s != size:
            raise ValueError(
                f"{head}: expected all inputs to have the same size in the mapped dimension, "
                f"got {size} for {first[0]} (shape {first[1]}, in_dim {first[2]}) and {s} for "
                f"{path} (shape {tuple(leaf.shape)}, in_dim {d})")
        norm.append(d)
    if size is None:
        raise ValueError(f"{head}: at least one input must be batched (every in_dim is None, "
                         "or no tensor was given)")
    if chunk_size is not None and chunk_size < size:
        return _chunked(func, name, spec, leaves, norm, out_dims, randomness, chunk_size, size,
                        kwargs)
    return _one(func, name, spec, leaves, norm, out_dims, randomness, size, kwargs)


def _one(func, name, spec, leaves, dims, out_dims, randomness, size, kwargs):
    stack = STATE.vmap
    level = Level(len(stack), size, randomness)
    STATE.vmap = stack + (level,)
    try:
        batched = [leaf if d is None else wrap(leaf, d, level) for leaf, d in zip(leaves, dims)]
        out = func(*tree_unflatten(batched, spec), **kwargs)
    finally:
        STATE.vmap = stack
        level.alive = False
    try:
        return _unwrap(out, out_dims, level, name)
    finally:
        level.lifted.clear()


def _unwrap(out, out_dims, level, name):
    leaves, spec = tree_flatten(out)
    dims = _broadcast(out_dims if not isinstance(out_dims, list) else tuple(out_dims), out,
                      f"vmap({name}, out_dims={out_dims!r}): out_dims is not compatible with the "
                      f"structure of the outputs {_describe(out)}")
    res = []
    for leaf, d, path in zip(leaves, dims, _paths(out, "output")):
        if d is None:
            if isinstance(leaf, Tensor) and leaf._level is level:
                raise ValueError(f"vmap({name}, out_dims={out_dims!r}): {path} is batched, so "
                                 "its out_dim cannot be None")
            res.append(leaf)
            continue
        if not isinstance(leaf, Tensor):
            raise ValueError(f"vmap({name}, ...): {name} must only return tensors (or give "
                             f"them out_dim None), got a {type(leaf).__name__} for {path}")
        n = leaf.ndim + 1
        if not -n <= d < n:
            raise ValueError(f"vmap({name}, out_dims={out_dims!r}): out_dim {d} for {path} is "
                             f"out of range for a batched result of {n} dims")
        with _Popped(level.depth):
            if leaf._level is level:
                res.append(move(leaf._value, leaf._bdim, d % n))
            else:   # the same for every example (torch returns it expanded, too)
                res.append(move(expand_batch(leaf, level.size), 0, d % n))
    return tree_unflatten(res, spec)


def _chunked(func, name, spec, leaves, dims, out_dims, randomness, chunk_size, size, kwargs):
    """vmap over slices of at most chunk_size examples, the outputs concatenated."""
    from ..ops.indexing import getitem
    from ..ops.movement import cat
    parts = []
    for lo in range(0, size, chunk_size):
        hi = min(lo + chunk_size, size)
        sl = [leaf if d is None else getitem(leaf, (slice(None),) * d + (slice(lo, hi),))
              for leaf, d in zip(leaves, dims)]
        parts.append(_one(func, name, spec, sl, dims, out_dims, randomness, hi - lo, kwargs))
    flat = [tree_flatten(p)[0] for p in parts]
    ospec = tree_flatten(parts[0])[1]
    odims = _broadcast(out_dims if not isinstance(out_dims, list) else tuple(out_dims), parts[0],
                       "out_dims")
    res = []
    for j, d in enumerate(odims):
        col = [f[j] for f in flat]
        res.append(col[0] if d is None else cat(col, d))
    return tree_unflatten(res, ospec)
