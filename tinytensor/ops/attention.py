"""scaled_dot_product_attention: the reference implementation in primitive ops.

Masks follow PyTorch: a bool mask is True where attention is allowed; a float mask is
added to the scores. A query row whose keys are all masked gets zeros out and zero
gradients (never NaN): its scores are neutralised before the softmax and its
probabilities zeroed after it.
"""
import math

import numpy as np

from ..kernels import attention as _k_attention, fusion as _fusion
from ..core.tensor import Tensor
from .elementwise import where
from .linalg import matmul
from .movement import broadcast_shapes, expand, reshape, unsqueeze, _where
from .nn import dropout, softmax


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v over (..., L, E) queries and (..., S, E) keys."""
    op = "scaled_dot_product_attention"
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError(f"{op}: query, key and value need at least 2 dims, got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}{_where()}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: shapes query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)} do not fit together "
                         f"(need query[-1] == key[-1] and key[-2] == value[-2]){_where()}")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key, value = _repeat_kv(query, key), _repeat_kv(query, value)
    L, S = query.shape[-2], key.shape[-2]
    lead = broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                            tuple(value.shape[:-2]), op=f"{op}: query, key and value batch")
    if attn_mask is not None:
        if broadcast_shapes(tuple(attn_mask.shape), lead + (L, S), op=f"{op}: attn_mask") != lead + (L, S):
            raise ValueError(f"{op}: attn_mask shape {tuple(attn_mask.shape)} does not broadcast "
                             f"to the scores shape {lead + (L, S)}{_where()}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: pass either attn_mask or is_causal, not both")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if _fusion.enabled("attention") and _k_attention.applies(query, key, value, attn_mask, dropout_p):
        out = _k_attention.attention(query, key, value, attn_mask, is_causal, scale, enable_gqa)
        if out is not None:  # flash-style kernel (tinytensor.kernels.attention)
            return out
    scores = matmul(query, key.mT) * scale  # (..., L, S)
    xp = query.device.xp
    live = None  # bool array (mask shape[:-1] + (1,)), False on query rows that see no key
    if is_causal:
        # top-left aligned, as torch; every row keeps key 0, so no row is dead
        allowed = Tensor._make(xp.tril(xp.ones((L, S), dtype=bool)), query.device, False)
        scores = where(allowed, scores, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.data.dtype == np.bool_:
            row_ok = attn_mask.data.any(axis=-1, keepdims=True)
            scores = where(attn_mask, scores, float("-inf"))
        else:
            row_ok = xp.isfinite(attn_mask.data).any(axis=-1, keepdims=True)
            scores = scores + attn_mask
        if not bool(row_ok.all()):  # one sync on the (small) mask, not on the scores
            live = row_ok
    if live is not None:
        # a row with no finite score would give 0/0 in softmax: neutralise it before, zero it
        # after; `where` (not * 0) keeps its gradients exactly zero, never 0 * inf
        row_ok = Tensor._make(live, query.device, False)
        scores = where(row_ok, scores, 0.0)
        probs = where(row_ok, softmax(scores, dim=-1), 0.0)
    else:
        probs = softmax(scores, dim=-1)  # (..., L, S)
    if dropout_p > 0.0:
        probs = dropout(probs, dropout_p, training=True)
    return matmul(probs, value)  # (..., L, Ev)


def _repeat_kv(query, kv):
    """(B, Hkv, S, E) -> (B, H, S, E): each key/value head serves H // Hkv query heads."""
    h, hkv = query.shape[-3], kv.shape[-3]
    if h % hkv:
        raise ValueError(f"scaled_dot_product_attention: {h} query heads are not a multiple of "
                         f"{hkv} key/value heads{_where()}")
    lead = kv.shape[:-3]
    s, e = kv.shape[-2], kv.shape[-1]
    kv = unsqueeze(kv, -3)  # (..., Hkv, 1, S, E)
    kv = expand(kv, *lead, hkv, h // hkv, s, e)
    return reshape(kv, lead + (h, s, e))
