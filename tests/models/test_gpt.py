"""GPT-1 and GPT-2 against HuggingFace's reference implementation, built offline from a
config (random weights), saved to a temporary directory and loaded with models.from_hf."""
import json
import os

import numpy as np
import pytest

import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402

from .causal_lm import assert_logits_and_loss_match  # noqa: E402

VOCAB = 96


def _reference(kind, tmp_path):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    if kind == "gpt2":
        ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(bos_token_id=0, eos_token_id=0, **common))
    else:
        ref = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**common))
    ref.eval()
    ref.save_pretrained(tmp_path)
    return ref


def _hf_grad_name(name):
    return name if name.startswith("transformer.") else "transformer." + name


@pytest.fixture(params=["gpt2", "openai-gpt"])
def pair(request, tmp_path):
    ref = _reference(request.param, tmp_path)
    model = models.from_hf(str(tmp_path))
    model.eval()
    return request.param, ref, model


def _batch(kind):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (3, 12), generator=g)
    mask = torch.ones(3, 12, dtype=torch.long)
    if kind == "gpt2":  # right padding on two rows (GPT-1's HF model takes no mask)
        mask[1, 9:] = 0
        mask[2, 5:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def test_logits_loss_and_every_gradient_match(pair):
    kind, ref, model = pair
    ids, mask, labels = _batch(kind)
    kw = {"attention_mask": mask} if kind == "gpt2" else {}
    r = ref(ids, labels=labels, **kw)
    t_kw = {"attention_mask": tt.tensor(mask.numpy())} if kind == "gpt2" else {}
    o = model(tt.tensor(ids.numpy()), labels=tt.tensor(labels.numpy()), **t_kw)
    assert_logits_and_loss_match(o, r, mask)
    ref_params = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        g_ref = ref_params[_hf_grad_name(name)].grad.numpy()
        if name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            g_ref = g_ref.T
        np.testing.assert_allclose(p.grad.numpy(), g_ref, atol=2e-5, rtol=1e-4, err_msg=name)


def test_greedy_generation_equals_reference_with_and_without_cache(pair):
    kind, ref, model = pair
    prompt = torch.tensor([[5, 17, 33, 2], [9, 9, 40, 1]])
    expected = ref.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10,
                            do_sample=False, pad_token_id=0, eos_token_id=None).numpy()
    ids = tt.tensor(prompt.numpy())
    with_cache = model.generate(ids, 10).numpy()
    without = model.generate(ids, 10, use_cache=False).numpy()
    np.testing.assert_array_equal(with_cache, expected)
    np.testing.assert_array_equal(without, expected)


def test_cache_decoding_equals_full_recomputation(pair):
    _, _, model = pair
    ids = tt.tensor(np.random.default_rng(0).integers(0, VOCAB, (2, 10)))
    full = model(ids).logits.detach().numpy()
    cache = model.new_cache()
    steps = [model(ids[:, :4], cache=cache).logits.detach().numpy()]
    for t in range(4, 10):
        steps.append(model(ids[:, t:t + 1], cache=cache).logits.detach().numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_sampling_is_reproducible_with_a_seed(pair):
    _, _, model = pair
    ids = tt.tensor([[1, 2, 3]])
    a = model.generate(ids, 8, do_sample=True, top_k=10, top_p=0.9, temperature=0.7, seed=3)
    b = model.generate(ids, 8, do_sample=True, top_k=10, top_p=0.9, temperature=0.7, seed=3)
    assert a.tolist() == b.tolist() and a.shape == (1, 11)


def test_save_hf_loads_back_in_transformers(pair, tmp_path):
    kind, ref, model = pair
    out = tmp_path / "saved"
    model.save_hf(str(out))
    cls = transformers.GPT2LMHeadModel if kind == "gpt2" else transformers.OpenAIGPTLMHeadModel
    back = cls.from_pretrained(str(out)).eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    np.testing.assert_allclose(back(ids).logits.detach().numpy(), ref(ids).logits.detach().numpy(),
                               atol=1e-6)


def test_pytorch_model_bin_loads_without_torch_code(tmp_path):
    ref = _reference("gpt2", tmp_path / "src")
    d = tmp_path / "bin"
    d.mkdir()
    torch.save(ref.state_dict(), d / "pytorch_model.bin")
    (d / "config.json").write_text((tmp_path / "src" / "config.json").read_text())
    model = models.from_hf(str(d))
    ids = torch.randint(0, VOCAB, (2, 6))
    np.testing.assert_allclose(model(tt.tensor(ids.numpy())).logits.detach().numpy(),
                               ref(ids).logits.detach().numpy(), atol=1e-5)


def test_unknown_architecture_and_mismatched_weights_are_clear_errors(tmp_path):
    _reference("gpt2", tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    bad = dict(cfg, model_type="no-such-model")
    (tmp_path / "config.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="unknown architecture.*no-such-model.*supported: .*gpt2"):
        models.from_hf(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, n_embd=64)))  # shapes now differ
    with pytest.raises(ValueError, match="wrong shape: .*wte.weight expects \\(96, 64\\)"):
        models.from_hf(str(tmp_path))
    os.remove(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(FileNotFoundError, match="has none of model.safetensors, pytorch_model.bin, model.safetensors.index.json"):
        models.from_hf(str(tmp_path))


def test_left_padded_greedy_generation_equals_reference(tmp_path):
    # HF's generate counts a left-padded row's positions from its first real token
    ref = _reference("gpt2", tmp_path)
    with torch.no_grad():  # strong position embeddings, so a shift changes the argmax
        ref.transformer.wpe.weight.mul_(50)
    ref.save_pretrained(tmp_path)
    model = models.from_hf(str(tmp_path))
    prompt = torch.tensor([[0, 0, 5, 17, 33, 2], [9, 9, 40, 1, 7, 3]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    expected = ref.generate(prompt, attention_mask=mask, max_new_tokens=8, do_sample=False,
                            pad_token_id=0, eos_token_id=None).numpy()
    for use_cache in (True, False):
        got = model.generate(tt.tensor(prompt.numpy()), 8, attention_mask=tt.tensor(mask.numpy()),
                             use_cache=use_cache).numpy()
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("flag,value", [("scale_attn_by_inverse_layer_idx", True),
                                        ("scale_attn_weights", False)])
def test_attention_variants_we_do_not_implement_are_refused(tmp_path, flag, value):
    _reference("gpt2", tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg.get(flag, not value) != value  # the default checkpoint loads (other tests)
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, **{flag: value})))
    with pytest.raises(NotImplementedError, match=flag):
        models.from_hf(str(tmp_path))


def test_generation_stops_at_any_of_several_eos_ids(pair):
    _, _, model = pair
    ids = tt.tensor([[5, 17, 33, 2], [9, 9, 40, 1]])
    free = model.generate(ids, 6).numpy()
    stop = int(free[1, 5])  # row 1's second new token, among ids never produced
    unused = [t for t in range(VOCAB) if t not in free[:, 4:]][:2]
    out = model.generate(ids, 6, eos_token_id=[unused[0], stop, unused[1]]).numpy()
    assert out[1, 5] == stop and (out[1, 6:] == stop).all()
    first = list(free[0, 4:]).index(stop) + 5 if stop in free[0, 4:] else out.shape[1]
    np.testing.assert_array_equal(out[0, :first], free[0, :first])


def test_untied_head_config_is_refused_not_silently_tied():
    with pytest.raises(NotImplementedError, match="tie_word_embeddings=False"):
        models.GPT(models.GPTConfig(vocab_size=16, n_positions=8, n_embd=8, n_layer=1, n_head=2,
                                    tie_word_embeddings=False))


def test_attention_mask_that_misses_the_cached_positions_is_a_clear_error():
    model = models.GPT(models.GPTConfig(vocab_size=16, n_positions=8, n_embd=8, n_layer=1, n_head=2))
    cache = model.new_cache()
    model(tt.tensor([[1, 2, 3]]), cache=cache)
    with pytest.raises(ValueError, match=r"attention_mask shape \(1, 1\) should be .*\(B, 4\)"):
        model(tt.tensor([[4]]), attention_mask=tt.tensor([[1]]), cache=cache)
