"""Batching rules that live at the level of an op's wrapper, not of its Function: the ones
whose batched input is read for its *values* by the wrapper (an index tensor becomes the
key of getitem; embedding ids become rows), and draws that do not go through an op
(tt.rand, tt.randn). The wrappers call these only inside vmap (one check of STATE.vmap)."""
import warnings

from ..core.grad_mode import STATE, VMAP_WRAPPERS
from .batching import _Popped, _random_refused, lift, wrap
from .batching_rules import expand_batch, move, select, stack0

_WARNED = set()


def _top(*ts):
    lvl = None
    for t in ts:
        lv = getattr(t, "_level", None)
        if lv is not None and (lvl is None or lv.depth > lvl.depth):
            lvl = lv
    return lvl


def _split(t, lvl):
    """(physical tensor, bdim) of t at level lvl (bdim None when t is not batched there),
    lifting t when it requires grad (batching.lift)."""
    if t._level is lvl:
        return t._value, t._bdim
    if STATE.grad_enabled and t.requires_grad:
        b = lift(t, lvl)
        return b._value, 0
    return t, None


def getitem(x, key):
    """x[key] when the key holds a batched index tensor (None: it holds none, the ordinary
    path runs): once per example, stacked."""
    from ..core.tensor import Tensor
    from ..ops import indexing
    items = key if isinstance(key, tuple) else (key,)
    tensors = [k for k in items if isinstance(k, Tensor) and k._level is not None]
    if not tensors:
        return None
    lvl = _top(x, *tensors)
    out = _one_index(x, items, lvl)
    if out is not None:
        return out
    _warn("getitem with a batched index tensor")
    xv, dx = _split(x, lvl)
    parts = [_split(k, lvl) if isinstance(k, Tensor) else (k, None) for k in items]
    outs = []
    with _Popped(lvl.depth):
        for i in range(lvl.size):
            xi = select(xv, dx, i) if dx is not None else xv
            ki = tuple(select(v, d, i) if d is not None else v for v, d in parts)
            outs.append(indexing.getitem(xi, ki if isinstance(key, tuple) else ki[0]))
        out = stack0(outs)
    return wrap(out, 0, lvl)


def _one_index(x, items, lvl):
    """x[:, ..., :, index] (d full slices, then one integer index tensor, then full slices):
    one advanced index (example, index) on the batched x, or None for any other key."""
    from ..core.tensor import Tensor
    from ..ops import indexing
    pos = [i for i, k in enumerate(items) if isinstance(k, Tensor)]
    if len(pos) != 1 or any(not (isinstance(k, slice) and k == slice(None))
                            for i, k in enumerate(items) if i != pos[0]):
        return None
    d = pos[0]
    idx = items[d]
    if idx.dtype.category != 1 or idx.device is not x.device or x.ndim <= d:
        return None   # masks and the rest: per example
    xv, dx = _split(x, lvl)
    iv, di = _split(idx, lvl)
    with _Popped(lvl.depth):
        xv = move(xv, dx, 0) if dx is not None else expand_batch(xv, lvl.size)   # (B, *X)
        iv = move(iv, di, 0) if di is not None else expand_batch(iv, lvl.size)   # (B, *I)
        if xv._level is not None or iv._level is not None:
            return None
        B, ni = lvl.size, iv.ndim - 1
        rows = xv._device.xp.arange(B).reshape((B,) + (1,) * ni)
        out = indexing.GetItemCopy.apply(xv, key=(rows,) + (slice(None),) * d + (iv.data,),
                                         advanced=True)
        if d:   # NumPy put the (example, index) dims first: (B, *I, *X[:d], *X[d+1:])
            perm = (0,) + tuple(range(1 + ni, 1 + ni + d)) + tuple(range(1, 1 + ni)) + \
                tuple(range(1 + ni + d, out.ndim))
            out = out.permute(*perm)
    return wrap(out, 0, lvl)


def embedding(ids, weight, padding_idx):
    """Rows of weight for batched ids (or a batched / lifted weight): one gather. A weight
    batched along the examples (per-example, or lifted for per-example gradients) is read
    at (example, id), so its gradient has a row table per example."""
    from ..ops import indexing
    lvl = _top(ids, weight)
    if lvl is None:
        return None
    iv, di = _split(ids, lvl)
    wv, dw = _split(weight, lvl)
    with _Popped(lvl.depth):
        iv = move(iv, di, 0) if di is not None else expand_batch(iv, lvl.size)
        if dw is None:
            return wrap(indexing.embedding(iv, wv, padding_idx), 0, lvl)
        wv = move(wv, dw, 0)                                   # (B, V, d)
        if iv._level is not None or wv._level is not None:    # nested levels: per example
            out = stack0([indexing.embedding(select(iv, 0, i), select(wv, 0, i), padding_idx)
                          for i in range(lvl.size)])
            return wrap(out, 0, lvl)
        n = weight.shape[0]
        ids_a = iv.data
        if ids_a.size and int(ids_a.min()) < 0:
            raise IndexError(indexing._negative_ids(int(ids_a.min()), n))
        xp = wv._device.xp
        rows = xp.arange(lvl.size).reshape((lvl.size,) + (1,) * (ids_a.ndim - 1))
        out = indexing.GetItemCopy.apply(wv, key=(rows, ids_a), advanced=True)  # (B, *ids, d)
        if padding_idx is not None and wv.requires_grad:
            keep = (iv != padding_idx % n).unsqueeze(-1)
            out = indexing.where(keep, out, out.detach())
    return wrap(out, 0, lvl)


def random_draw(op, kind, size, dtype, device, requires_grad):
    """tt.rand / tt.randn / tt.randint inside vmap: refused under randomness='error'; under
    'different' drawn through the Draw op (which the random rule batches); None under 'same'
    (the ordinary draw, one for every example)."""
    modes = {lvl.randomness for lvl in STATE.vmap}
    if "error" in modes:
        raise RuntimeError(_random_refused(op))
    if modes == {"same"}:
        return None
    if kind is None or dtype.is_complex:
        raise RuntimeError(f"vmap: {op} with randomness='different' is not supported for "
                           f"{dtype.name if kind else 'integer draws'}; draw outside vmap, or "
                           "use randomness='same'")
    from ..ops.distributions import _draw
    out = _draw(kind, size, dtype, device)
    return out.requires_grad_() if requires_grad else out


def _warn(what):
    if what not in _WARNED:
        _WARNED.add(what)
        warnings.warn(f"vmap: {what} has no batching rule: it runs once per example and the "
                      "results are stacked (correct, but slow)", UserWarning, stacklevel=4)


VMAP_WRAPPERS.update(getitem=getitem, embedding=embedding, random_draw=random_draw)
