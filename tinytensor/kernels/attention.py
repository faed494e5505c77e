"""Fused scaled_dot_product_attention, flash-style: the (L, S) score matrix is never
materialised.

CPU: queries in blocks (all of them at once unless causal), keys in blocks of
`KEY_BLOCK`; an online softmax keeps a running max `m`, a running sum `l` and an
unnormalised output per query row, rescaled whenever the max grows. Memory is
O(L * KEY_BLOCK + (L + S) * E), linear in the sequence length. The forward keeps per row
the max m and log(l) (`stats`, (..., L, 2)); the backward recomputes each block's
probabilities from them (flash-attention-2) as p = exp((s - m) - log(l)), never from the
log-sum-exp m + log(l): at large scores that sum rounds (at 1e8 a float32 holds only
multiples of 8, so m + log(2) = m) and p with it. Then dV += P^T dO,
dS = P * (dO V^T - rowsum(dO * O)), dQ += dS K, dK += dS^T Q.

CUDA: `cuda/attention.cu`: tensor-core kernels (mma.sync m16n8k16, sm_80 and newer) for
float16 with head dims 64 and 128; a SIMT kernel for float32, for any head dim up to 128
and for float16 on older GPUs (T4). The CUDA path takes no mask, a causal mask, or a key-padding
mask (one row of the mask per batch/head, shape (..., 1, S)); any other mask, float64 on
the GPU, head dims above 128 (above 64 on GPUs with 64 KiB of shared memory per block, T4),
or value dims unlike the key dims take the reference path.

Semantics are the reference's (`tinytensor.ops.attention`): a bool mask is True where
attention is allowed, a float mask is added to the scores, causal is top-left aligned,
a query row that sees no key gives zeros and zero gradients, grouped-query attention
(`enable_gqa`) shares each key/value head among H // Hkv query heads.
"""
import math

import numpy as np

from ..autograd import STATE
from ..core.function import Function
from ..ops.elementwise import where
from ..ops.linalg import matmul
from ..ops.reduce import sum as sum_
from . import _cuda
from ._common import acc_dtype, const, f32, i32, i64, is_cpu, xp_of

CUDA_SOURCE = "attention"
KEY_BLOCK = 1024          # keys per block on the CPU
QUERY_BLOCK = 1024        # queries per block on the CPU when causal (whole blocks are skipped)
BLOCK_ELEMS = 1 << 22     # at most this many scores (batch * heads * queries * keys) per block
MMA_HEAD_DIMS = (64, 128)
MMA_MIN_ARCH = 80         # compute capability the tensor-core kernels need
SIMT_MAX_HEAD_DIM = 128


# ---------------------------------------------------------------- layout
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


# ---------------------------------------------------------------- CPU
def _cpu_forward(q, k, v, mask, scale, causal, groups):
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
            s = np.matmul(qb, k[..., j0:j1, :].swapaxes(-1, -2))  # (..., Lq, Bk)
            _apply_mask(s, mask, causal, i0, i1, j0, j1)
            m_new = np.maximum(m, s.max(axis=-1))
            m_safe = np.where(m_new == -np.inf, 0.0, m_new)  # no key seen yet: avoid inf - inf
            corr = np.exp(m - m_safe)
            s -= m_safe[..., None]
            np.exp(s, out=s)                                   # p, unnormalised
            l *= corr
            l += s.sum(axis=-1)
            o *= corr[..., None]
            o += np.matmul(s, v[..., j0:j1, :])
            m = m_new
        dead = l == 0  # no key allowed: zeros out, and m = +inf makes every p zero in backward
        o /= np.where(dead, 1.0, l)[..., None]
        stats[..., i0:i1, 0] = np.where(dead, np.inf, m)
        stats[..., i0:i1, 1] = np.log(np.where(dead, 1.0, l))
    return out, stats


def _cpu_backward(q, k, v, out, stats, g, mask, scale, causal, groups):
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
    for i0, i1 in _query_blocks(L, causal, batch):
        qb, gb = qs[..., i0:i1, :], g[..., i0:i1, :]
        mb, lb, db = stats[..., i0:i1, 0, None], stats[..., i0:i1, 1, None], dd[..., i0:i1, None]
        kend = min(S, i1) if causal else S
        for j0 in range(0, kend, KEY_BLOCK):
            j1 = min(kend, j0 + KEY_BLOCK)
            kb, vb = k[..., j0:j1, :], v[..., j0:j1, :]
            s = np.matmul(qb, kb.swapaxes(-1, -2))
            _apply_mask(s, mask, causal, i0, i1, j0, j1)
            s -= mb
            s -= lb
            np.exp(s, out=s)                                          # p
            add(dv[..., j0:j1, :], np.matmul(s.swapaxes(-1, -2), gb))
            dp = np.matmul(gb, vb.swapaxes(-1, -2))
            dp -= db
            dp *= s                                                   # ds
            dq[..., i0:i1, :] += np.matmul(dp, kb)
            add(dk[..., j0:j1, :], np.matmul(dp.swapaxes(-1, -2), qb))  # qb carries the scale
    dq *= scale
    return dq.reshape(qshape), dk.reshape(kshape), dv.reshape(vshape)


# ---------------------------------------------------------------- CUDA
def _cuda_layout(q, k, mask, groups):
    """Flattened batch*heads count, heads, and the key-padding bias (P, S) float32 or None."""
    import cupy
    L, S = q.shape[-2], k.shape[-2]
    P = q.size // (L * q.shape[-1])
    H = q.shape[-3] if q.ndim >= 3 else 1
    bias = None
    if mask is not None:
        m = cupy.broadcast_to(mask, q.shape[:-2] + (1, S)).reshape(P, S)  # one row per batch/head
        if m.dtype == np.bool_:
            bias = cupy.where(m, 0.0, -np.inf).astype(np.float32)
        else:
            bias = cupy.ascontiguousarray(m, dtype=np.float32)
    return P, H, bias


def _use_mma(q, *kv):
    """Tensor cores for float16 with head dim 64 or 128 (rows moved 16 bytes at a time) on
    sm_80 and newer (mma.m16n8k16 and cvt to f16x2); the SIMT kernels below that."""
    return (str(q.dtype) == "float16" and q.shape[-1] in MMA_HEAD_DIMS
            and _cuda.compute_capability() >= MMA_MIN_ARCH
            and all(a.data.ptr % 16 == 0 for a in (q,) + kv))


def _simt_dim(e):
    return 64 if e <= 64 else 128


def _bq(d):
    return 32 if d == 128 else 64


def _mma_smem(d):
    return 3 * 64 * (d + 8) * 2


def _mma_bwd_smem(d):
    bq = _bq(d)
    return (2 * 64 * (d + 8) + 2 * bq * (d + 8) + 64 * (bq + 8)) * 2 + 3 * bq * 4


def _simt_smem(d):
    return 3 * 32 * (d + 1) * 4


def _simt_bwd_smem(d):
    return (4 * 32 * (d + 1) + 2 * 32 * 33 + 3 * 32) * 4


def _cuda_forward(q, k, v, mask, scale, causal, groups):
    import cupy
    q, k, v = (cupy.ascontiguousarray(a) for a in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    P, H, bias = _cuda_layout(q, k, mask, groups)
    o = cupy.empty_like(q)
    stats = cupy.empty(q.shape[:-1] + (2,), np.float32)  # (m, ls) per row, a float2
    t = _cuda.ctype(q.dtype)
    args = (q, k, v, o, stats, bias if bias is not None else stats, i32(bias is not None), i32(H),
            i32(groups), i32(L), i32(S), i32(E), f32(scale * math.log2(math.e)), i32(causal))
    if _use_mma(q, k, v):
        _cuda.launch(CUDA_SOURCE, f"flash_fwd_mma<{t}, {E}>", (-(-L // 64), P), (128,), args,
                     shared_mem=_mma_smem(E))
    else:
        d = _simt_dim(E)
        _cuda.launch(CUDA_SOURCE, f"flash_fwd_simt<{t}, {d}>", (-(-L // 32), P), (128,), args,
                     shared_mem=_simt_smem(d))
    return o, stats


def _cuda_backward(q, k, v, o, stats, g, mask, scale, causal, groups):
    import cupy
    q, k, v, o, g = (cupy.ascontiguousarray(a) for a in (q, k, v, o, g))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    P, H, bias = _cuda_layout(q, k, mask, groups)
    t = _cuda.ctype(q.dtype)
    dd = cupy.empty(q.shape[:-1], np.float32)
    rows = P * L
    _cuda.launch(CUDA_SOURCE, f"flash_bwd_dot<{t}>", _cuda.grid(-(-rows // 4)), (32, 4),
                 (g, o, dd, i64(rows), i32(E)))
    dq = cupy.zeros(q.shape, np.float32)
    dk = cupy.empty((P, S, E), np.float32)  # per query head; summed over groups below
    dv = cupy.empty((P, S, E), np.float32)
    args = (q, k, v, g, stats, dd, dq, dk, dv, bias if bias is not None else dd,
            i32(bias is not None), i32(H), i32(groups), i32(L), i32(S), i32(E),
            f32(scale * math.log2(math.e)), f32(scale), i32(causal))
    if _use_mma(q, k, v, o, g):
        _cuda.launch(CUDA_SOURCE, f"flash_bwd_mma<{t}, {E}, {_bq(E)}>", (-(-S // 64), P), (128,),
                     args, shared_mem=_mma_bwd_smem(E))
    else:
        d = _simt_dim(E)
        _cuda.launch(CUDA_SOURCE, f"flash_bwd_simt<{t}, {d}>", (-(-S // 32), P), (128,), args,
                     shared_mem=_simt_bwd_smem(d))
    if groups > 1:
        shp = (P // groups, groups, S, E)
        dk = dk.reshape(shp).sum(axis=1)
        dv = dv.reshape(shp).sum(axis=1)
    return dq.astype(q.dtype), dk.astype(q.dtype).reshape(k.shape), dv.astype(q.dtype).reshape(v.shape)


def cuda_instantiations(full=False, arch=90):
    """The kernels the dispatcher can pick on a GPU of compute capability `arch` (`full`),
    or all but the float16 SIMT ones, which are the float32 code with a different load
    (and on GPUs without the tensor-core kernels, what float16 runs on: kept)."""
    out = []
    mma = arch >= MMA_MIN_ARCH
    if mma:
        for d in MMA_HEAD_DIMS:
            out += [f"flash_fwd_mma<half16, {d}>", f"flash_bwd_mma<half16, {d}, {_bq(d)}>"]
    for t in ("float", "half16") if full or not mma else ("float",):
        out.append(f"flash_bwd_dot<{t}>")
        for d in (64, 128):
            out += [f"flash_fwd_simt<{t}, {d}>", f"flash_bwd_simt<{t}, {d}>"]
    return out


def cuda_supports(q, k, v, mask):
    """Whether the CUDA kernels take these arrays (else the reference path runs)."""
    if str(q.dtype) not in ("float32", "float16"):
        return False
    if q.size // max(q.shape[-2] * q.shape[-1], 1) > 65535:  # batch * heads is grid.y
        return False
    e = q.shape[-1]
    if e > SIMT_MAX_HEAD_DIM or v.shape[-1] != e:
        return False
    # the SIMT backward is the kernel with the most shared memory (73 KiB at head dim 128),
    # more than a T4 block may have (64 KiB)
    if _simt_bwd_smem(_simt_dim(e)) > _cuda.max_shared_memory():
        return False
    return mask is None or mask.ndim < 2 or mask.shape[-2] == 1


_cuda.register(CUDA_SOURCE, cuda_instantiations)


# ---------------------------------------------------------------- the op
class FlashAttention(Function):
    name = "scaled_dot_product_attention"

    @staticmethod
    def forward(ctx, q, k, v, *mask, scale, is_causal, groups):
        m = mask[0] if mask else None
        if is_cpu(q):
            out, stats = _cpu_forward(q, k, v, m, scale, is_causal, groups)
            out = out.reshape(q.shape[:-1] + (v.shape[-1],)).astype(q.dtype, copy=False)
            stats = stats.reshape(q.shape[:-1] + (2,))
        else:
            out, stats = _cuda_forward(q, k, v, m, scale, is_causal, groups)
        ctx.save_for_backward(q, k, v, out, stats, *mask)
        return out

    @staticmethod
    def backward(ctx, g):
        a = ctx.attrs
        scale, causal, groups = a["scale"], a["is_causal"], a["groups"]
        if STATE.grad_enabled:
            return _differentiable_backward(ctx, g, scale, causal, groups)
        saved = ctx.saved_arrays
        q, k, v, out, stats = saved[:5]
        m = saved[5] if len(saved) == 6 else None
        if is_cpu(q):
            dq, dk, dv = _cpu_backward(q, k, v, out, stats, g.data, m, scale, causal, groups)
        else:
            dq, dk, dv = _cuda_backward(q, k, v, out, stats, g.data, m, scale, causal, groups)
        res = tuple(const(x.astype(q.dtype, copy=False), g) for x in (dq, dk, dv))
        return res + ((None,) if m is not None else ())


def _differentiable_backward(ctx, g, scale, causal, groups):
    """The gradients in tinytensor ops (probabilities rebuilt as the reference does), so
    that they are differentiable again."""
    from ..ops.attention import _repeat_kv
    from ..ops.movement import reshape
    from ..ops.nn import softmax
    saved = ctx.saved_tensors
    q, k, v = saved[:3]
    mask = saved[5] if len(saved) == 6 else None
    kr, vr = (_repeat_kv(q, k), _repeat_kv(q, v)) if groups > 1 else (k, v)
    xp = q.device.xp
    L, S = q.shape[-2], k.shape[-2]
    s = matmul(q, kr.mT) * scale  # (..., L, S)
    live = None
    if causal:
        s = where(const(xp.tril(xp.ones((L, S), dtype=bool)), q), s, float("-inf"))
    elif mask is not None:
        md = mask.data
        if md.dtype == np.bool_:
            live = md.any(axis=-1, keepdims=True)
            s = where(mask, s, float("-inf"))
        else:
            live = xp.isfinite(md).any(axis=-1, keepdims=True)
            s = s + mask
    if live is not None:
        ok = const(live, q)
        p = where(ok, softmax(where(ok, s, 0.0), dim=-1), 0.0)
    else:
        p = softmax(s, dim=-1)
    dv = matmul(p.mT, g)
    dp = matmul(g, vr.mT)
    ds = p * (dp - sum_(dp * p, dim=-1, keepdim=True))
    dq = matmul(ds, kr) * scale
    dk = matmul(ds.mT, q) * scale
    if groups > 1:
        lead = k.shape[:-3]
        hkv = k.shape[-3]
        dk = sum_(reshape(dk, lead + (hkv, groups) + tuple(dk.shape[-2:])), dim=-3)
        dv = sum_(reshape(dv, lead + (hkv, groups) + tuple(dv.shape[-2:])), dim=-3)
    return (dq, dk, dv) + ((None,) if mask is not None else ())


def applies(query, key, value, attn_mask, dropout_p):
    """The fused op takes equal batch dims (GQA aside), one float dtype, no dropout and a
    mask that needs no gradient; on CUDA also what `cuda_supports` says."""
    if dropout_p > 0.0:
        return False
    q, k, v = query.data, key.data, value.data
    if q.dtype.kind != "f" or k.dtype != q.dtype or v.dtype != q.dtype or q.size == 0 or k.size == 0:
        return False
    if q.ndim != k.ndim or k.ndim != v.ndim or k.shape[:-1] != v.shape[:-1]:
        return False
    if attn_mask is not None and attn_mask.requires_grad:
        return False
    if not is_cpu(q):
        return cuda_supports(q, k, v, None if attn_mask is None else attn_mask.data)
    return True


def attention(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """The fused op, or None when the batch/head shapes need the reference path."""
    q, k = query.data, key.data
    groups = 1
    if q.shape[:-2] != k.shape[:-2]:
        if not (enable_gqa and q.ndim >= 3 and q.shape[:-3] == k.shape[:-3]
                and q.shape[-3] % k.shape[-3] == 0):
            return None
        groups = q.shape[-3] // k.shape[-3]
    extra = (attn_mask,) if attn_mask is not None else ()
    return FlashAttention.apply(query, key, value, *extra, scale=float(scale),
                                is_causal=bool(is_causal), groups=groups)
