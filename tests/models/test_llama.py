"""LLaMA against HuggingFace's LlamaForCausalLM, built offline from a config (random weights,
grouped-query attention), saved to a temporary directory and loaded with models.from_hf."""
import json

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402

from .causal_lm import assert_logits_and_loss_match  # noqa: E402

VOCAB = 96


def _reference(tmp_path, tied=False, pad_token_id=None):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        tie_word_embeddings=tied, pad_token_id=pad_token_id, bos_token_id=1, eos_token_id=2,
        attention_bias=not tied, attn_implementation="eager")
    ref = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # RMSNorm weights start at 1: perturb them so their grads mean something
        for name, p in ref.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    ref.save_pretrained(tmp_path)
    return ref


@pytest.fixture(params=["untied", "tied"])
def pair(request, tmp_path):
    tied = request.param == "tied"
    ref = _reference(tmp_path, tied=tied, pad_token_id=0 if tied else None)
    model = models.from_hf(str(tmp_path))
    model.eval()
    return ref, model


def _batch(padding):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (3, 12), generator=g)
    mask = torch.ones(3, 12, dtype=torch.long)
    if padding == "right":
        mask[1, 9:] = 0
        mask[2, 5:] = 0
    else:
        mask[1, :3] = 0
        mask[2, :7] = 0
    ids = ids.masked_fill(mask == 0, 0)
    labels = ids.masked_fill(mask == 0, -100)
    if padding == "left":
        # the first real token of a left-padded row is predicted from a padding position,
        # whose query sees no key at all: its logits are implementation-defined
        labels[1, 3] = labels[2, 7] = -100
    return ids, mask, labels


def test_config_fields_round_trip(pair):
    ref, model = pair
    c = model.config
    assert (c.num_key_value_heads, c.head_dim, c.rope_theta) == (2, 8, 500.0)
    assert c.tie_word_embeddings == ref.config.tie_word_embeddings
    assert hasattr(model, "lm_head") != c.tie_word_embeddings


@pytest.mark.parametrize("padding", ["right", "left"])
def test_logits_loss_and_every_gradient_match(pair, padding):
    ref, model = pair
    ids, mask, labels = _batch(padding)
    r = ref(ids, attention_mask=mask, labels=labels)
    o = model(tt.tensor(ids.numpy()), attention_mask=tt.tensor(mask.numpy()),
              labels=tt.tensor(labels.numpy()))
    assert_logits_and_loss_match(o, r, mask)
    ref_params = dict(ref.named_parameters())
    ours = dict(model.named_parameters())
    assert set(ours) == set(ref_params)
    for name, p in ours.items():
        np.testing.assert_allclose(p.grad.numpy(), ref_params[name].grad.numpy(),
                                   atol=2e-5, rtol=1e-4, err_msg=name)


def test_explicit_position_ids_match(pair):
    ref, model = pair
    ids, mask, _ = _batch("left")
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    expected = ref(ids, attention_mask=mask, position_ids=pos).logits.detach().numpy()
    got = model(tt.tensor(ids.numpy()), attention_mask=tt.tensor(mask.numpy()),
                position_ids=tt.tensor(pos.numpy())).logits.detach().numpy()
    valid = mask.numpy().astype(bool)
    np.testing.assert_allclose(got[valid], expected[valid], atol=1e-5)


@pytest.mark.parametrize("padding", [None, "left"])
def test_greedy_generation_equals_reference_with_and_without_cache(pair, padding):
    ref, model = pair
    prompt = torch.tensor([[5, 17, 33, 4, 8], [9, 9, 40, 1, 60]])
    mask = torch.ones_like(prompt)
    if padding == "left":
        mask[1, :2] = 0
        prompt = prompt.masked_fill(mask == 0, 0)
    expected = ref.generate(prompt, attention_mask=mask, max_new_tokens=10, do_sample=False,
                            pad_token_id=0, eos_token_id=None).numpy()
    ids, tmask = tt.tensor(prompt.numpy()), tt.tensor(mask.numpy())
    with_cache = model.generate(ids, 10, attention_mask=tmask).numpy()
    without = model.generate(ids, 10, attention_mask=tmask, use_cache=False).numpy()
    np.testing.assert_array_equal(with_cache, expected)
    np.testing.assert_array_equal(without, expected)


def test_cache_decoding_equals_full_recomputation(pair):
    _, model = pair
    ids = tt.tensor(np.random.default_rng(0).integers(0, VOCAB, (2, 10)))
    mask = np.ones((2, 10), dtype=np.int64)
    mask[1, :3] = 0  # left padding
    full = model(ids, attention_mask=tt.tensor(mask)).logits.detach().numpy()
    cache = model.new_cache()
    steps = [model(ids[:, :4], attention_mask=tt.tensor(mask[:, :4]), cache=cache).logits.detach().numpy()]
    for t in range(4, 10):
        steps.append(model(ids[:, t:t + 1], attention_mask=tt.tensor(mask[:, :t + 1]),
                           cache=cache).logits.detach().numpy())
    got = np.concatenate(steps, axis=1)
    assert cache.self_attn[0].key.shape == (2, 2, 10, 8)  # the cache keeps kv heads only
    np.testing.assert_allclose(got[mask == 1], full[mask == 1], atol=1e-5)


def test_save_hf_loads_back_in_transformers(pair, tmp_path):
    ref, model = pair
    out = tmp_path / "saved"
    model.save_hf(str(out))
    back = transformers.LlamaForCausalLM.from_pretrained(str(out)).eval()
    assert back.config.num_key_value_heads == 2
    assert back.config.tie_word_embeddings == ref.config.tie_word_embeddings
    ids = torch.randint(0, VOCAB, (2, 7))
    np.testing.assert_allclose(back(ids).logits.detach().numpy(), ref(ids).logits.detach().numpy(),
                               atol=1e-6)
    again = models.from_hf(str(out))
    np.testing.assert_allclose(again(tt.tensor(ids.numpy())).logits.detach().numpy(),
                               ref(ids).logits.detach().numpy(), atol=1e-5)


def test_unsupported_rope_scaling_is_a_clear_error(tmp_path):
    _reference(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NotImplementedError, match="rope_type 'linear'"):
        models.from_hf(str(tmp_path))


def test_trains_from_scratch_without_reference():
    model = models.Llama(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=16)
    assert model.config.head_dim == 8 and model.config.num_key_value_heads == 1
    ids = tt.tensor(np.tile(np.arange(8), (4, 1)))
    opt = nn.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        loss = model(ids, labels=ids).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2 * first


@pytest.mark.gpu
def test_cuda_matches_cpu(pair):
    _, model = pair
    ids, mask, labels = (tt.tensor(x.numpy()) for x in _batch("left"))
    cpu = model(ids, attention_mask=mask, labels=labels)
    model.to("cuda")
    gpu = model(ids.to("cuda"), attention_mask=mask.to("cuda"), labels=labels.to("cuda"))
    valid = mask.numpy().astype(bool)
    np.testing.assert_allclose(gpu.logits.detach().cpu().numpy()[valid],
                               cpu.logits.detach().numpy()[valid], atol=1e-4)
    np.testing.assert_allclose(gpu.loss.item(), cpu.loss.item(), atol=1e-5)
