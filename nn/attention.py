"""MultiHeadAttention (self/cross, causal, padding, grouped-query) and KVCache.

Inputs are batch-first: query (B, L, E), key (B, S, kdim), value (B, S, vdim).
Masks follow torch.nn.MultiheadAttention (NOT F.scaled_dot_product_attention):
  key_padding_mask  (B, S)              bool, True = padding (ignored); a float mask is added
  attn_mask         (L, S), (B*nh, L, S) or anything broadcasting to (B, nh, L, S);
                    bool True = may NOT attend; a float mask is added to the scores
                    (ALiBi / T5 position biases go here and receive gradients)
  is_causal         query i sees keys j <= i (+ the cached length when decoding with a cache)
need_weights defaults to False (torch: True); with it, forward returns (output, weights).
The attention itself is `F.scaled_dot_product_attention` (where fused kernels plug in);
only need_weights=True takes an explicit softmax path, because it must return the weights.

Loading torch.nn.MultiheadAttention weights: torch packs q, k, v into `in_proj_weight`
(3E, E) and `in_proj_bias` (3E,); here they are q_proj/k_proj/v_proj (rows [0:E], [E:2E],
[2E:3E]). `mha.load_torch_mha_state(torch_mha.state_dict())` splits them, and
`convert_torch_mha_state` does it for any state_dict (keys keep their prefixes).
`nn.MultiheadAttention` (nn/multihead.py) is torch's spelling with torch's packed layout;
both share the mask merge and weights path of tinytensor/ops/mha.py.
"""
import math

import numpy as np

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.autograd import STATE
from tinytensor.ops.mha import attention_with_weights, merge_attention_masks

from .layers import Linear
from .module import Module


def _where():
    return f" in {STATE.scope_path}" if STATE.scope_path else ""


class KVCache:
    """Keys and values of the positions seen so far, for one attention layer.

    static=False (self-attention): each call appends the new keys/values along time and
    the queries attend over everything cached.  static=True (cross-attention): the first
    call projects `key`/`value` (e.g. the encoder memory); later calls reuse them.
    Stored per kv head, (B, num_kv_heads, S, head_dim), so grouped-query caches are smaller.
    Decode under tt.no_grad() unless you mean to backpropagate through the cache.
    """

    def __init__(self, static=False):
        self.static = static
        self.key = self.value = None

    def __len__(self):
        return self.length

    @property
    def length(self):
        """The positions cached (len() of the cache); a property too because len() turns a
        symbolic size (tt.compile(dynamic=True)) into a plain number."""
        return 0 if self.key is None else self.key.shape[-2]

    def reset(self):
        self.key = self.value = None

    def update(self, k, v):  # (B, nkv, S_new, hs) each -> all cached (B, nkv, S, hs)
        if self.key is None:
            self.key, self.value = k, v
        else:
            self.key, self.value = tt.cat([self.key, k], dim=-2), tt.cat([self.value, v], dim=-2)
        return self.key, self.value

    def select(self, index):
        """Keep the batch rows in `index` (ints, repeats allowed): beam search moves its
        beams' keys/values with them."""
        if self.key is not None:
            if not isinstance(index, tt.Tensor):
                index = tt.as_tensor(np.asarray(index, dtype=np.int64), device=self.key.device)
            self.key, self.value = self.key[index], self.value[index]

    def __repr__(self):
        return f"KVCache(static={self.static}, length={len(self)})"


class MultiHeadAttention(Module):
    """Multi-head attention; num_kv_heads < num_heads gives grouped-query attention
    (num_kv_heads=1: multi-query). `scale` defaults to 1/sqrt(head_dim) (T5 uses 1.0)."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, bias=True, dropout=0.0,
                 kdim=None, vdim=None, scale=None, device=None, dtype=None):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim={embed_dim} is not divisible by "
                             f"num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"MultiHeadAttention: num_heads={num_heads} is not a multiple of "
                             f"num_kv_heads={num_kv_heads}")
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.dropout = dropout
        self.scale = scale
        kv_dim = num_kv_heads * self.head_dim
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.q_proj = Linear(embed_dim, embed_dim, **kw)
        self.k_proj = Linear(self.kdim, kv_dim, **kw)
        self.v_proj = Linear(self.vdim, kv_dim, **kw)
        self.out_proj = Linear(embed_dim, embed_dim, **kw)

    def forward(self, query, key=None, value=None, key_padding_mask=None, attn_mask=None,
                is_causal=False, need_weights=False, average_attn_weights=True, cache=None):
        """-> output (B, L, E); with need_weights=True -> (output, weights), weights
        (B, L, S) averaged over heads or (B, nh, L, S) with average_attn_weights=False."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        B, L, E = query.shape
        nh, nkv, hs = self.num_heads, self.num_kv_heads, self.head_dim

        q = self.q_proj(query).reshape(B, L, nh, hs).transpose(1, 2)  # (B, nh, L, hs)
        past = 0
        if cache is not None and cache.static and cache.length:
            k, v = cache.key, cache.value  # (B, nkv, S, hs), projected on the first call
        else:
            S_new = key.shape[1]
            k = self.k_proj(key).reshape(B, S_new, nkv, hs).transpose(1, 2)  # (B, nkv, S_new, hs)
            v = self.v_proj(value).reshape(B, S_new, nkv, hs).transpose(1, 2)
            if cache is not None:
                past = 0 if cache.static else cache.length
                k, v = cache.update(k, v)  # (B, nkv, S, hs)
        S = k.shape[-2]

        mask, causal = self._merge_masks(attn_mask, key_padding_mask, is_causal, B, L, S, past, q)
        dropout_p = self.dropout if self.training else 0.0
        scale = 1.0 / math.sqrt(hs) if self.scale is None else self.scale
        weights = None
        if need_weights:
            out, weights = attention_with_weights(q, k, v, mask, causal, dropout_p, scale)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                 is_causal=causal, scale=scale,
                                                 enable_gqa=nkv != nh)  # (B, nh, L, hs)
        out = self.out_proj(out.transpose(1, 2).reshape(B, L, E))  # (B, L, E)
        if not need_weights:
            return out
        return out, (weights.mean(dim=1) if average_attn_weights else weights)

    # ------------------------------------------------------------------ masks
    def _merge_masks(self, attn_mask, key_padding_mask, is_causal, B, L, S, past, like):
        return merge_attention_masks(attn_mask, key_padding_mask, is_causal, B, self.num_heads,
                                     L, S, past, like, "MultiHeadAttention")

    def _check_inputs(self, query, key, value):
        shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
            raise ValueError(f"MultiHeadAttention: expects batch-first 3-D inputs (B, T, E), got "
                             f"{shapes}{_where()}")
        if query.shape[-1] != self.embed_dim or key.shape[-1] != self.kdim \
                or value.shape[-1] != self.vdim:
            raise ValueError(f"MultiHeadAttention: {shapes} do not match embed_dim="
                             f"{self.embed_dim}, kdim={self.kdim}, vdim={self.vdim}{_where()}")
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(f"MultiHeadAttention: batch/length of {shapes} do not agree{_where()}")

    # ------------------------------------------------------------------ torch weights
    def load_torch_mha_state(self, state_dict, strict=True):
        """Load a torch.nn.MultiheadAttention state_dict (in_proj_weight split into q/k/v)."""
        return self.load_state_dict(convert_torch_mha_state(state_dict), strict=strict)

    def extra_repr(self):
        kv = f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else ""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{kv}, dropout={self.dropout}"


# ---------------------------------------------------------------------- torch state_dicts
def _to_numpy(v):
    if isinstance(v, tt.Tensor):
        return v.detach().numpy()
    if hasattr(v, "detach"):  # a torch tensor; nn never imports torch
        return v.detach().cpu().numpy()
    return np.asarray(v)


def convert_torch_mha_state(state_dict):
    """Rename a state_dict holding torch.nn.MultiheadAttention weights (under any prefix):
    `P.in_proj_weight` (3E, E) -> `P.q_proj.weight`, `P.k_proj.weight`, `P.v_proj.weight`;
    `P.in_proj_bias` likewise; `P.{q,k,v}_proj_weight` (the kdim/vdim layout) ->
    `P.{q,k,v}_proj.weight`; `P.out_proj.*` is unchanged. Values become NumPy arrays."""
    out = {}
    for key, val in state_dict.items():
        base, _, leaf = key.rpartition(".")
        pre = base + "." if base else ""
        if leaf in ("in_proj_weight", "in_proj_bias"):
            parts = np.split(_to_numpy(val), 3, axis=0)
            kind = "weight" if leaf == "in_proj_weight" else "bias"
            for name, part in zip(("q_proj", "k_proj", "v_proj"), parts):
                out[f"{pre}{name}.{kind}"] = part
        elif leaf in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
            out[f"{pre}{leaf[:-7]}.weight"] = _to_numpy(val)
        elif leaf in ("bias_k", "bias_v"):
            raise ValueError(f"convert_torch_mha_state: {key}: add_bias_kv is not supported")
        else:
            out[key] = _to_numpy(val)
    return out
