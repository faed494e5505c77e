"""nn.MultiheadAttention (torch's spelling and weight layout) and nn.Transformer against
their torch twins in float64 with the torch state dict loaded as it is: outputs, attention
weights, and the gradients of inputs and every parameter."""
import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn

RNG = np.random.default_rng(7)


def _pair(cfg):
    theirs = torch.nn.MultiheadAttention(**cfg, dtype=torch.float64)
    ours = nn.MultiheadAttention(**cfg, dtype=tt.float64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _inputs(cfg, L=3, S=4, N=2, batched=True):
    E, kd, vd = cfg["embed_dim"], cfg.get("kdim") or cfg["embed_dim"], cfg.get("vdim") or cfg["embed_dim"]
    lead = ((N, L), (N, S)) if cfg.get("batch_first") else ((L, N), (S, N))
    if not batched:
        lead = ((L,), (S,))
    return [RNG.standard_normal(lead[0] + (E,)), RNG.standard_normal(lead[1] + (kd,)),
            RNG.standard_normal(lead[1] + (vd,))]


def _masks(kind, L=3, S=4, N=2, heads=2):
    if kind == "bool":
        am = np.zeros((L, S), bool)
        am[0, 1] = am[2, 3] = True
        kpm = np.zeros((N, S), bool)
        kpm[1, 0] = True
        return {"attn_mask": am, "key_padding_mask": kpm}
    if kind == "float3d":
        return {"attn_mask": RNG.standard_normal((N * heads, L, S))}
    if kind == "causal":
        return {"attn_mask": np.triu(np.ones((L, S), bool), 1), "is_causal": True}
    return {}


def _run(module, lib, xs, masks, kw):
    ts = [lib.tensor(x, dtype=lib.float64, requires_grad=True) for x in xs]
    m = {k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in masks.items()}
    out, w = module(*ts, **m, **kw)
    loss = (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))).sum()
    if w is not None:
        loss = loss + (w * w).sum()
    loss.backward()
    grads = [t.grad.numpy() for t in ts] + [p.grad.numpy() for _, p in module.named_parameters()]
    return [out.detach().numpy()] + ([] if w is None else [w.detach().numpy()]) + grads


CFGS = [
    dict(embed_dim=4, num_heads=2),
    dict(embed_dim=4, num_heads=2, kdim=3, vdim=5, bias=False),
    dict(embed_dim=6, num_heads=3, add_bias_kv=True, add_zero_attn=True),
    dict(embed_dim=4, num_heads=2, batch_first=True),
]


@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("masks", ["none", "bool", "float3d", "causal"])
@pytest.mark.parametrize("kw", [{}, {"need_weights": False}, {"average_attn_weights": False}],
                         ids=["weights", "no_weights", "per_head"])
def test_multihead_attention_matches_torch(cfg, masks, kw):
    if masks == "float3d" and cfg["num_heads"] != 2:
        pytest.skip("the 3-d mask is built for 2 heads")
    ours, theirs = _pair(cfg)
    xs = _inputs(cfg)
    mk = _masks(masks)
    if cfg.get("batch_first") and masks == "none":
        ours.eval(), theirs.eval()
    for got, want in zip(_run(ours, tt, xs, mk, kw), _run(theirs, torch, xs, mk, kw)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_unbatched_and_init_as_torch():
    cfg = dict(embed_dim=4, num_heads=2)
    ours, theirs = _pair(cfg)
    xs = _inputs(cfg, batched=False)
    for masks in ({}, {"key_padding_mask": np.array([False, True, False, False])}):
        for got, want in zip(_run(ours, tt, xs, masks, {}), _run(theirs, torch, xs, masks, {})):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        ours.zero_grad(), theirs.zero_grad()
    fresh = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert float(fresh.in_proj_bias.abs().sum()) == 0 and float(fresh.out_proj.bias.abs().sum()) == 0
    bound = (6 / (8 + 24)) ** 0.5  # xavier_uniform_ over (3E, E)
    assert 0.8 * bound < float(fresh.in_proj_weight.abs().max()) <= bound
    assert tuple(fresh.bias_k.shape) == (1, 1, 8)


def test_functional_and_errors_as_torch():
    cfg = dict(embed_dim=4, num_heads=2)
    ours, theirs = _pair(cfg)
    q = RNG.standard_normal((3, 2, 4))
    args = lambda m, lib: (4, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,  # noqa: E731
                           m.out_proj.weight, m.out_proj.bias)
    got, gw = F.multi_head_attention_forward(tt.tensor(q), tt.tensor(q), tt.tensor(q), *args(ours, tt))
    want, ww = torch.nn.functional.multi_head_attention_forward(
        torch.tensor(q), torch.tensor(q), torch.tensor(q), *args(theirs, torch))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(gw.detach().numpy(), ww.detach().numpy(), rtol=1e-9)
    with pytest.raises(RuntimeError, match="is_causal"):
        ours(tt.tensor(q), tt.tensor(q), tt.tensor(q), is_causal=True)
    with pytest.raises(ValueError, match="key_padding_mask shape \\(3, 4\\)"):
        ours(tt.tensor(q), tt.tensor(q), tt.tensor(q), key_padding_mask=tt.zeros(3, 4, dtype=tt.bool))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(5, 2)


# ---------------------------------------------------------------------- nn.Transformer
def _transformer_pair(batch_first, norm_first, activation):
    kw = dict(d_model=4, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=6,
              dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.Transformer(**kw, activation=activation, dtype=torch.float64)
    ours = nn.Transformer(**kw, activation=activation if isinstance(activation, str) else F.gelu,
                          dtype=tt.float64)
    ours.load_state_dict(theirs.state_dict())  # torch's names, loaded as they are
    return ours, theirs


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("batch_first,norm_first,activation,train",
                         [(False, False, "relu", False), (True, True, "gelu", True),
                          (False, True, torch.nn.functional.gelu, True)])
def test_transformer_matches_torch(batch_first, norm_first, activation, train):
    ours, theirs = _transformer_pair(batch_first, norm_first, activation)
    ours.train(train), theirs.train(train)
    N, S, T = 2, 4, 3
    src = RNG.standard_normal((N, S, 4) if batch_first else (S, N, 4))
    tgt = RNG.standard_normal((N, T, 4) if batch_first else (T, N, 4))
    pad = np.zeros((N, S), bool)
    pad[1, -1] = True

    def run(model, lib):
        x, y = (lib.tensor(a, requires_grad=True) for a in (src, tgt))
        mask = type(model).generate_square_subsequent_mask(T, dtype=lib.float64)
        out = model(x, y, tgt_mask=mask, src_key_padding_mask=lib.tensor(pad),
                    memory_key_padding_mask=lib.tensor(pad), tgt_is_causal=True)
        (out * lib.tensor(np.sin(np.arange(out.numel())).reshape(tuple(out.shape)))).sum().backward()
        return out.detach().numpy(), x.grad.numpy(), y.grad.numpy()

    for got, want in zip(run(ours, tt), run(theirs, torch)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
    want_grads = nn.convert_torch_transformer_state({k: p.grad for k, p in theirs.named_parameters()})
    for k, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), want_grads[k], rtol=1e-8, atol=1e-11, err_msg=k)


def test_transformer_init_and_mask_as_torch():
    m = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=16)
    w = m.encoder.layers[0].ffn.fc1.weight
    bound = (6 / (8 + 16)) ** 0.5  # xavier_uniform_, as torch's _reset_parameters
    assert 0.7 * bound < float(w.abs().max()) <= bound
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(3).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(3).numpy())
    with pytest.raises(RuntimeError, match="d_model=8"):
        m(tt.zeros(2, 3, 4), tt.zeros(2, 3, 4))


def test_compiled_multihead_attention_follows_each_calls_mask():
    """nn.MultiheadAttention through tt.compile: the key padding mask and inputs of each call
    are used (nothing frozen from the first), values and gradients as eager."""
    ours, _ = _pair(dict(embed_dim=4, num_heads=2))

    def f(q, pad):
        out, w = ours(q, q, q, key_padding_mask=pad)
        loss = (out * out).sum() + (w * w).sum()
        loss.backward()
        return loss, ours.in_proj_weight.grad

    g = tt.compile(f, backend="numpy")
    for seed, row in ((1, [False, False, True]), (2, [True, False, False])):
        q = tt.tensor(np.random.default_rng(seed).standard_normal((3, 2, 4)))
        pad = tt.tensor([[False] * 3, row])
        got = [t.detach().numpy().copy() for t in g(q, pad)]
        ours.zero_grad()
        want = [t.detach().numpy().copy() for t in f(q, pad)]
        ours.zero_grad()
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10)
