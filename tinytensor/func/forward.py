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
