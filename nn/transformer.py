"""Transformer encoder/decoder layers and stacks, as torch.nn.Transformer* (torch's defaults:
batch_first=False, so ported torch code that feeds (T, N, E) gets what torch computes).

  post-norm (norm_first=False, the 2017 paper):  x = norm(x + sublayer(x))
  pre-norm  (norm_first=True, GPT-2 and later):  x = x + sublayer(norm(x))

Names match torch's except where a sublayer is a module here: torch's `linear1`/`linear2`
are `ffn.fc1`/`ffn.fc2`, `multihead_attn` is `cross_attn`, and attention weights are split
into q/k/v_proj. `convert_torch_transformer_state(torch_module.state_dict())` renames a
state_dict of any torch.nn.Transformer{Encoder,Decoder}{Layer,} or torch.nn.Transformer;
every class here also has `load_torch_state_dict(sd)`.

Decoding with a cache: `caches = decoder.init_cache()`, then call the decoder on the new
tokens only with cache=caches (and tgt_is_causal=True); see tests/nn/test_transformer.py.
"""
from .attention import KVCache, MultiHeadAttention, convert_torch_mha_state
from .feedforward import FeedForward
from .layers import Dropout, LayerNorm
from .module import Module, ModuleList

_RENAMES = {"linear1": "ffn.fc1", "linear2": "ffn.fc2", "multihead_attn": "cross_attn"}
_TORCH_LEAVES = ("in_proj_weight", "in_proj_bias", "q_proj_weight")


def convert_torch_transformer_state(state_dict):
    """torch.nn.Transformer* state_dict -> this module's names (values become NumPy arrays)."""
    out = {}
    for key, val in convert_torch_mha_state(state_dict).items():
        out[".".join(_RENAMES.get(part, part) for part in key.split("."))] = val
    return out


class _TorchLoadable:
    """What the encoder and decoder layers share: their parts, and torch weights in."""

    def _build(self, config, attentions, norms):
        """The config kept (get_clones rebuilds a layer from it), then the attention blocks
        named in `attentions`, the feed-forward, `norms` LayerNorms and as many Dropouts,
        registered in torch's order so that state dicts list them alike."""
        c = self._config = {k: v for k, v in config.items() if k not in ("self", "__class__")}
        kw = dict(device=c["device"], dtype=c["dtype"])
        d, p, bias = c["d_model"], c["dropout"], c["bias"]
        self.batch_first, self.norm_first = c["batch_first"], c["norm_first"]
        for name in attentions:
            setattr(self, name, MultiHeadAttention(d, c["nhead"], c["num_kv_heads"], bias=bias,
                                                   dropout=p, **kw))
        self.ffn = FeedForward(d, c["dim_feedforward"], c["activation"], p, bias, **kw)
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d, eps=c["layer_norm_eps"], bias=bias, **kw))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(p))

    def load_torch_state_dict(self, state_dict, strict=True):
        """Load the state_dict of the corresponding torch.nn module."""
        return Module.load_state_dict(self, convert_torch_transformer_state(state_dict),
                                      strict=strict)

    def load_state_dict(self, state_dict, strict=True):
        """A state dict in this module's names, or in torch's (recognised by its packed
        `in_proj_weight` / `linear1` keys), which is renamed first."""
        if any(k.rpartition(".")[2] in _TORCH_LEAVES or ".linear1." in f".{k}"
               for k in state_dict):
            return self.load_torch_state_dict(state_dict, strict=strict)
        return Module.load_state_dict(self, state_dict, strict=strict)


class TransformerEncoderLayer(_TorchLoadable, Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 num_kv_heads=None, device=None, dtype=None):
        config = dict(locals())
        super().__init__()
        self._build(config, ("self_attn",), 2)  # self_attn, ffn, norm1-2, dropout1-2

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src if self.batch_first else src.transpose(0, 1)  # (B, T, d_model)
        sa = lambda h: self.dropout1(self.self_attn(  # noqa: E731
            h, attn_mask=src_mask, key_padding_mask=src_key_padding_mask, is_causal=is_causal))
        ff = lambda h: self.dropout2(self.ffn(h))  # noqa: E731
        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ff(self.norm2(x))
        else:
            x = self.norm1(x + sa(x))
            x = self.norm2(x + ff(x))
        return x if self.batch_first else x.transpose(0, 1)


class TransformerDecoderLayer(_TorchLoadable, Module):
    """Self-attention, cross-attention over `memory`, feed-forward.
    cache: None or a pair (KVCache(), KVCache(static=True)) for incremental decoding."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 num_kv_heads=None, device=None, dtype=None):
        config = dict(locals())
        super().__init__()
        self._build(config, ("self_attn", "cross_attn"), 3)  # ..., ffn, norm1-3, dropout1-3

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        if not self.batch_first:
            tgt, memory = tgt.transpose(0, 1), memory.transpose(0, 1)
        self_cache, cross_cache = (None, None) if cache is None else cache
        sa = lambda h: self.dropout1(self.self_attn(  # noqa: E731
            h, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
            is_causal=tgt_is_causal, cache=self_cache))
        ca = lambda h: self.dropout2(self.cross_attn(  # noqa: E731
            h, memory, memory, attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask,
            is_causal=memory_is_causal, cache=cross_cache))
        ff = lambda h: self.dropout3(self.ffn(h))  # noqa: E731
        x = tgt  # (B, T, d_model)
        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ca(self.norm2(x))
            x = x + ff(self.norm3(x))
        else:
            x = self.norm1(x + sa(x))
            x = self.norm2(x + ca(x))
            x = self.norm3(x + ff(x))
        return x if self.batch_first else x.transpose(0, 1)


def _copies(layer, num_layers):
    # fresh layers built with the same arguments: torch deep-copies instead, so its layers
    # start out identical; load weights when you need to match torch
    return [layer] + [type(layer)(**layer._config) for _ in range(num_layers - 1)]


class _Stack(_TorchLoadable, Module):
    """num_layers copies of a layer, then an optional final norm."""

    def __init__(self, layer, num_layers, norm):
        super().__init__()
        self.layers = ModuleList(_copies(layer, num_layers))
        self.num_layers = num_layers
        self.norm = norm


class TransformerEncoder(_Stack):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):  # torch's arguments; there are no nested tensors here
        super().__init__(encoder_layer, num_layers, norm)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(_Stack):
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__(decoder_layer, num_layers, norm)

    def init_cache(self):
        """One (self-attention, cross-attention) KVCache pair per layer."""
        return [(KVCache(), KVCache(static=True)) for _ in self.layers]

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(f"TransformerDecoder: cache has {len(cache)} entries for "
                             f"{len(self.layers)} layers; use init_cache()")
        x = tgt
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal,
                      cache=None if cache is None else cache[i])
        return x if self.norm is None else self.norm(x)


class Transformer(_TorchLoadable, Module):
    """torch.nn.Transformer: an encoder stack and a decoder stack, each with a final
    LayerNorm, every weight matrix Xavier-uniform initialised as torch does. Its
    constructor is torch's, batch_first=False included (the (T, N, E) layout); pass
    batch_first=True for (N, T, E)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
                  bias=bias, device=device, dtype=dtype)
        norm = dict(eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
            LayerNorm(d_model, **norm))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
            LayerNorm(d_model, **norm))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        from . import init
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError(f"Transformer: the batch number of src {tuple(src.shape)} and tgt "
                               f"{tuple(tgt.shape)} must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src {tuple(src.shape)} and "
                               f"tgt {tuple(tgt.shape)} must be equal to d_model={self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=bool(src_is_causal))
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float mask: -inf above the diagonal (a later position), 0 elsewhere."""
        import tinytensor as tt
        allowed = tt.ones(sz, sz, dtype=tt.bool, device=device).tril()
        return tt.where(allowed, 0.0, float("-inf")).to(dtype or tt.get_default_dtype())
