"""scaled_dot_product_attention: the reference implementation in primitive ops.

Masks follow PyTorch: a bool mask is True where attention is allowed; a float mask is
added to the scores. A query row whose keys are all masked gets zeros out and zero
gradients (never NaN): its scores are neutralised before the softmax and its
probabilities zeroed after it.
"""
import math

import numpy as np

from ..tensor import Tensor
from .elementwise import where
from .linalg import matmul
from .movement import expand, reshape, unsqueeze, _where
from .nn import dropout, softmax


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v over (..., L, E) queries and (..., S, E) keys."""
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError("scaled_dot_product_attention: query, key and value need at least 2 dims")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: shapes query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)} do not fit together "
                         f"(need query[-1] == key[-1] and key[-2] == value[-2]){_where()}")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key, value = _repeat_kv(query, key), _repeat_kv(query, value)
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.mT) * scale  # (..., L, S)
    xp = query.device.xp
    allowed = None  # bool array, True where a query may attend to a key
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
        allowed = xp.tril(xp.ones((L, S), dtype=bool))
    if attn_mask is not None:
        if attn_mask.data.dtype == np.bool_:
            allowed = attn_mask.data
        else:
            scores = scores + attn_mask
    if allowed is not None:
        allowed_t = Tensor._make(allowed, query.device, False)
        scores = where(allowed_t, scores, float("-inf"))
    # rows with no finite score would give 0/0 in softmax: neutralise them, zero them after
    row_ok = Tensor._make(xp.isfinite(scores.data).any(axis=-1, keepdims=True), query.device, False)
    all_ok = bool(row_ok.data.all())
    if not all_ok:
        scores = where(row_ok, scores, 0.0)
    probs = softmax(scores, dim=-1)
    if not all_ok:
        probs = where(row_ok, probs, 0.0)
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
