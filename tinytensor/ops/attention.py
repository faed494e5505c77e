"""scaled_dot_product_attention: the reference decomposition, the fused flash-style op and
the rule that picks one.

Masks follow PyTorch: a bool mask is True where attention is allowed; a float mask is
added to the scores; causal is top-left aligned. A query row whose keys are all masked
gets zeros out and zero gradients (never NaN): its scores are neutralised before the
softmax and its probabilities zeroed after it. Grouped-query attention (`enable_gqa`)
shares each key/value head among H // Hkv query heads.

The reference is matmul, where, softmax, dropout, matmul. `FlashAttention` never
materialises the (L, S) scores. CPU (here): queries in blocks (all of them at once unless
causal), keys in blocks of `KEY_BLOCK`; an online softmax keeps a running max `m`, a
running sum `l` and an unnormalised output per query row, rescaled whenever the max grows.
Memory is O(L * KEY_BLOCK + (L + S) * E), linear in the sequence length. The forward keeps
per row the max m and log(l) (`stats`, (..., L, 2)); the backward recomputes each block's
probabilities from them (flash-attention-2) as p = exp((s - m) - log(l)), never from the
log-sum-exp m + log(l): at large scores that sum rounds (at 1e8 a float32 holds only
multiples of 8, so m + log(2) = m) and p with it. Then dV += P^T dO,
dS = P * (dO V^T - rowsum(dO * O)), dQ += dS K, dK += dS^T Q. CUDA:
`kernels/cuda_attention.py`, whose `why_not` adds what its kernels do not take.
"""
import math

import numpy as np

from ..core.function import Function
from ..core.rules import Rule
from ..messages import OpError
from ..core.tensor import Tensor
from ..kernels import c_attention as _c_attention, c_eager as _c_eager, c_rows as _c_rows, cuda_attention, fusion as _fusion
from ..kernels._common import acc_dtype, is_cpu, xp_of
from ..core.grad_mode import STATE
from ..dtypes import bool_
from .elementwise import cast, gt, isfinite, where
from .forward_mode import add, carries_tangent
from .linalg import matmul
from .movement import broadcast_shapes, expand, reshape, tril, unsqueeze, _where
from .nn import dropout
from .reduce import all as all_, any as any_, sum as sum_
from .softmax import softmax

__all__ = ["FlashAttention", "scaled_dot_product_attention"]  # what `from .attention import *` gives the ops namespace

KEY_BLOCK = 1024          # keys per block on the CPU
QUERY_BLOCK = 1024        # queries per block on the CPU when causal (whole blocks are skipped)
BLOCK_ELEMS = 1 << 22     # at most this many scores (batch * heads * queries * keys) per block


# ---------------------------------------------------------------- the reference
def _probs(q, k, mask, causal, scale):
    """softmax(q @ k^T * scale + mask) over (..., L, S) in ops; rows that see no key are 0."""
    scores = matmul(q, k.mT) * scale  # (..., L, S)
    xp = q.device.xp
    L, S = q.shape[-2], k.shape[-2]
    live = None  # bool array (mask shape[:-1] + (1,)), False on query rows that see no key
    capturing = STATE.hooks.capturing
    if causal:
        # top-left aligned, as torch; every row keeps key 0, so no row is dead
        if capturing:   # recorded ops: the sizes may be symbolic (tt.compile dynamic=True)
            allowed = tril(Tensor._ones_meta((L, S), bool_, q.device))
        else:
            allowed = Tensor._make(xp.tril(xp.ones((L, S), dtype=bool)), q.device, False)
        scores = where(allowed, scores, float("-inf"))
    elif mask is not None and capturing:
        # a compiled step may be replayed with a mask that has dead rows where this one has
        # none: the rows that see a key are computed with ops, never read off the data
        finite = mask if mask.data.dtype == np.bool_ else isfinite(mask)
        ok = gt(sum_(cast(finite, mask.dtype if mask.data.dtype != np.bool_ else "float32"),
                     dim=-1, keepdim=True), 0.0)
        scores = where(mask, scores, float("-inf")) if mask.data.dtype == np.bool_ else scores + mask
        return where(ok, softmax(where(ok, scores, 0.0), dim=-1), 0.0)
    elif mask is not None:
        if mask.data.dtype == np.bool_:
            row_ok = any_(mask, dim=-1, keepdim=True)
            scores = where(mask, scores, float("-inf"))
        else:
            row_ok = any_(isfinite(mask), dim=-1, keepdim=True)
            scores = scores + mask
        if not bool(all_(row_ok)):  # one sync on the (small) mask, not on the scores
            live = row_ok
    if live is None:
        return softmax(scores, dim=-1)
    # a row with no finite score would give 0/0 in softmax: neutralise it before, zero it
    # after; `where` (not * 0) keeps its gradients exactly zero, never 0 * inf
    return where(live, softmax(where(live, scores, 0.0), dim=-1), 0.0)


def _check_heads(query, kv):
    h, hkv = query.shape[-3], kv.shape[-3]
    if h % hkv:
        raise OpError(f"scaled_dot_product_attention: {h} query heads are not a multiple of "
                         f"{hkv} key/value heads{_where()}")
    return h, hkv


def _repeat_kv(query, kv):
    """(B, Hkv, S, E) -> (B, H, S, E): each key/value head serves H // Hkv query heads."""
    h, hkv = _check_heads(query, kv)
    lead = kv.shape[:-3]
    s, e = kv.shape[-2], kv.shape[-1]
    kv = unsqueeze(kv, -3)  # (..., Hkv, 1, S, E)
    kv = expand(kv, *lead, hkv, h // hkv, s, e)
    return reshape(kv, lead + (h, s, e))


# ---------------------------------------------------------------- the fused op (CPU)
def _split_groups(q, k, v, mask, groups):
    """For grouped-query attention view q (..., H, L, E) as (..., Hkv, G, L, E) and k, v
    (..., Hkv, S, E) as (..., Hkv, 1, S, E), so that matmul broadcasts k over the group
    without copying it. The mask is broadcast (a view) to q's batch dims and rows (1 or L)."""
    L = q.shape[-2]
    S = k.shape[-2]
    lead = q.shape[:-2]
    if mask is not None:
        xp = xp_of(q)
        lm = mask.shape[-2] if mask.ndim >= 2 and mask.shape[-2] == L else 1
        mask = xp.broadcast_to(mask, lead + (lm, S))
    if groups > 1:
        h = lead[-1]
        q = q.reshape(lead[:-1] + (h // groups, groups) + q.shape[-2:])
        k = k[..., None, :, :]
        v = v[..., None, :, :]
        if mask is not None:
            mask = mask.reshape(lead[:-1] + (h // groups, groups) + mask.shape[-2:])
    return q, k, v, mask


def _bmm(a, b):
    """A block's batched product: on the C pool, whole matrices of the batch per thread
    (kernels/c_eager.py `matmul`), where NumPy's matmul would run the small matrices one
    after another, each on all of OpenBLAS's threads."""
    out = _c_eager.matmul(a, b)
    return np.matmul(a, b) if out is None else out


def _apply_mask(s, mask, causal, i0, i1, j0, j1):
    """Mask the (..., i1 - i0, j1 - j0) block of scores in place."""
    if mask is not None:
        mb = mask[..., i0:i1, j0:j1] if mask.shape[-2] > 1 else mask[..., :, j0:j1]
        if mb.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~mb)
        else:
            s += mb
    if causal and j1 - 1 > i0:  # some key in the block lies after some query: top-left aligned
        cut = np.arange(j0, j1)[None, :] > np.arange(i0, i1)[:, None]
        np.copyto(s, -np.inf, where=cut)


def _query_blocks(L, causal, batch):
    """Query blocks: all rows at once unless causal, and at most BLOCK_ELEMS scores per
    block (batch = batch * heads), so that memory stays linear in the sequence length."""
    step = min(L, QUERY_BLOCK) if causal else L
    step = max(1, min(step, BLOCK_ELEMS // max(1, batch * KEY_BLOCK)))
    return [(i0, min(L, i0 + step)) for i0 in range(0, L, step)]


def _cpu_forward(q, k, v, mask, scale, causal, groups):
    got = _c_attention.forward(q, k, v, mask, scale, causal, groups)   # small heads, in C
    if got is not None:
        return got
    acc = acc_dtype(q.dtype)
    q, k, v, mask = _split_groups(q, k, v, mask, groups)
    L, S = q.shape[-2], k.shape[-2]
    qs = q.astype(acc) * scale  # (..., L, E), the scale folded into q
    k = k.astype(acc, copy=False)
    v = v.astype(acc, copy=False)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    out = np.empty(lead + (L, v.shape[-1]), acc)
    stats = np.empty(lead + (L, 2), acc)
    batch = int(np.prod(lead, dtype=np.int64))
    for i0, i1 in _query_blocks(L, causal, batch):
        qb = qs[..., i0:i1, :]
        m = np.full(lead + (i1 - i0,), -np.inf, acc)
        l = np.zeros(lead + (i1 - i0,), acc)
        o = out[..., i0:i1, :]
        o.fill(0)
        kend = min(S, i1) if causal else S
        for j0 in range(0, kend, KEY_BLOCK):
            j1 = min(kend, j0 + KEY_BLOCK)
            s = _bmm(qb, k[..., j0:j1, :].swapaxes(-1, -2))  # (..., Lq, Bk)
            corr = _c_rows.flash_block(s, m, l, i0, j0, causal) if mask is None else None
            if corr is not None:   # the step below in one C pass over the block (kernels/c_rows.py)
                o *= corr[..., None]
                o += _bmm(s, v[..., j0:j1, :])
                continue
            _apply_mask(s, mask, causal, i0, i1, j0, j1)
            m_new = np.maximum(m, s.max(axis=-1))
            m_safe = np.where(m_new == -np.inf, 0.0, m_new)  # no key seen yet: avoid inf - inf
            corr = np.exp(m - m_safe)
            s -= m_safe[..., None]
            np.exp(s, out=s)                                   # p, unnormalised
            l *= corr
            l += s.sum(axis=-1)
            o *= corr[..., None]
            o += _bmm(s, v[..., j0:j1, :])
            m = m_new
        dead = l == 0  # no key allowed: zeros out, and m = +inf makes every p zero in backward
        o /= np.where(dead, 1.0, l)[..., None]
        stats[..., i0:i1, 0] = np.where(dead, np.inf, m)
        stats[..., i0:i1, 1] = np.log(np.where(dead, 1.0, l))
    return out, stats


def _cpu_backward(q, k, v, out, stats, g, mask, scale, causal, groups):
    got = _c_attention.backward(q, k, v, out, stats, g, mask, scale, causal, groups)
    if got is not None:
        return got
    acc = acc_dtype(q.dtype)
    qshape, kshape, vshape = q.shape, k.shape, v.shape
    q, k, v, mask = _split_groups(q, k, v, mask, groups)
    L, S = q.shape[-2], k.shape[-2]
    qs = q.astype(acc) * scale
    k = k.astype(acc, copy=False)
    v = v.astype(acc, copy=False)
    rows = q.shape[:-1]  # per query row, in the grouped layout
    g = g.astype(acc, copy=False).reshape(rows + out.shape[-1:])
    dd = np.einsum("...ld,...ld->...l", g, out.astype(acc, copy=False).reshape(g.shape))  # rowsum(dO * O)
    stats = stats.reshape(rows + (2,))
    dq = np.zeros(qs.shape, acc)
    dk = np.zeros(k.shape, acc)
    dv = np.zeros(v.shape, acc)
    red = groups > 1  # sum the group axis back into the shared key/value head

    def add(dst, blk):
        dst += blk.sum(axis=-3, keepdims=True) if red else blk

    batch = int(np.prod(np.broadcast_shapes(qs.shape[:-2], k.shape[:-2]), dtype=np.int64))
    # the C step writes exact zeros for masked keys; with a row's max or sum not finite (an
    # inf or nan query row) NumPy's exp(-inf - nan) is nan there: that row takes NumPy's step
    c_probs = mask is None and bool(np.isfinite(stats).all())
    for i0, i1 in _query_blocks(L, causal, batch):
        qb, gb = qs[..., i0:i1, :], g[..., i0:i1, :]
        mb, lb, db = stats[..., i0:i1, 0, None], stats[..., i0:i1, 1, None], dd[..., i0:i1, None]
        kend = min(S, i1) if causal else S
        for j0 in range(0, kend, KEY_BLOCK):
            j1 = min(kend, j0 + KEY_BLOCK)
            kb, vb = k[..., j0:j1, :], v[..., j0:j1, :]
            s = _bmm(qb, kb.swapaxes(-1, -2))
            if not c_probs or not _c_rows.flash_probs(
                    s, np.ascontiguousarray(mb[..., 0]), np.ascontiguousarray(lb[..., 0]), i0, j0, causal):
                _apply_mask(s, mask, causal, i0, i1, j0, j1)
                s -= mb
                s -= lb
                np.exp(s, out=s)                                      # p
            add(dv[..., j0:j1, :], _bmm(s.swapaxes(-1, -2), gb))
            dp = _bmm(gb, vb.swapaxes(-1, -2))
            dp -= db
            dp *= s                                                   # ds
            dq[..., i0:i1, :] += _bmm(dp, kb)
            add(dk[..., j0:j1, :], _bmm(dp.swapaxes(-1, -2), qb))  # qb carries the scale
    dq *= scale
    return dq.reshape(qshape), dk.reshape(kshape), dv.reshape(vshape)


def _attention_flops(attrs, in_meta, out_meta):
    """With q (..., L, E), k (..., S, E), v (..., S, Ev): 2*L*S*(E + Ev) for the two matmuls,
    L*S for the scale, 5*L*S for the softmax and L*S for a mask or causal masking, per batch
    element and query head: the T^2 terms."""
    (L, E), S = in_meta[0][0][-2:], in_meta[1][0][-2]
    heads = math.prod(out_meta[0][0][:-1]) // L                  # batch * query heads
    ev = out_meta[0][0][-1]
    masked = len(in_meta) > 3 or bool(attrs.get("is_causal"))
    return heads * L * S * (2 * (E + ev) + 6 + masked)


def _rebuilt(ctx):
    """What FlashAttention's backward and jvp start from: (q, k, v, mask, scale, rep, kr, p)
    with the saved inputs, rep(t) a key/value tensor repeated to the query heads (GQA; else
    t itself), kr = rep(k) and the probabilities rebuilt in ops as the reference does."""
    a = ctx.attrs
    saved = ctx.saved_tensors
    q, k, v = saved[:3]
    mask = saved[5] if len(saved) == 6 else None
    rep = (lambda t: _repeat_kv(q, t)) if a["groups"] > 1 else (lambda t: t)
    kr = rep(k)
    return q, k, v, mask, a["scale"], rep, kr, _probs(q, kr, mask, a["is_causal"], a["scale"])


class FlashAttention(Function):
    compile_rule = Rule(flops=_attention_flops)
    name = "scaled_dot_product_attention"
    fusion = "fused"

    @staticmethod
    def forward(ctx, q, k, v, *mask, scale, is_causal, groups):
        m = mask[0] if mask else None
        if is_cpu(q):
            out, stats = _cpu_forward(q, k, v, m, scale, is_causal, groups)
            out = out.reshape(q.shape[:-1] + (v.shape[-1],)).astype(q.dtype, copy=False)
            stats = stats.reshape(q.shape[:-1] + (2,))
        else:
            out, stats = cuda_attention.forward(q, k, v, m, scale, is_causal, groups)
        ctx.save_for_backward(q, k, v, out, stats, *mask)
        return out

    @staticmethod
    def backward(ctx, g):
        """The gradients in tinytensor ops (probabilities rebuilt as the reference does),
        so that they are differentiable again."""
        q, k, v, mask, scale, rep, kr, p = _rebuilt(ctx)
        vr, groups = rep(v), ctx.attrs["groups"]
        dv = matmul(p.mT, g)
        dp = matmul(g, vr.mT)
        ds = p * (dp - sum_(dp * p, dim=-1, keepdim=True))
        dq = matmul(ds, kr) * scale
        dk = matmul(ds.mT, q) * scale
        if groups > 1:
            lead = k.shape[:-3] + (k.shape[-3], groups)
            dk = sum_(reshape(dk, lead + tuple(dk.shape[-2:])), dim=-3)
            dv = sum_(reshape(dv, lead + tuple(dv.shape[-2:])), dim=-3)
        return (dq, dk, dv) + ((None,) if mask is not None else ())

    @staticmethod
    def jvp(ctx, tq, tk, tv, *tmask):
        """d(P V) = dP V + P dV with dP = P * (dS - rowsum(P * dS)) (softmax's tangent) and
        dS = scale * (dQ K^T + Q dK^T) (+ the tangent of a float mask), the probabilities
        rebuilt in ops as backward does."""
        q, k, v, mask, scale, rep, kr, p = _rebuilt(ctx)   # p: (..., L, S)
        ds = None
        if tq is not None:
            ds = matmul(tq, kr.mT)
        if tk is not None:
            ds = add(ds, matmul(q, rep(tk).mT))
        if ds is not None:
            ds = ds * scale
        if tmask and tmask[0] is not None:   # a float mask is added to the scores
            ds = add(ds, tmask[0])
        out = None
        if ds is not None:
            out = matmul(p * (ds - sum_(p * ds, dim=-1, keepdim=True)), rep(v))
        if tv is not None:
            out = add(out, matmul(p, rep(tv)))
        return out

    @staticmethod
    def backward_arrays(ctx, g):
        a = ctx.attrs
        saved = ctx.saved_arrays
        q, k, v, out, stats = saved[:5]
        m = saved[5] if len(saved) == 6 else None
        bwd = _cpu_backward if is_cpu(q) else cuda_attention.backward
        grads = bwd(q, k, v, out, stats, g, m, a["scale"], a["is_causal"], a["groups"])
        return tuple(x.astype(q.dtype, copy=False) for x in grads) + ((None,) if m is not None else ())


# ---------------------------------------------------------------- the rule and the function
def _groups(q, k, enable_gqa):
    """Query heads per key/value head (1 without GQA), or None when the batch/head shapes
    differ otherwise (the fused op takes no broadcasting over them)."""
    if q.shape[:-2] == k.shape[:-2]:
        return 1
    if enable_gqa and q.ndim >= 3 and q.shape[:-3] == k.shape[:-3] and q.shape[-3] % k.shape[-3] == 0:
        return q.shape[-3] // k.shape[-3]
    return None


def _why_not_fused(query, key, value, attn_mask, dropout_p, enable_gqa):
    """None when the fused op takes these (one float dtype, equal batch dims (GQA aside),
    no dropout, a mask that needs no gradient, and on CUDA what its kernels take), else why."""
    if dropout_p > 0.0:
        return "dropout_p > 0 (the fused op has no dropout)"
    q, k, v = query.data, key.data, value.data
    if q.dtype.kind != "f" or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"dtypes {q.dtype}, {k.dtype}, {v.dtype} (the fused op takes one float dtype)"
    if q.size == 0 or k.size == 0:
        return "empty input"
    if q.ndim != k.ndim or k.ndim != v.ndim or k.shape[:-1] != v.shape[:-1] or _groups(q, k, enable_gqa) is None:
        return (f"batch dims of query {tuple(q.shape)}, key {tuple(k.shape)}, value "
                f"{tuple(v.shape)} broadcast (the fused op takes them equal)")
    if attn_mask is not None and (attn_mask.requires_grad or carries_tangent(attn_mask)):
        return "attn_mask requires grad (the fused op gives none for it)"
    if not is_cpu(q):
        return cuda_attention.why_not(q, k, v, None if attn_mask is None else attn_mask.data)
    return None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v over (..., L, E) queries and (..., S, E) keys."""
    op = "scaled_dot_product_attention"
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise OpError(f"{op}: query, key and value need at least 2 dims, got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}{_where()}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise OpError(f"scaled_dot_product_attention: shapes query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)} do not fit together "
                         f"(need query[-1] == key[-1] and key[-2] == value[-2]){_where()}")
    gqa = enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]
    if gqa:
        _check_heads(query, key)
    L, S = query.shape[-2], key.shape[-2]
    heads = (query.shape[-3],) if gqa else ()  # key and value as repeated to the query heads
    lead = broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2 - len(heads)]) + heads,
                            tuple(value.shape[:-2 - len(heads)]) + heads,
                            op=f"{op}: query, key and value batch")
    if attn_mask is not None:
        if broadcast_shapes(tuple(attn_mask.shape), lead + (L, S), op=f"{op}: attn_mask") != lead + (L, S):
            raise OpError(f"{op}: attn_mask shape {tuple(attn_mask.shape)} does not broadcast "
                             f"to the scores shape {lead + (L, S)}{_where()}")
    if is_causal and attn_mask is not None:
        raise OpError(f"{op}: pass either attn_mask or is_causal, not both")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    why = _fusion.choose("attention", _why_not_fused, query, key, value, attn_mask, dropout_p, enable_gqa)
    if why is None:
        extra = (attn_mask,) if attn_mask is not None else ()
        return FlashAttention.apply(query, key, value, *extra, scale=float(scale),
                                    is_causal=bool(is_causal), groups=_groups(query.data, key.data, enable_gqa))
    k, v = (_repeat_kv(query, key), _repeat_kv(query, value)) if gqa else (key, value)
    probs = _probs(query, k, attn_mask, is_causal, scale)
    if dropout_p > 0.0:
        probs = dropout(probs, dropout_p, training=True)
    return _fusion.mark(matmul(probs, v), op, why, query, key, value, attn_mask)
