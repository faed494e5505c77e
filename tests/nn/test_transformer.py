"""Transformer encoder/decoder layers and stacks against torch.nn.Transformer*, float64, copied
weights (via convert_torch_transformer_state), dropout 0; and cached decoding against full
recomputation."""
import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt
from tests.nn.test_attention import causal, compare_modules, kpm, randn

D, H, FF, B, T, S = 8, 2, 16, 2, 5, 6
F64 = tt.float64


def layer_pair(kind, norm_first, activation="relu", batch_first=True):
    th_cls = torch.nn.TransformerEncoderLayer if kind == "enc" else torch.nn.TransformerDecoderLayer
    tt_cls = nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
    kw = dict(dim_feedforward=FF, dropout=0.0, activation=activation, norm_first=norm_first,
              batch_first=batch_first)
    return tt_cls(D, H, dtype=F64, **kw), th_cls(D, H, dtype=torch.float64, **kw)


# (name, arrays passed by keyword)
ENC_MASKS = {
    "none": {},
    "bool_mask": {"src_mask": causal(T)},
    "float_mask_padding": {"src_mask": np.where(causal(T), -np.inf, 0.0) + 0.3 * np.eye(T),
                           "src_key_padding_mask": np.where(kpm(B, T), -np.inf, 0.0)},
    "padding": {"src_key_padding_mask": kpm(B, T)},
}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", list(ENC_MASKS))
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_vs_torch(norm_first, masks, activation):
    ours, th = layer_pair("enc", norm_first, activation)
    names, arrays = list(ENC_MASKS[masks]), list(ENC_MASKS[masks].values())
    call = lambda m, x, *a: m(x, **dict(zip(names, a)))  # noqa: E731
    compare_modules(ours, th, call, call, [randn(B, T, D)] + arrays)


def test_encoder_layer_not_batch_first():
    ours, th = layer_pair("enc", False, batch_first=False)
    call = lambda m, x, p: m(x, src_key_padding_mask=p)  # noqa: E731
    compare_modules(ours, th, call, call, [randn(T, B, D), kpm(B, T)])


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_decoder_layer_vs_torch(norm_first, with_padding):
    ours, th = layer_pair("dec", norm_first)
    pads = [kpm(B, T), kpm(B, S)] if with_padding else [None, None]

    def call(m, x, mem, mm, tp, mp):  # ours builds the causal mask itself
        return m(x, mem, tgt_is_causal=True, memory_mask=mm, tgt_key_padding_mask=tp,
                 memory_key_padding_mask=mp)
    th_call = lambda m, x, mem, mm, tp, mp: m(  # noqa: E731
        x, mem, tgt_mask=torch.tensor(causal(T)), tgt_is_causal=True, memory_mask=mm,
        tgt_key_padding_mask=tp, memory_key_padding_mask=mp)
    compare_modules(ours, th, call, th_call,
                    [randn(B, T, D), randn(B, S, D), 0.5 * randn(T, S)] + pads)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_vs_torch(norm_first):
    kw = dict(dim_feedforward=FF, dropout=0.0, norm_first=norm_first, batch_first=True)
    th_enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, dtype=torch.float64, **kw),
                                         2, norm=torch.nn.LayerNorm(D, dtype=torch.float64),
                                         enable_nested_tensor=False)
    th_dec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, dtype=torch.float64, **kw),
                                         2, norm=torch.nn.LayerNorm(D, dtype=torch.float64))
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, dtype=F64, **kw), 2,
                                norm=nn.LayerNorm(D, dtype=F64))
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, dtype=F64, **kw), 2,
                                norm=nn.LayerNorm(D, dtype=F64))
    call = lambda m, x, p: m(x, src_key_padding_mask=p)  # noqa: E731
    compare_modules(enc, th_enc, call, call, [randn(B, T, D), kpm(B, T)])
    compare_modules(dec, th_dec, lambda m, x, mem: m(x, mem, tgt_is_causal=True),
                    lambda m, x, mem: m(x, mem, tgt_mask=torch.tensor(causal(T)), tgt_is_causal=True),
                    [randn(B, T, D), randn(B, S, D)])


def test_load_torch_state_dict():
    th = torch.nn.TransformerDecoderLayer(D, H, FF, batch_first=True)
    ours = nn.TransformerDecoderLayer(D, H, FF, batch_first=True)
    ours.load_torch_state_dict(th.state_dict())
    np.testing.assert_array_equal(ours.cross_attn.q_proj.weight.detach().numpy(),
                                  th.multihead_attn.in_proj_weight.detach().numpy()[:D])
    np.testing.assert_array_equal(ours.ffn.fc2.bias.detach().numpy(), th.linear2.bias.detach().numpy())


def test_layers_are_independent():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 3)
    w = [layer.self_attn.q_proj.weight for layer in enc.layers]
    assert len({id(p) for p in w}) == 3 and not np.allclose(w[0].detach().numpy(), w[1].detach().numpy())


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_cache_matches_full(norm_first):
    kw = dict(dim_feedforward=FF, dropout=0.0, norm_first=norm_first, batch_first=True)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, num_kv_heads=1, dtype=F64, **kw), 2,
                                norm=nn.LayerNorm(D, dtype=F64)).eval()
    x, mem = tt.tensor(randn(B, T, D)), tt.tensor(randn(B, S, D))
    mpad = tt.tensor(kpm(B, S))
    with tt.no_grad():
        full = dec(x, mem, tgt_is_causal=True, memory_key_padding_mask=mpad).numpy()
        caches = dec.init_cache()
        for a, b in [(0, 2), (2, 3), (3, 4), (4, 5)]:
            step = dec(x[:, a:b], mem, tgt_is_causal=True, memory_key_padding_mask=mpad, cache=caches)
            np.testing.assert_allclose(step.numpy(), full[:, a:b], atol=1e-12)
    assert [len(c) for pair in caches for c in pair] == [T, S, T, S]
    with pytest.raises(ValueError, match="cache has 1 entries for 2 layers"):
        dec(x, mem, cache=caches[:1])


def test_gated_ffn_layer_runs():
    layer = nn.TransformerEncoderLayer(D, H, FF, activation="swiglu", norm_first=True, batch_first=True)
    assert {"ffn.gate_proj.weight", "ffn.up_proj.weight", "ffn.down_proj.weight"} <= set(layer.state_dict())
    assert layer(tt.randn(B, T, D)).shape == (B, T, D)
