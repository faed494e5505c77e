"""FeedForward, MultiHeadAttention and KVCache against torch, in float64 with copied weights:
outputs, input gradients and every parameter's gradient.

`compare_modules` (also used by test_transformer.py) runs a tinytensor module and a torch
module on the same inputs; torch's parameter grads are renamed with the same converter that
loads torch weights, so the converter is tested too."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

from tinytensor import nn
import tinytensor as tt

R = np.random  # seeded before every test by conftest
F64 = tt.float64


def _pair(v):
    """numpy float -> (tt, torch) leaves requiring grad; other arrays -> constants; else as is."""
    if isinstance(v, np.ndarray):
        req = v.dtype.kind == "f"
        return tt.tensor(v, requires_grad=req), torch.tensor(v, requires_grad=req)
    return v, v


def _flat(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o is not None]


def compare_modules(tt_mod, th_mod, call_tt, call_th, inputs, atol=1e-10, convert=None):
    """call_tt(tt_mod, *tt_inputs) vs call_th(th_mod, *torch_inputs): outputs, then grads of
    sum(out * random cotangent) for the float inputs and every parameter."""
    convert = convert or nn.convert_torch_transformer_state
    tt_mod.load_state_dict(convert(th_mod.state_dict()))
    pairs = [_pair(v) for v in inputs]
    outs_tt = _flat(call_tt(tt_mod, *[p[0] for p in pairs]))
    outs_th = _flat(call_th(th_mod, *[p[1] for p in pairs]))
    assert len(outs_tt) == len(outs_th)
    for a, b in zip(outs_tt, outs_th):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=1e-7)
    cots = [R.standard_normal(tuple(o.shape)) for o in outs_th]
    sum(((o * tt.tensor(c)).sum() for o, c in zip(outs_tt, cots))).backward()
    sum(((o * torch.tensor(c)).sum() for o, c in zip(outs_th, cots))).backward()
    for i, (a, b) in enumerate(pairs):
        if isinstance(a, tt.Tensor) and a.requires_grad:
            np.testing.assert_allclose(a.grad.detach().numpy(), b.grad.detach().numpy(), atol=atol, rtol=1e-7,
                                       err_msg=f"input {i}")
    th_grads = convert({k: (p.grad if p.grad is not None else torch.zeros_like(p))
                        for k, p in th_mod.named_parameters()})
    tt_params = dict(tt_mod.named_parameters())
    assert set(th_grads) == set(tt_params)
    for k, p in tt_params.items():
        np.testing.assert_allclose(p.grad.detach().numpy(), th_grads[k], atol=atol, rtol=1e-7, err_msg=k)


def randn(*shape):
    return R.standard_normal(shape)


# ------------------------------------------------------------------ FeedForward
TORCH_ACT = {"relu": TF.relu, "gelu": TF.gelu, "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"),
             "silu": TF.silu, "swiglu": TF.silu, "geglu": TF.gelu}


class TorchFFN(torch.nn.Module):
    def __init__(self, d, f, act, bias):
        super().__init__()
        self.act, self.gated = TORCH_ACT[act], act in ("swiglu", "geglu")
        L = lambda i, o: torch.nn.Linear(i, o, bias=bias, dtype=torch.float64)  # noqa: E731
        if self.gated:
            self.gate_proj, self.up_proj, self.down_proj = L(d, f), L(d, f), L(f, d)
        else:
            self.fc1, self.fc2 = L(d, f), L(f, d)

    def forward(self, x):
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.fc2(self.act(self.fc1(x)))


@pytest.mark.parametrize("act", list(TORCH_ACT))
@pytest.mark.parametrize("bias", [True, False])
def test_feedforward(act, bias):
    compare_modules(nn.FeedForward(6, 10, act, bias=bias, dtype=F64), TorchFFN(6, 10, act, bias),
                    lambda m, x: m(x), lambda m, x: m(x), [randn(2, 3, 6)])


def test_feedforward_errors():
    with pytest.raises(ValueError, match="activation"):
        nn.FeedForward(4, 8, "tanh")
    with pytest.raises(ValueError, match=r"FeedForward.*\(2, 5\).*d_model=4"):
        nn.FeedForward(4, 8)(tt.randn(2, 5))


# ------------------------------------------------------------------ MultiHeadAttention vs torch
B, L, S, E, H = 2, 5, 7, 8, 2


def causal(n, m=None):
    return np.triu(np.ones((n, m or n), dtype=bool), 1)  # torch MHA: True = masked


def kpm(b, s):
    m = np.zeros((b, s), dtype=bool)
    m[0, -2:] = True  # batch 0 pads its last two keys
    return m


def float_mask(*shape):
    m = R.standard_normal(shape)
    m[..., 0, 1] = -np.inf
    return m


# name: (query shape, key shape or None (self), kwargs arrays, other kwargs)
MHA_CASES = {
    "self": ((B, L, E), None, {}, {}),
    "self_weights": ((B, L, E), None, {}, {"need_weights": True}),
    "self_weights_per_head": ((B, L, E), None, {}, {"need_weights": True, "average_attn_weights": False}),
    "key_padding": ((B, L, E), None, {"key_padding_mask": kpm(B, L)}, {}),
    "key_padding_float": ((B, L, E), None, {"key_padding_mask": np.where(kpm(B, L), -np.inf, 0.5)}, {}),
    "bool_mask": ((B, L, E), None, {"attn_mask": causal(L)}, {}),
    "float_mask": ((B, L, E), None, {"attn_mask": float_mask(L, L)}, {}),
    "float_mask_3d": ((B, L, E), None, {"attn_mask": float_mask(B * H, L, L)}, {}),
    "bool_mask_3d": ((B, L, E), None, {"attn_mask": np.broadcast_to(causal(L), (B * H, L, L)).copy()}, {}),
    "bool_mask_and_padding": ((B, L, E), None, {"attn_mask": causal(L), "key_padding_mask": kpm(B, L)}, {}),
    "float_mask_and_padding": ((B, L, E), None, {"attn_mask": float_mask(L, L), "key_padding_mask": kpm(B, L)}, {}),
    "masks_weights": ((B, L, E), None, {"attn_mask": float_mask(L, L), "key_padding_mask": kpm(B, L)},
                      {"need_weights": True, "average_attn_weights": False}),
    "cross": ((B, L, E), (B, S, E), {"key_padding_mask": kpm(B, S)}, {}),
    "cross_mask_weights": ((B, L, E), (B, S, E), {"attn_mask": float_mask(L, S)}, {"need_weights": True}),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("case", list(MHA_CASES))
@pytest.mark.parametrize("bias", [True, False])
def test_mha_vs_torch(case, bias):
    qshape, kshape, arrays, kw = MHA_CASES[case]
    th = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=torch.float64)
    ours = nn.MultiHeadAttention(E, H, bias=bias, dtype=F64)
    names = list(arrays)
    inputs = [randn(*qshape)] + ([randn(*kshape), randn(*kshape)] if kshape else []) + list(arrays.values())
    n_qkv = 3 if kshape else 1

    def split(args):
        qkv, masks = args[:n_qkv], dict(zip(names, args[n_qkv:]))
        return (qkv if kshape else qkv * 3), masks

    def call_tt(m, *args):
        qkv, masks = split(args)
        return m(*qkv, **masks, **kw)

    def call_th(m, *args):
        qkv, masks = split(args)
        out, w = m(*qkv, **masks, need_weights=kw.get("need_weights", False),
                   average_attn_weights=kw.get("average_attn_weights", True))
        return (out, w) if kw.get("need_weights") else out
    compare_modules(ours, th, call_tt, call_th, inputs, convert=nn.convert_torch_mha_state)


def test_mha_is_causal_vs_torch():
    # torch wants the mask along with its is_causal hint; ours builds it
    th = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    compare_modules(nn.MultiHeadAttention(E, H, dtype=F64), th,
                    lambda m, x, p: m(x, key_padding_mask=p, is_causal=True),
                    lambda m, x, p: m(x, x, x, key_padding_mask=p, attn_mask=torch.tensor(causal(L)),
                                      is_causal=True, need_weights=False)[0],
                    [randn(B, L, E), kpm(B, L)], convert=nn.convert_torch_mha_state)
    th.zero_grad()
    compare_modules(nn.MultiHeadAttention(E, H, dtype=F64), th,  # the sdpa is_causal path
                    lambda m, x: m(x, is_causal=True),
                    lambda m, x: m(x, x, x, attn_mask=torch.tensor(causal(L)), need_weights=False)[0],
                    [randn(B, L, E)], convert=nn.convert_torch_mha_state)


def test_mha_kdim_vdim_vs_torch():
    th = torch.nn.MultiheadAttention(E, H, kdim=3, vdim=5, batch_first=True, dtype=torch.float64)
    ours = nn.MultiHeadAttention(E, H, kdim=3, vdim=5, dtype=F64)
    compare_modules(ours, th, lambda m, q, k, v, p: m(q, k, v, key_padding_mask=p, need_weights=True),
                    lambda m, q, k, v, p: m(q, k, v, key_padding_mask=p),
                    [randn(B, L, E), randn(B, S, 3), randn(B, S, 5), kpm(B, S)],
                    convert=nn.convert_torch_mha_state)


def test_load_torch_mha_state():
    th = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    ours = nn.MultiHeadAttention(E, H, dtype=F64)
    ours.load_torch_mha_state(th.state_dict())
    w = th.in_proj_weight.detach().numpy()
    np.testing.assert_array_equal(ours.k_proj.weight.detach().numpy(), w[E:2 * E])
    np.testing.assert_array_equal(ours.v_proj.bias.detach().numpy(), th.in_proj_bias.detach().numpy()[2 * E:])


# ------------------------------------------------------------------ grouped-query attention
def torch_gqa(x, mem, w, nh, nkv, causal_, mask):
    """Projections in torch, attention by torch's sdpa(enable_gqa=True)."""
    Bq, Lq, _ = x.shape
    hs = E // nh
    lin = lambda t, n: TF.linear(t, w[f"{n}.weight"], w[f"{n}.bias"])  # noqa: E731
    q = lin(x, "q_proj").view(Bq, Lq, nh, hs).transpose(1, 2)
    k = lin(mem, "k_proj").view(Bq, -1, nkv, hs).transpose(1, 2)
    v = lin(mem, "v_proj").view(Bq, -1, nkv, hs).transpose(1, 2)
    o = TF.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal_, enable_gqa=True)
    # the weights, explicitly, each kv head serving nh // nkv consecutive query heads
    kr = k.repeat_interleave(nh // nkv, dim=1)
    s = q @ kr.transpose(-1, -2) / hs ** 0.5
    if causal_:
        s = s.masked_fill(torch.ones(Lq, s.shape[-1], dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return lin(o.transpose(1, 2).reshape(Bq, Lq, E), "out_proj"), s.softmax(-1)


@pytest.mark.parametrize("nkv", [1, 2])
@pytest.mark.parametrize("mode", ["causal", "padding", "cross"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_gqa_vs_torch_sdpa(nkv, mode, need_weights):
    nh = 4
    ours = nn.MultiHeadAttention(E, nh, num_kv_heads=nkv, dtype=F64)
    assert ours.k_proj.weight.shape == (nkv * E // nh, E)
    x, mem = randn(B, L, E), randn(B, S if mode == "cross" else L, E)
    w = {k: torch.tensor(v.detach().numpy(), requires_grad=True) for k, v in ours.state_dict().items()}
    pad = kpm(B, mem.shape[1])
    xt, mt = tt.tensor(x, requires_grad=True), tt.tensor(mem, requires_grad=True)
    xh, mh = torch.tensor(x, requires_grad=True), torch.tensor(mem, requires_grad=True)
    kw = {"is_causal": mode == "causal", "need_weights": need_weights, "average_attn_weights": False}
    if mode != "causal":
        kw["key_padding_mask"] = tt.tensor(pad)
    out = _flat(ours(xt, mt, mt, **kw))
    th_mask = None if mode == "causal" else torch.tensor(~pad)[:, None, None, :]
    ref = torch_gqa(xh, mh, w, nh, nkv, mode == "causal", th_mask)[:len(out)]
    cots = [randn(*o.shape) for o in out]
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)
    sum((o * tt.tensor(c)).sum() for o, c in zip(out, cots)).backward()
    sum((o * torch.tensor(c)).sum() for o, c in zip(ref, cots)).backward()
    np.testing.assert_allclose(xt.grad.detach().numpy(), xh.grad.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(mt.grad.detach().numpy(), mh.grad.detach().numpy(), atol=1e-10)
    for k, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.detach().numpy(), w[k].grad.detach().numpy(), atol=1e-10, err_msg=k)


# ------------------------------------------------------------------ KV cache
@pytest.mark.parametrize("nkv", [2, 1])
@pytest.mark.parametrize("need_weights", [False, True])
def test_kv_cache_matches_full_causal(nkv, need_weights):
    m = nn.MultiHeadAttention(E, 2, num_kv_heads=nkv, dtype=F64).eval()
    x = tt.tensor(randn(B, 6, E))
    with tt.no_grad():
        full = _flat(m(x, is_causal=True, need_weights=need_weights, average_attn_weights=False))
        cache = nn.KVCache()
        chunks = [(0, 3), (3, 4), (4, 5), (5, 6)]  # a 3-token prefill, then one token at a time
        for a, b in chunks:
            step = _flat(m(x[:, a:b], is_causal=True, cache=cache, need_weights=need_weights,
                           average_attn_weights=False))
            np.testing.assert_allclose(step[0].detach().numpy(), full[0].detach().numpy()[:, a:b], atol=1e-12)
            if need_weights:  # (B, nh, b - a, b): the first b keys of rows a..b
                np.testing.assert_allclose(step[1].detach().numpy(), full[1].detach().numpy()[:, :, a:b, :b], atol=1e-12)
        assert len(cache) == 6 and cache.key.shape == (B, nkv, 6, E // 2)


def test_kv_cache_padding_and_static_cross():
    m = nn.MultiHeadAttention(E, 2, dtype=F64)
    x, mem = tt.tensor(randn(B, 4, E)), tt.tensor(randn(B, S, E))
    pad = tt.tensor(kpm(B, 4))
    with tt.no_grad():
        full = m(x, key_padding_mask=pad, is_causal=True)
        cache = nn.KVCache()
        steps = [m(x[:, t:t + 1], key_padding_mask=pad[:, :t + 1], is_causal=True, cache=cache)
                 for t in range(4)]
        np.testing.assert_allclose(tt.cat(steps, 1).detach().numpy(), full.detach().numpy(), atol=1e-12)
        full = m(x, mem)
        cross = nn.KVCache(static=True)
        steps = [m(x[:, t:t + 1], mem, cache=cross) for t in range(4)]
        np.testing.assert_allclose(tt.cat(steps, 1).detach().numpy(), full.detach().numpy(), atol=1e-12)
        assert len(cross) == S  # projected once, not appended


def test_kv_cache_select_reorders_batch_rows_of_keys_and_values():
    # beam search keeps and repeats rows; a select must give what feeding those rows would
    m = nn.MultiHeadAttention(E, 2, dtype=F64).eval()
    x = tt.tensor(randn(3, 4, E))
    rows = [2, 2, 0]
    with tt.no_grad():
        cache, want = nn.KVCache(), nn.KVCache()
        m(x[:, :3], is_causal=True, cache=cache)
        cache.select(rows)
        m(x[rows, :3], is_causal=True, cache=want)
        # equal up to rounding: BLAS may block a projection of 3 rows differently from one
        # of the reordered rows (seen with OpenBLAS's Haswell kernels)
        np.testing.assert_allclose(cache.key.numpy(), want.key.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(cache.value.numpy(), want.value.numpy(), rtol=0, atol=1e-12)
        step = m(x[rows, 3:], is_causal=True, cache=cache)
        np.testing.assert_allclose(step.numpy(), m(x[rows], is_causal=True)[:, 3:].numpy(), atol=1e-12)
    empty = nn.KVCache()
    empty.select(rows)  # nothing cached yet: nothing to move
    assert len(empty) == 0


def test_kv_cache_grads_flow():
    # stepping with a cache under autograd gives the same parameter grads as the full pass
    m = nn.MultiHeadAttention(E, 2, dtype=F64)
    x = tt.tensor(randn(1, 3, E))
    m(x, is_causal=True).sum().backward()
    g_full = m.q_proj.weight.grad.detach().numpy().copy()
    m.zero_grad()
    cache = nn.KVCache()
    sum(m(x[:, t:t + 1], is_causal=True, cache=cache).sum() for t in range(3)).backward()
    np.testing.assert_allclose(m.q_proj.weight.grad.detach().numpy(), g_full, atol=1e-12)


# ------------------------------------------------------------------ dropout, errors
def test_attention_dropout():
    m = nn.MultiHeadAttention(E, 2, dropout=1.0, dtype=F64)
    x = tt.tensor(randn(B, L, E))
    bias = np.broadcast_to(m.out_proj.bias.detach().numpy(), (B, L, E))
    np.testing.assert_allclose(m(x).detach().numpy(), bias, atol=1e-12)  # every attention prob dropped
    out, w = m(x, need_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), bias, atol=1e-12)
    assert not np.allclose(m.eval()(x).detach().numpy(), bias)
    m2 = nn.MultiHeadAttention(E, 2, dropout=0.5, dtype=F64)
    m2.load_state_dict(m.state_dict())
    a, b = m2(x).detach().numpy(), m2(x).detach().numpy()
    assert not np.allclose(a, b)  # training: fresh masks each call
    m2.eval()
    np.testing.assert_array_equal(m2(x).detach().numpy(), m2(x).detach().numpy())


def test_mha_errors():
    m = nn.MultiHeadAttention(E, 2)
    with pytest.raises(ValueError, match=r"MultiHeadAttention: query \(2, 5, 6\).*embed_dim=8"):
        m(tt.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"attn_mask shape \(4, 5\)"):
        m(tt.randn(2, 5, 8), attn_mask=tt.zeros(4, 5))
    with pytest.raises(ValueError, match=r"key_padding_mask shape \(2, 4\).*\(2, 5\)"):
        m(tt.randn(2, 5, 8), key_padding_mask=tt.zeros(2, 4, dtype=tt.bool))
    with pytest.raises(ValueError, match="3-D"):
        m(tt.randn(5, 8))
    with pytest.raises(ValueError, match="not divisible"):
        nn.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="num_kv_heads=3"):
        nn.MultiHeadAttention(8, 4, num_kv_heads=3)
