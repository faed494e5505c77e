"""Pieces every decoder-only model here shares: the causal + padding mask, the next-token
loss, and `generate` (KV-cached decoding from models.generation)."""
import tinytensor as tt
import tinytensor.functional as F


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
        """Greedy or sampled continuation with a KV cache; see models.generation.generate."""
        from .generation import generate
        return generate(self, input_ids, max_new_tokens, **kwargs)
