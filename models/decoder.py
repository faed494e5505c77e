"""Pieces every decoder-only model here shares: the KV cache of a decoder stack, the causal
+ padding mask, the next-token loss, `generate` (KV-cached decoding from models.generation)
and the per-block gradient checkpointing switch."""
from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F


class DecoderCache:
    """The KV cache of a decoder stack: per layer, an nn.KVCache of the self-attention keys
    and values of the positions decoded so far (`self_attn[i]`)."""

    def __init__(self, num_layers):
        self.self_attn = [nn.KVCache() for _ in range(num_layers)]

    def caches(self):  # every nn.KVCache held
        return self.self_attn

    @property
    def length(self):
        return self.self_attn[0].length if self.self_attn else 0

    def select(self, index):
        """Keep the batch rows in `index` (an int array/Tensor; repeats allowed)."""
        for cache in self.caches():
            cache.select(index)

    def __repr__(self):
        return f"{type(self).__name__}(layers={len(self.self_attn)}, length={self.length})"


def causal_padding_mask(T, S, attention_mask, device, model):
    """Causal mask for T new queries over S keys (the last T of which are the new ones),
    combined with a (B, S) padding mask where 1 = attend, 0 = padding."""
    causal = tt.ones(T, S, dtype=tt.bool, device=device).tril(S - T)     # (T, S)
    if attention_mask is None:
        return causal
    if attention_mask.ndim != 2 or attention_mask.shape[1] != S:
        raise ValueError(f"{model}: attention_mask shape {tuple(attention_mask.shape)} should be "
                         f"(batch, past + new tokens) = (B, {S})")
    pad = attention_mask.to(tt.bool).reshape(attention_mask.shape[0], 1, 1, S)  # (B, 1, 1, S)
    return causal & pad                                                  # (B, 1, T, S)


def next_token_loss(logits, labels):
    """Cross-entropy of position t's logits against token t+1 (labels are shifted here,
    as in HF's *ForCausalLM); -100 labels are ignored."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                           labels[:, 1:].reshape(-1), ignore_index=-100)


class GenerateMixin:
    def generate(self, input_ids, max_new_tokens=20, **kwargs):
        """Greedy, sampled or beam-search continuation with a KV cache; see models.generation.generate."""
        from .generation import generate
        return generate(self, input_ids, max_new_tokens, **kwargs)


class GradientCheckpointingMixin:
    """HF's switch: `model.gradient_checkpointing_enable()` recomputes each block's
    activations in backward (nn.recompute) instead of keeping them, while training."""
    gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def gradient_checkpointing_disable(self):
        self.gradient_checkpointing = False

    @property
    def is_gradient_checkpointing(self):
        return self.gradient_checkpointing

    def _run_block(self, block, *args, cache=None):
        # decoding with a cache writes into it, so it cannot be replayed: it runs plainly
        if self.gradient_checkpointing and self.training and cache is None and tt.is_grad_enabled():
            return nn.recompute(block, *args)
        return block(*args, cache)
