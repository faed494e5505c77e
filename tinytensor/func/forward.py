"""Forward mode: jvp, jacfwd, linearize. A jvp opens one dual level (core/forward_ad.py),
attaches each tangent to an alias of its primal, runs f, and reads the outputs' tangents."""
from ..core.forward_ad import new_level
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from . import _tree
from ._alias import alias
from ._common import fname, floating, split_aux, tensors_of


class _Level:
    """One open dual level: its id is pushed on STATE.fw_levels while f runs."""

    def __enter__(self):
        self.id = new_level()
        STATE.fw_levels = STATE.fw_levels + (self.id,)
        return self.id

    def __exit__(self, *exc):
        STATE.fw_levels = tuple(lv for lv in STATE.fw_levels if lv != self.id)
        return False


def dual(p, t, level):
    """An alias of primal p carrying tangent t on `level` (and p's tangents on the others)."""
    d = alias(p)
    fw = dict(d._fw) if d._fw else {}
    fw[level] = t
    d._fw = fw
    return d


def tangent_of(o, level):
    t = o._fw.get(level) if o._fw else None
    if t is None:
        from ..creation import zeros_like
        t = zeros_like(o)
    return t


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J·tangents): the directional derivative in one forward pass."""
    api = "jvp"
    if not isinstance(primals, (tuple, list)):
        raise RuntimeError(f"jvp({fname(func)}): expected primals to be a tuple, got "
                           f"{type(primals).__name__}")
    if not isinstance(tangents, (tuple, list)):
        raise RuntimeError(f"jvp({fname(func)}): expected tangents to be a tuple, got "
                           f"{type(tangents).__name__}")
    if strict:
        raise RuntimeError(f"jvp({fname(func)}): strict=True is not supported (as in torch.func)")
    ps, pspec = tensors_of(tuple(primals), "primals", api, func)
    ts, tspec = tensors_of(tuple(tangents), "tangents", api, func)
    if pspec != tspec:
        raise RuntimeError(f"jvp({fname(func)}): expected primals and tangents to have the same "
                           f"structure, got {_tree.structure(pspec)} and {_tree.structure(tspec)}")
    for k, (p, t) in enumerate(zip(ps, ts)):
        floating(p, f"primal {k}", api, func)
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp({fname(func)}): primal {k} has shape {tuple(p.shape)} but its "
                               f"tangent has shape {tuple(t.shape)}; they must match")
        if p.dtype is not t.dtype:
            raise RuntimeError(f"jvp({fname(func)}): primal {k} is {p.dtype.name} but its tangent "
                               f"is {t.dtype.name}; they must match")
    with _Level() as level:
        args = _tree.unflatten(pspec, [dual(p, t, level) for p, t in zip(ps, ts)])
        out = func(*args)
        out, aux = split_aux(out, has_aux, api, func)
        outs, ospec = _tree.flatten(out)
        for o in outs:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jvp({fname(func)}): expected the function's outputs to be "
                                   f"Tensors, got {type(o).__name__}")
        touts = [tangent_of(o, level) for o in outs]
    res = (_tree.unflatten(ospec, outs), _tree.unflatten(ospec, touts))
    return res + (aux,) if has_aux else res


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error", chunk_size=None):
    """The Jacobian of func w.r.t. argnums by forward mode, as torch.func: jvp vmapped over the
    one-hot basis tangents (_basis.py), `chunk_size` basis tangents per vmap call (None: all
    at once; 1: one jvp at a time); each output's tangent is a block of Jacobian columns."""
    from ._basis import basis, block, offsets
    from .reverse import _check_chunk, jacobian_tree
    from .vmap import vmap
    from ._common import argnums_tuple
    api = "jacfwd"
    _check_chunk(chunk_size, api, func)

    def wrapper(*args, **kwargs):
        single, nums = argnums_tuple(argnums, len(args), api, func)
        specs, flat_in = [], []
        for n in nums:
            leaves, spec = tensors_of(args[n], f"argument {n}", api, func)
            for x in leaves:
                floating(x, f"argument {n}", api, func)
            specs.append((len(leaves), spec))
            flat_in += leaves
        ospec = []

        def f(*xs):
            a, k = list(args), 0
            for n, (cnt, spec) in zip(nums, specs):
                a[n] = _tree.unflatten(spec, list(xs[k:k + cnt]))
                k += cnt
            return func(*a, **kwargs)
        f.__qualname__ = fname(func)   # jvp's errors name the user's function

        def push(*tangents):
            got = jvp(f, tuple(flat_in), tangents, has_aux=has_aux)
            touts, spec = _tree.flatten(got[1])
            ospec[:] = [spec]
            return (touts, got[2]) if has_aux else touts

        spans, total = offsets(flat_in)
        if total:   # the tangents' basis dim ends up last: (o..., N)
            # aux is the same for every basis tangent, but batched when an input it reads
            # joined the batch: torch.func's way, mapped on dim 0 and example 0 kept
            got = vmap(push, out_dims=(-1, 0) if has_aux else -1, randomness=randomness,
                       chunk_size=chunk_size)(*basis(flat_in))
            if has_aux:
                leaves, aspec = _tree.flatten(got[1])
                got = (got[0], _tree.unflatten(aspec, [a[0] for a in leaves]))
        else:       # no entry to differentiate: one jvp for the outputs' shapes and aux
            got = push(*[x.detach() * 0 for x in flat_in])
        touts, aux = got if has_aux else (got, None)
        per_output = []
        for t in touts:
            o_shape = tuple(t.shape)[:-1] if total else tuple(t.shape)
            per_output.append([
                block(t, -1, off, m, o_shape + tuple(x.shape)) if total
                else Tensor._zeros_meta(o_shape + tuple(x.shape), t.dtype, t._device)
                for x, (off, m) in zip(flat_in, spans)])
        res = jacobian_tree(touts, ospec[0], per_output, specs, single)
        return (res, aux) if has_aux else res
    return wrapper


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is J·tangents at primals. Each call runs
    a jvp at the stored primals (tinytensor keeps no linearized program; the values agree)."""
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return out, jvp_fn
