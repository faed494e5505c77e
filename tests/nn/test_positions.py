"""Positions: sinusoidal vs the formula, learned (with BART's offset), RoPE vs re-implementations
of HF LLaMA's rotate_half and GPT-J's rotate_every_two, ALiBi vs the paper's slopes, and T5's
relative buckets vs a re-implementation of HF T5's `_relative_position_bucket`."""
import math

import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt

R = np.random  # seeded before every test by conftest


def npy(t):
    return t.detach().numpy()


# ------------------------------------------------------------------ sinusoidal
def sinusoid_formula(n, d, interleaved):
    pe = np.zeros((n, d))
    for pos in range(n):
        for j in range(d):
            i = j // 2 if interleaved else (j if j < (d + 1) // 2 else j - (d + 1) // 2)
            is_sin = (j % 2 == 0) if interleaved else j < (d + 1) // 2
            a = pos / 10000 ** (2 * i / d)
            pe[pos, j] = math.sin(a) if is_sin else math.cos(a)
    return pe


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("d", [8, 7, 16])
def test_sinusoidal_formula(interleaved, d):
    t = nn.sinusoidal_positions(50, d, interleaved=interleaved, dtype=tt.float64)
    np.testing.assert_allclose(npy(t), sinusoid_formula(50, d, interleaved), atol=1e-12)


def test_sinusoidal_marian_layout():
    # HF Marian: out[:, :d/2] = sin(pos / 10000^(2(j//2)/d)) at even j, out[:, d/2:] = cos at odd j
    n, d = 12, 10
    enc = np.array([[p / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for p in range(n)])
    ref = np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1)
    np.testing.assert_allclose(npy(nn.sinusoidal_positions(n, d, interleaved=False, dtype=tt.float64)),
                               ref, atol=1e-12)


def test_sinusoidal_module():
    m = nn.SinusoidalPositionalEmbedding(100, 8)
    table = npy(nn.sinusoidal_positions(100, 8, dtype=tt.float64))
    np.testing.assert_allclose(npy(m(4, past_length=3, dtype=tt.float64)), table[3:7], atol=1e-12)
    pos = tt.tensor([[0, 5], [9, 2]])
    np.testing.assert_allclose(npy(m(pos, dtype=tt.float64)), table[[[0, 5], [9, 2]]], atol=1e-12)
    assert m(4).dtype == tt.float32 and not m.state_dict()
    np.testing.assert_allclose(npy(nn.SinusoidalPositionalEmbedding(100, 8, offset=2)(3, dtype=tt.float64)),
                               table[2:5], atol=1e-12)


# ------------------------------------------------------------------ learned
def test_learned_offset_vs_torch():
    m = nn.LearnedPositionalEmbedding(10, 4, offset=2, dtype=tt.float64)
    assert m.weight.shape == (12, 4)
    w = torch.tensor(npy(m.weight), requires_grad=True)
    out = m(3, past_length=4)  # positions 4, 5, 6 -> rows 6, 7, 8 (BART: arange(past, past+T) + 2)
    ref = torch.nn.functional.embedding(torch.arange(4, 7) + 2, w)
    np.testing.assert_allclose(npy(out), ref.detach().numpy())
    c = R.standard_normal((3, 4))
    (out * tt.tensor(c)).sum().backward()
    (ref * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(npy(m.weight.grad), w.grad.numpy())
    np.testing.assert_allclose(npy(m(tt.tensor([[1, 0]]))), npy(m.weight)[[[3, 2]]])
    with pytest.raises(IndexError, match="LearnedPositionalEmbedding"):
        m(11)


# ------------------------------------------------------------------ RoPE
def hf_rope(q, k, positions, base=10000.0, dim=None):
    """HF LLaMA: inv_freq, cos/sin of cat(freqs, freqs), q * cos + rotate_half(q) * sin."""
    dim = dim or q.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    freqs = positions[..., None].double() * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    if cos.ndim == 3:
        cos, sin = cos[:, None], sin[:, None]

    def rotate_half(x):
        x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat([-x2, x1], dim=-1)

    def apply(x):
        xr, xp = x[..., :dim], x[..., dim:]
        return torch.cat([xr * cos + rotate_half(xr) * sin, xp], dim=-1)
    return apply(q), apply(k)


def gptj_rope(q, k, positions, base=10000.0, dim=None):
    """GPT-J: sin/cos repeated per pair, rotate_every_two."""
    dim = dim or q.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angle = positions[..., None].double() * inv_freq
    sin, cos = angle.sin().repeat_interleave(2, -1), angle.cos().repeat_interleave(2, -1)
    if cos.ndim == 3:
        cos, sin = cos[:, None], sin[:, None]

    def rotate_every_two(x):
        return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)

    def apply(x):
        xr, xp = x[..., :dim], x[..., dim:]
        return torch.cat([xr * cos + rotate_every_two(xr) * sin, xp], dim=-1)
    return apply(q), apply(k)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_dim", [None, 4])
@pytest.mark.parametrize("batch_positions", [False, True])
def test_rope_vs_reference(interleaved, rotary_dim, batch_positions):
    B, H, T, D = 2, 3, 5, 8
    qn, kn = R.standard_normal((B, H, T, D)), R.standard_normal((B, H, T, D))
    pos = np.array([[3, 4, 5, 6, 7], [0, 2, 9, 1, 100]]) if batch_positions else None
    q, k = tt.tensor(qn, requires_grad=True), tt.tensor(kn, requires_grad=True)
    rope = nn.RotaryEmbedding(D, interleaved=interleaved, rotary_dim=rotary_dim)
    out = rope(q, k, positions=tt.tensor(pos)) if batch_positions else rope(q, k, past_length=3)
    qh, kh = torch.tensor(qn, requires_grad=True), torch.tensor(kn, requires_grad=True)
    th_pos = torch.tensor(pos) if batch_positions else torch.arange(3, 3 + T)
    ref = (gptj_rope if interleaved else hf_rope)(qh, kh, th_pos, dim=rotary_dim)
    cots = [R.standard_normal((B, H, T, D)) for _ in range(2)]
    for a, b in zip(out, ref):
        np.testing.assert_allclose(npy(a), b.detach().numpy(), atol=1e-12)
    sum((a * tt.tensor(c)).sum() for a, c in zip(out, cots)).backward()
    sum((b * torch.tensor(c)).sum() for b, c in zip(ref, cots)).backward()
    np.testing.assert_allclose(npy(q.grad), qh.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(npy(k.grad), kh.grad.numpy(), atol=1e-12)


def test_rope_relative():
    # the point of RoPE: q_m . k_n depends on m - n only
    D = 8
    q, k = tt.tensor(R.standard_normal((1, 1, 1, D))), tt.tensor(R.standard_normal((1, 1, 1, D)))
    rope = nn.RotaryEmbedding(D)

    def score(m, n):
        qm, _ = rope(q, q, past_length=m)
        _, kn = rope(k, k, past_length=n)
        return float((qm * kn).sum())
    assert abs(score(7, 3) - score(14, 10)) < 1e-12 and abs(score(7, 3) - score(3, 7)) > 1e-3


# ------------------------------------------------------------------ ALiBi
def paper_slopes(n):
    """ofirpress/attention_with_linear_biases, get_slopes."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + paper_slopes(2 * closest)[0::2][:n - closest]


def bloom_slopes(n):
    """HF bloom build_alibi_tensor's slopes, re-typed."""
    closest = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float64)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.float64))
    if closest != n:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float64)
        rem = min(closest, n - closest)
        slopes = torch.cat([slopes, torch.pow(extra_base, torch.arange(1, 1 + 2 * rem, 2, dtype=torch.float64))])
    return slopes.numpy()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 40, 64])
def test_alibi_slopes(n):
    np.testing.assert_allclose(nn.alibi_slopes(n), paper_slopes(n), rtol=1e-14)
    np.testing.assert_allclose(nn.alibi_slopes(n), bloom_slopes(n), rtol=1e-14)


def test_alibi_slopes_known_values():
    np.testing.assert_allclose(nn.alibi_slopes(8), [2.0 ** -i for i in range(1, 9)])
    np.testing.assert_allclose(nn.alibi_slopes(4), [2.0 ** (-2 * i) for i in range(1, 5)])


def test_alibi_bias():
    bias = npy(nn.alibi_bias(3, 4, 6, dtype=tt.float64))  # 4 queries at positions 2..5
    slopes = nn.alibi_slopes(3)
    i, j = np.arange(2, 6)[:, None], np.arange(6)[None]
    np.testing.assert_allclose(bias, -slopes[None, :, None, None] * np.abs(i - j)[None, None])
    # under a causal mask, equivalent to HF bloom's slope * key_position
    causal = j <= i
    bloom = slopes[:, None, None] * np.arange(6)[None, None, :] + np.zeros((3, 4, 6))

    def softmax_masked(s):
        s = np.where(causal, s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(softmax_masked(bias[0]), softmax_masked(bloom), atol=1e-12)


# ------------------------------------------------------------------ T5 relative position
def hf_t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """HF T5Attention._relative_position_bucket, re-typed."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact)
                         / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20), (64, 256), (32, 32)])
def test_t5_buckets(bidirectional, num_buckets, max_distance):
    rel = np.arange(-1500, 1501)
    ours = nn.relative_position_bucket(tt.tensor(rel), bidirectional, num_buckets, max_distance)
    ref = hf_t5_bucket(torch.tensor(rel), bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    assert ours.dtype == tt.int64
    np.testing.assert_array_equal(nn.relative_position_bucket(rel, bidirectional, num_buckets,
                                                              max_distance), ref.numpy())


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bias_vs_hf(bidirectional):
    nh, L, S, past = 3, 4, 9, 5
    m = nn.RelativePositionBias(nh, num_buckets=8, max_distance=16, bidirectional=bidirectional,
                                dtype=tt.float64)
    w = torch.tensor(npy(m.relative_attention_bias.weight), requires_grad=True)
    out = m(L, S, past_length=past)
    # HF compute_bias: memory_position - context_position, embedding, permute to (1, nh, L, S)
    rel = torch.arange(S)[None, :] - torch.arange(past, past + L)[:, None]
    ref = torch.nn.functional.embedding(hf_t5_bucket(rel, bidirectional, 8, 16), w).permute(2, 0, 1)[None]
    np.testing.assert_allclose(npy(out), ref.detach().numpy())
    c = R.standard_normal((1, nh, L, S))
    (out * tt.tensor(c)).sum().backward()
    (ref * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(npy(m.relative_attention_bias.weight.grad), w.grad.numpy(), atol=1e-12)


def test_position_bias_as_attention_mask():
    # a learned bias fed to MultiHeadAttention's float attn_mask receives gradients
    m = nn.MultiHeadAttention(8, 2, dtype=tt.float64)
    rpb = nn.RelativePositionBias(2, dtype=tt.float64)
    x = tt.tensor(R.standard_normal((2, 5, 8)))
    m(x, attn_mask=rpb(5, 5)).sum().backward()
    assert np.abs(npy(rpb.relative_attention_bias.weight.grad)).sum() > 0
