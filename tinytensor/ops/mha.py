"""Multi-head attention as torch.nn.functional.multi_head_attention_forward, and the two
pieces every attention module here shares: turning torch's masks into one mask for
scaled_dot_product_attention, and the explicit path that also returns the weights.

Masks follow torch.nn.MultiheadAttention (NOT F.scaled_dot_product_attention):
  key_padding_mask  (B, S)              bool, True = padding (ignored); a float mask is added
  attn_mask         (L, S), (B*nh, L, S) or anything broadcasting to (B, nh, L, S);
                    bool True = may NOT attend; a float mask is added to the scores
A row of scores that sees no key at all gives zeros here (torch gives NaN).
"""
import math

import numpy as np

from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..creation import as_tensor, ones, zeros
from ..dtypes import bool_
from ..messages import OpError
from .attention import scaled_dot_product_attention
from .elementwise import isfinite, logical_and, logical_not, where
from .movement import broadcast_shapes, cat, pad
from .nn import dropout, linear
from .softmax import softmax

__all__ = ["multi_head_attention_forward", "merge_attention_masks", "attention_with_weights"]


def _where():
    return f" in {STATE.scope_path}" if STATE.scope_path else ""


def _as_mask(m, like):
    if isinstance(m, Tensor):
        return m
    return as_tensor(np.asarray(m), device=like.device)


def merge_attention_masks(attn_mask, key_padding_mask, is_causal, B, nh, L, S, past, like, op):
    """One mask for scaled_dot_product_attention: bool (True = may attend) when every part
    is bool, else additive float; or (None, True) for the plain causal case. `past` keys
    are already cached: a causal query i sits at position past + i."""
    if is_causal and attn_mask is None and key_padding_mask is None and past == 0:
        return None, True
    allowed, additive = [], []
    if attn_mask is not None:
        m = _as_mask(attn_mask, like)
        if m.ndim == 2 and tuple(m.shape) == (L, S):
            m = m.reshape(1, 1, L, S)
        elif m.ndim == 3 and tuple(m.shape) == (B * nh, L, S):
            m = m.reshape(B, nh, L, S)
        elif m.ndim != 4 or broadcast_shapes(tuple(m.shape), (B, nh, L, S)) != (B, nh, L, S):
            raise ValueError(
                f"{op}: attn_mask shape {tuple(m.shape)} does not fit queries (B={B}, L={L}) and "
                f"keys (S={S}) with {nh} heads; expected ({L}, {S}), ({B * nh}, {L}, {S}) or 4-D "
                f"broadcasting to ({B}, {nh}, {L}, {S}){_where()}")
        (allowed if m.dtype.name == "bool" else additive).append(
            logical_not(m) if m.dtype.name == "bool" else m)
    if key_padding_mask is not None:
        m = _as_mask(key_padding_mask, like)
        if tuple(m.shape) != (B, S):
            raise ValueError(f"{op}: key_padding_mask shape {tuple(m.shape)} should be (batch, "
                             f"keys) = ({B}, {S}){_where()}")
        m = m.reshape(B, 1, 1, S)
        (allowed if m.dtype.name == "bool" else additive).append(
            logical_not(m) if m.dtype.name == "bool" else m)
    if is_causal:
        # tensor ops, not NumPy's tril: under tt.compile(dynamic=True) L, S and past are
        # sizes the program follows
        allowed.append(ones(L, S, dtype=bool_, device=like.device).tril(past))
    if not allowed and not additive:
        return None, False
    mask = None
    for a in allowed:
        mask = a if mask is None else logical_and(mask, a)
    if additive:
        if mask is not None:  # bool parts become 0 / -inf
            mask = where(mask, 0.0, float("-inf")).to(like.dtype)
        for a in additive:
            mask = a if mask is None else mask + a
    return mask, False


def attention_with_weights(q, k, v, mask, causal, dropout_p, scale):
    """The explicit path: returns (out (B, nh, L, hs), probs (B, nh, L, S)), probs after
    dropout as torch returns them. Rows with no visible key give zeros, as in
    scaled_dot_product_attention."""
    nh, nkv = q.shape[1], k.shape[1]
    if nkv != nh:  # each kv head serves nh // nkv consecutive query heads
        B, _, S, hs = k.shape
        k = k.unsqueeze(2).expand(B, nkv, nh // nkv, S, hs).reshape(B, nh, S, hs)
        v = v.unsqueeze(2).expand(B, nkv, nh // nkv, S, v.shape[-1]).reshape(B, nh, S, v.shape[-1])
    L, S = q.shape[-2], k.shape[-2]
    if causal:
        mask = ones(L, S, dtype=bool_, device=q.device).tril()   # (see merge_attention_masks)
    scores = (q @ k.mT) * scale  # (B, nh, L, S)
    live = None
    if mask is not None:
        # the rows that see a key, with ops: a compiled replay finds each call's dead rows
        if mask.dtype.name == "bool":
            live = mask.any(dim=-1, keepdim=True)
            scores = where(mask, scores, float("-inf"))
        else:
            live = isfinite(mask).any(dim=-1, keepdim=True)
            scores = scores + mask
    # eager skips the guard when every row is live (one read of the small mask); a capture
    # keeps it, since a replay's mask may have a dead row where this one has none
    if live is not None and (STATE.hooks.capturing or not bool(live.all())):
        probs = where(live, softmax(where(live, scores, 0.0), dim=-1), 0.0)
    else:
        probs = softmax(scores, dim=-1)  # (B, nh, L, S)
    probs = dropout(probs, dropout_p, training=dropout_p > 0)
    return probs @ v, probs


def _pad_key_column(m):
    """One more key that every query may see: a False (bool) or 0 (float) column."""
    if m is None:
        return None
    return pad(m, (0, 1), value=False if m.dtype.name == "bool" else 0.0)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """torch.nn.functional.multi_head_attention_forward: query (L, N, E), key and value
    (S, N, kdim/vdim), or unbatched (L, E) and (S, E). Returns (output (L, N, E), weights
    (N, L, S) averaged over heads, (N, nh, L, S) if not average_attn_weights, or None)."""
    op = "multi_head_attention_forward"
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise OpError(f"{op}: query, key and value must all be 3-D (L, N, E) or all 2-D (L, E), "
                      f"got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}{_where()}")
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = _as_mask(key_padding_mask, query).unsqueeze(0)
    L, B, E = query.shape
    S = key.shape[0]
    if E != embed_dim_to_check:
        raise OpError(f"{op}: query has embedding size {E}, expected embed_dim="
                      f"{embed_dim_to_check}{_where()}")
    if E % num_heads:
        raise OpError(f"{op}: embed_dim {E} is not divisible by num_heads {num_heads}{_where()}")
    if key.shape[:2] != value.shape[:2] or key.shape[1] != B:
        raise OpError(f"{op}: key {tuple(key.shape)} and value {tuple(value.shape)} must share "
                      f"(S, N) with query's N={B}{_where()}")
    if is_causal and attn_mask is None:
        raise RuntimeError(f"{op}: need attn_mask if specifying the is_causal hint (torch's rule)")
    # torch takes is_causal as a hint about attn_mask; the mask itself is what is applied
    causal = is_causal and key_padding_mask is None and not need_weights
    if causal:
        attn_mask = None
    nh, hd = num_heads, E // num_heads
    if use_separate_proj_weight:
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
        if wq is None or wk is None or wv is None:
            raise OpError(f"{op}: use_separate_proj_weight=True needs q_proj_weight, "
                          f"k_proj_weight and v_proj_weight{_where()}")
    else:
        wq, wk, wv = in_proj_weight[:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:]
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
    x_q, x_k, x_v = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)  # (B, T, .)
    q = linear(x_q, wq, bq)
    k = linear(x_k, wk, bk) if static_k is None else None
    v = linear(x_v, wv, bv) if static_v is None else None
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise OpError(f"{op}: bias_k/bias_v cannot be added to static_k/static_v{_where()}")
        k = cat([k, bias_k.reshape(1, 1, E).expand(B, 1, E)], dim=1)
        v = cat([v, bias_v.reshape(1, 1, E).expand(B, 1, E)], dim=1)
        attn_mask, key_padding_mask = _pad_key_column(attn_mask), _pad_key_column(key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise OpError(f"{op}: bias_k and bias_v must be given together{_where()}")
    q = q.reshape(B, L, nh, hd).transpose(1, 2)  # (B, nh, L, hd)
    k = (static_k.reshape(B, nh, -1, hd) if static_k is not None
         else k.reshape(B, k.shape[1], nh, hd).transpose(1, 2))
    v = (static_v.reshape(B, nh, -1, hd) if static_v is not None
         else v.reshape(B, v.shape[1], nh, hd).transpose(1, 2))
    if add_zero_attn:
        k = cat([k, zeros(B, nh, 1, hd, dtype=k.dtype, device=k.device)], dim=2)
        v = cat([v, zeros(B, nh, 1, hd, dtype=v.dtype, device=v.device)], dim=2)
        attn_mask, key_padding_mask = _pad_key_column(attn_mask), _pad_key_column(key_padding_mask)
    S = k.shape[2]
    mask, causal = merge_attention_masks(attn_mask, key_padding_mask, causal, B, nh, L, S, 0,
                                         q, op)
    p = dropout_p if training else 0.0
    scale = 1.0 / math.sqrt(hd)
    if need_weights:
        out, weights = attention_with_weights(q, k, v, mask, causal, p, scale)
    else:
        out = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                           is_causal=causal, scale=scale)
        weights = None
    out = linear(out.permute(2, 0, 1, 3).reshape(L, B, E), out_proj_weight, out_proj_bias)
    if weights is not None and average_attn_weights:
        weights = weights.mean(dim=1)
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights
