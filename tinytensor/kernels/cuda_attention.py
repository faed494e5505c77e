"""CUDA launch of flash attention (`cuda/attention.cu`): tensor-core kernels (mma.sync
m16n8k16, sm_80 and newer) for float16 with head dims 64 and 128; a SIMT kernel for
float32, for any head dim up to 128 and for float16 on older GPUs (T4). It takes no mask, a
causal mask, or a key-padding mask (one row of the mask per batch/head, shape (..., 1, S));
`why_not` says what else sends a call to the reference path. The op that calls it is
`tinytensor.ops.attention.FlashAttention`."""
import math

import numpy as np

from . import _cuda
from ._common import f32, i32, i64

CUDA_SOURCE = "attention"
MMA_HEAD_DIMS = (64, 128)
MMA_MIN_ARCH = 80         # compute capability the tensor-core kernels need
SIMT_MAX_HEAD_DIM = 128


def _layout(q, k, mask, groups):
    """Flattened batch*heads count, heads, and the key-padding bias (P, S) float32 or None."""
    # CuPy is optional: imported only on a GPU path
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


def forward(q, k, v, mask, scale, causal, groups):
    """(out, stats (..., L, 2) float32: the max and log(sum) per query row)."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    q, k, v = (cupy.ascontiguousarray(a) for a in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    P, H, bias = _layout(q, k, mask, groups)
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


def backward(q, k, v, o, stats, g, mask, scale, causal, groups):
    """(dq, dk, dv) in the inputs' dtype."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    q, k, v, o, g = (cupy.ascontiguousarray(a) for a in (q, k, v, o, g))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    P, H, bias = _layout(q, k, mask, groups)
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


def why_not(q, k, v, mask):
    """None when the CUDA kernels take these arrays, else why the reference path runs."""
    if str(q.dtype) not in ("float32", "float16"):
        return f"no CUDA kernel for {q.dtype}"
    bh = q.size // max(q.shape[-2] * q.shape[-1], 1)
    if bh > 65535:  # batch * heads is grid.y
        return f"batch * heads = {bh} is above 65535 (the CUDA grid's y)"
    e = q.shape[-1]
    if e > SIMT_MAX_HEAD_DIM:
        return f"head dim {e} is above {SIMT_MAX_HEAD_DIM}"
    if v.shape[-1] != e:
        return f"value dim {v.shape[-1]} differs from the key dim {e}"
    # the SIMT backward is the kernel with the most shared memory (73 KiB at head dim 128),
    # more than a T4 block may have (64 KiB)
    need, have = _simt_bwd_smem(_simt_dim(e)), _cuda.max_shared_memory()
    if need > have:
        return f"head dim {e} needs {need} bytes of shared memory per block, the GPU has {have}"
    if not (mask is None or mask.ndim < 2 or mask.shape[-2] == 1):
        return "a mask with rows per query (the CUDA kernels take key padding, shape (..., 1, S))"
    return None


_cuda.register(CUDA_SOURCE, cuda_instantiations)
