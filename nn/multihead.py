"""nn.MultiheadAttention with torch's spelling, constructor, defaults and parameters, so a
torch state dict loads as it is (`load_state_dict(torch_mha.state_dict())`).

It is a thin module over F.multi_head_attention_forward (tinytensor/ops/mha.py), which
shares its mask handling and weights path with nn.MultiHeadAttention (nn/attention.py,
this project's batch-first module with KV caches and grouped-query heads). Differences
from torch: a query row whose keys are all masked gives zeros (torch gives NaN), and
there is no fused inference fast path to select.
"""
import tinytensor as tt
import tinytensor.functional as F

from . import init
from .layers import Linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    """Inputs (L, N, E), (S, N, kdim), (S, N, vdim), or (N, L, E)... with batch_first=True,
    or unbatched (L, E); forward returns (output, weights or None) as torch's."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than "
                             f"0, got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim={embed_dim} must be divisible by "
                             f"num_heads={num_heads}")
        kw = dict(device=device, dtype=dtype)
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        E = embed_dim
        if self._qkv_same_embed_dim:
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
            self.in_proj_weight = Parameter(tt.empty(3 * E, E, **kw))
        else:
            self.q_proj_weight = Parameter(tt.empty(E, E, **kw))
            self.k_proj_weight = Parameter(tt.empty(E, self.kdim, **kw))
            self.v_proj_weight = Parameter(tt.empty(E, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(tt.empty(3 * E, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(tt.empty(1, 1, E, **kw))
            self.bias_v = Parameter(tt.empty(1, 1, E, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        # torch's init: Xavier-uniform projections, zero biases, Xavier-normal bias_k/bias_v
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = query.transpose(1, 0), key.transpose(1, 0), value.transpose(1, 0)
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}")
