"""Position information for Transformers.

absolute, added to token embeddings:
  sinusoidal_positions / SinusoidalPositionalEmbedding   fixed sin/cos (Vaswani et al. 2017)
  LearnedPositionalEmbedding                             a trained table, with BART's offset
rotary, applied to queries and keys:
  rope_cos_sin, apply_rope, RotaryEmbedding              RoPE, rotate-half (HF LLaMA/NeoX)
                                                         or interleaved (GPT-J, RoFormer)
biases added to attention scores (pass as MultiHeadAttention's float attn_mask):
  alibi_slopes, alibi_bias                               ALiBi (Press et al. 2021, HF bloom)
  relative_position_bucket, RelativePositionBias         T5's bucketed relative positions

Fixed tables are computed in float64 with the array module of the target device, then
cast; they are constants on the tape (no gradient flows into them).
"""
import math

import numpy as np

import tinytensor as tt
from tinytensor.core.grad_mode import STATE
from tinytensor.device import device_of_array, get_device

from .layers import Embedding
from .module import Module


def _sized(*values):
    """Whether a length or offset is a size tt.compile(dynamic=True) is capturing as a
    formula: the positions are then built with tensor ops, which the program replays for
    each call's sizes (NumPy's arange would bake today's)."""
    return any(STATE.hooks.is_size(v) for v in values)


def _position_tensor(positions, past_length, device, dtype=None):
    """arange(past, past + positions) as a recorded tensor op (see _sized)."""
    return tt.arange(past_length, past_length + positions, device=device,
                     dtype=dtype or tt.int64)


def _positions(positions, past_length, device):
    """An int array of positions: `positions` itself (an array or a list: a Tensor of
    positions goes through recorded ops instead), or arange(past, past + positions)."""
    xp = device.xp
    if isinstance(positions, (int, np.integer)):
        return xp.arange(past_length, past_length + int(positions))
    return xp.asarray(positions)


def _refuse_tensor(t, what):
    """Tables built from a Tensor's values on arrays are constants to a capture: refuse
    them there (naming the line) rather than replay the first call's positions."""
    STATE.hooks.read_value(t, what)


# ---------------------------------------------------------------------- sinusoidal
def sinusoidal_positions(num_positions, dim, base=10000.0, interleaved=True, positions=None,
                         dtype=None, device=None):
    """(num_positions, dim) table with angle pos / base^(2i/dim) for i < ceil(dim/2).

    interleaved=True:  columns sin, cos, sin, cos, ... (the paper's PE(pos, 2i), PE(pos, 2i+1))
    interleaved=False: [sin ... | cos ...] halves (tensor2tensor, HF Marian).
    `positions` (an int array/Tensor of any shape) replaces arange(num_positions).
    """
    dev = get_device(device) if device is not None else tt.Device("cpu")
    xp = dev.xp
    n_sin, n_cos = (dim + 1) // 2, dim // 2
    inv_freq = 1.0 / base ** (xp.arange(n_sin, dtype=xp.float64) * 2.0 / dim)
    if isinstance(positions, tt.Tensor):
        # recorded ops, the same float64 arithmetic: a compiled step follows each call's
        # positions (and, see _sized, each call's sizes)
        angle = positions.to(tt.float64).unsqueeze(-1) * tt.as_tensor(inv_freq, device=dev)
        sin, cos = angle.sin(), angle.cos()[..., :n_cos]
        if interleaved:   # sin, cos, sin, cos, ... and a last sin when dim is odd
            table = tt.stack([sin[..., :n_cos], cos], -1).reshape(*angle.shape[:-1], 2 * n_cos)
            table = tt.cat([table, sin[..., n_cos:]], -1) if dim % 2 else table
        else:
            table = tt.cat([sin, cos], -1)
        return table.to(dtype or tt.get_default_dtype())
    pos = xp.arange(num_positions) if positions is None else _positions(positions, 0, dev)
    angle = pos.astype(xp.float64)[..., None] * inv_freq  # (..., n_sin)
    sin, cos = xp.sin(angle), xp.cos(angle)[..., :n_cos]
    if interleaved:
        table = xp.empty(angle.shape[:-1] + (dim,), dtype=xp.float64)
        table[..., 0::2], table[..., 1::2] = sin, cos
    else:
        table = xp.concatenate([sin, cos], axis=-1)
    return tt.tensor(table, dtype=dtype or tt.get_default_dtype(), device=dev)


class SinusoidalPositionalEmbedding(Module):
    """forward(positions) -> (..., dim): `positions` is an int Tensor, or a length T for
    positions past_length .. past_length + T - 1. `offset` is added to every position."""

    def __init__(self, num_positions, embedding_dim, base=10000.0, interleaved=True, offset=0):
        super().__init__()
        self.num_positions, self.embedding_dim = num_positions, embedding_dim
        self.base, self.interleaved, self.offset = base, interleaved, offset

    def forward(self, positions, past_length=0, dtype=None, device=None):
        dev = get_device(device) if device is not None else (
            positions.device if isinstance(positions, tt.Tensor) else tt.Device("cpu"))
        if isinstance(positions, tt.Tensor):
            pos = positions + self.offset   # recorded, so a compiled step follows the ids
        elif _sized(positions, past_length):
            pos = _position_tensor(positions, past_length, dev) + self.offset
        else:
            pos = _positions(positions, past_length, dev) + self.offset
        return sinusoidal_positions(None, self.embedding_dim, self.base, self.interleaved,
                                    positions=pos, dtype=dtype, device=dev)

    def extra_repr(self):
        return f"{self.embedding_dim}, interleaved={self.interleaved}, offset={self.offset}"


# ---------------------------------------------------------------------- learned
class LearnedPositionalEmbedding(Embedding):
    """A trained (num_positions + offset, dim) table; position p reads row p + offset.
    BART/mBART use offset=2 (rows 0 and 1 are a leftover of fairseq's padding scheme)."""

    def __init__(self, num_positions, embedding_dim, offset=0, device=None, dtype=None):
        super().__init__(num_positions + offset, embedding_dim, device=device, dtype=dtype)
        self.offset = offset

    def forward(self, positions, past_length=0):  # -> (..., dim)
        dev = self.weight.device
        if _sized(positions, past_length):
            last = past_length + positions + self.offset   # a size comparison: a guard
            if last > self.num_embeddings or past_length + self.offset < 0:
                raise IndexError(f"LearnedPositionalEmbedding: positions {past_length}.."
                                 f"{past_length + positions - 1} out of range for "
                                 f"{self.num_embeddings - self.offset} positions (offset {self.offset})")
            return super().forward(_position_tensor(positions, past_length, dev) + self.offset)
        if isinstance(positions, tt.Tensor):
            # recorded ops, so a compiled step follows each call's ids; the range is checked
            # eagerly (the embedding's gather refuses an id past the table at replay)
            if not STATE.hooks.capturing and positions.numel():
                lo, hi = int(positions.min()), int(positions.max())
                if hi + self.offset >= self.num_embeddings or lo + self.offset < 0:
                    raise IndexError(f"LearnedPositionalEmbedding: positions {lo}..{hi} out of "
                                     f"range for {self.num_embeddings - self.offset} positions "
                                     f"(offset {self.offset})")
            return super().forward(positions.to(dtype=tt.int64, device=dev) + self.offset)
        pos = _positions(positions, past_length, dev) + self.offset
        if pos.size and (int(pos.max()) >= self.num_embeddings or int(pos.min()) < 0):
            raise IndexError(f"LearnedPositionalEmbedding: positions {int(pos.min()) - self.offset}"
                             f"..{int(pos.max()) - self.offset} out of range for "
                             f"{self.num_embeddings - self.offset} positions (offset {self.offset})")
        return super().forward(tt.as_tensor(pos.astype(np.int64), device=dev))

    def extra_repr(self):
        return super().extra_repr() + f", offset={self.offset}"


# ---------------------------------------------------------------------- rotary
def rope_cos_sin(positions, rotary_dim, base=10000.0, past_length=0, dtype=None, device=None):
    """cos, sin of shape positions.shape + (rotary_dim // 2,) with angle p / base^(2i/rotary_dim),
    as HF's inv_freq. `positions` is an int Tensor/array or a length T."""
    dev = get_device(device) if device is not None else (
        positions.device if isinstance(positions, tt.Tensor) else tt.Device("cpu"))
    xp = dev.xp
    if rotary_dim % 2:
        raise ValueError(f"rope_cos_sin: rotary_dim must be even, got {rotary_dim}")
    inv_freq = 1.0 / base ** (xp.arange(0, rotary_dim, 2, dtype=xp.float64) / rotary_dim)
    dt = dtype or tt.get_default_dtype()
    if isinstance(positions, tt.Tensor) or _sized(positions, past_length):
        # the same float64 ops, recorded: a compiled step follows each call's position ids
        # (and, see _sized, each call's sizes)
        pos = positions.to(dtype=tt.float64, device=dev) if isinstance(positions, tt.Tensor) \
            else _position_tensor(positions, past_length, dev, tt.float64)
        angle = pos.unsqueeze(-1) * tt.as_tensor(inv_freq, device=dev)
        return angle.cos().to(dt), angle.sin().to(dt)
    pos = _positions(positions, past_length, dev).astype(xp.float64)
    angle = pos[..., None] * inv_freq  # (..., rotary_dim / 2)
    return (tt.tensor(xp.cos(angle), dtype=dt, device=dev),
            tt.tensor(xp.sin(angle), dtype=dt, device=dev))


def apply_rope(x, cos, sin, interleaved=False):
    """Rotate the first 2 * cos.shape[-1] features of x (..., T, head_dim) by the angles of
    cos/sin (T, r/2) (or anything broadcasting, e.g. (B, 1, T, r/2)); the rest pass through.

    interleaved=False: pairs (x[i], x[i + r/2]), HF LLaMA's rotate_half.
    interleaved=True:  pairs (x[2i], x[2i + 1]), GPT-J's rotate_every_two.
    """
    half = cos.shape[-1]
    r = 2 * half
    if r > x.shape[-1]:
        raise ValueError(f"apply_rope: cos/sin {tuple(cos.shape)} rotate {r} features but x "
                         f"{tuple(x.shape)} has only {x.shape[-1]}")
    x_rot = x if r == x.shape[-1] else x[..., :r]
    if interleaved:
        pairs = x_rot.reshape(*x_rot.shape[:-1], half, 2)  # (..., T, r/2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
        out = tt.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
        out = out.reshape(*out.shape[:-2], r)
    else:
        x1, x2 = x_rot[..., :half], x_rot[..., half:]
        out = tt.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., T, r)
    return out if r == x.shape[-1] else tt.cat([out, x[..., r:]], dim=-1)


class RotaryEmbedding(Module):
    """forward(q, k, positions=None, past_length=0) -> rotated (q, k), both (B, nh, T, hd).
    positions: None (past_length .. past_length + T - 1), or an int Tensor (T,) or (B, T).
    rotary_dim < head_dim rotates only the first rotary_dim features (GPT-J, GPT-NeoX)."""

    def __init__(self, head_dim, base=10000.0, interleaved=False, rotary_dim=None):
        super().__init__()
        self.head_dim, self.base, self.interleaved = head_dim, base, interleaved
        self.rotary_dim = head_dim if rotary_dim is None else rotary_dim

    def forward(self, q, k, positions=None, past_length=0):
        T = q.shape[-2]
        pos = T if positions is None else positions
        cos, sin = rope_cos_sin(pos, self.rotary_dim, self.base, past_length, dtype=q.dtype,
                                device=q.device)
        if cos.ndim == 3:  # per-batch positions (B, T, r/2) -> (B, 1, T, r/2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return apply_rope(q, cos, sin, self.interleaved), apply_rope(k, cos, sin, self.interleaved)

    def extra_repr(self):
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
                f"interleaved={self.interleaved}")


# ---------------------------------------------------------------------- ALiBi
def alibi_slopes(num_heads):
    """(num_heads,) float64 slopes: the geometric sequence 2^(-8/n)^(h+1) for n a power of 2;
    otherwise those of the nearest lower power of 2 plus every other slope of twice that."""
    def power_of_2(n):
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))  # = 2^(-8/n)
        return [start ** (i + 1) for i in range(n)]
    if math.log2(num_heads).is_integer():
        return np.array(power_of_2(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_2(2 * closest)[0::2][:num_heads - closest]
    return np.array(power_of_2(closest) + extra)


def alibi_bias(num_heads, q_len, k_len=None, dtype=None, device=None):
    """(1, num_heads, q_len, k_len) bias -slope * |i - j|, queries aligned to the last
    positions (query i sits at k_len - q_len + i, as when decoding with a cache). Under a
    causal mask this is the paper's -slope * (i - j); HF bloom's slope * j differs from it
    by a per-row constant, which softmax ignores."""
    dev = get_device(device) if device is not None else tt.Device("cpu")
    xp = dev.xp
    k_len = q_len if k_len is None else k_len
    qpos = xp.arange(k_len - q_len, k_len)[:, None]
    dist = xp.abs(qpos - xp.arange(k_len)[None, :]).astype(xp.float64)  # (L, S)
    slopes = xp.asarray(alibi_slopes(num_heads))[:, None, None]
    return tt.tensor((-slopes * dist)[None], dtype=dtype or tt.get_default_dtype(), device=dev)


# ---------------------------------------------------------------------- T5 relative
def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                             max_distance=128):
    """T5's bucket of relative_position = key_pos - query_pos, exactly as HF T5's
    `_relative_position_bucket` (including its float32 log): distances below
    max_exact = num_buckets // 2 (halved again when bidirectional) get one bucket each,
    larger ones share log-spaced buckets up to max_distance; the sign gets its own half
    when bidirectional, and a causal (bidirectional=False) one sees only the past.
    Takes and returns an int Tensor (or array)."""
    if isinstance(relative_position, tt.Tensor):
        _refuse_tensor(relative_position, "relative_position_bucket")
        return tt.as_tensor(_buckets(relative_position.data, relative_position.device.xp, bidirectional,
                                     num_buckets, max_distance), device=relative_position.device)
    rp = relative_position
    xp = device_of_array(rp).xp if type(rp).__module__.startswith("cupy") else np
    return _buckets(rp, xp, bidirectional, num_buckets, max_distance)


def _buckets(rp, xp, bidirectional, num_buckets, max_distance):
    """relative_position_bucket of an int array (of sizes' positions, or a Tensor's)."""
    rp = xp.asarray(rp).astype(xp.int64)
    buckets = xp.zeros_like(rp)
    if bidirectional:
        num_buckets //= 2
        buckets += (rp > 0).astype(xp.int64) * num_buckets
        rp = xp.abs(rp)
    else:
        rp = -xp.minimum(rp, 0)
    max_exact = num_buckets // 2
    is_small = rp < max_exact
    f32 = xp.float32
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (xp.log(rp.astype(f32) / f32(max_exact)) / f32(math.log(max_distance / max_exact))
                  * f32(num_buckets - max_exact))
        large = max_exact + xp.where(is_small, 0, scaled).astype(xp.int64)
    large = xp.minimum(large, num_buckets - 1)
    buckets += xp.where(is_small, rp, large)
    return buckets


class RelativePositionBias(Module):
    """T5's learned bias: forward(q_len, k_len, past_length=0) -> (1, num_heads, q_len, k_len),
    one scalar per (bucket, head) in `relative_attention_bias` (HF's name). Queries sit at
    positions past_length .. past_length + q_len - 1, keys at 0 .. k_len - 1."""

    def __init__(self, num_heads, num_buckets=32, max_distance=128, bidirectional=True,
                 device=None, dtype=None):
        super().__init__()
        self.num_heads, self.num_buckets = num_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.relative_attention_bias = Embedding(num_buckets, num_heads, device=device, dtype=dtype)

    def forward(self, q_len, k_len, past_length=0):
        dev = self.relative_attention_bias.weight.device
        xp = dev.xp
        rel = xp.arange(k_len)[None, :] - xp.arange(past_length, past_length + q_len)[:, None]
        buckets = _buckets(rel, xp, self.bidirectional, self.num_buckets, self.max_distance)  # (L, S)
        values = self.relative_attention_bias(tt.as_tensor(buckets, device=dev))  # (L, S, nh)
        return values.permute(2, 0, 1).unsqueeze(0)  # (1, nh, L, S)

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
                f"max_distance={self.max_distance}, bidirectional={self.bidirectional}")
