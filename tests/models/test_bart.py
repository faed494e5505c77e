"""BART against HuggingFace's BartForConditionalGeneration, built offline from a config
(random weights), saved to a temporary directory and loaded with models.from_hf.

The helpers here serve tests/models/test_marian.py too: `kind` is one of
  bart            tied LM head (HF's default)
  bart-untied     separate lm_head.weight
  marian          shared embeddings, scaled, swish (the opus-mt setup)
  marian-unshared separate encoder/decoder vocabularies, LM head tied to the decoder's
  marian-untied   separate lm_head.weight (HF then ties nothing: `shared` goes unused)
"""
import numpy as np
import pytest

import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402

VOCAB = 64
DEC_VOCAB = 48  # marian-unshared only
PAD, EOS, START = 1, 2, 2  # BART's ids; Marian's below


def _ids(kind):
    """(pad, eos, decoder_start) for a kind."""
    return (PAD, EOS, START) if kind.startswith("bart") else (0, 1, 0)


# (weight gain, embedding std, EOS logit bias): HF's init (std 0.02) leaves gradients too
# small to compare, so weights are redrawn with these. Random Post-LN models tend to repeat
# one token forever; the GENERATE settings give outputs that vary and end early on some rows.
INIT = (1.0, 0.3, 0.0)
GENERATE = {"bart": (1.0, 1.0, 2.5), "bart-untied": (2.0, 1.0, 0.0), "marian": (3.0, 0.3, 1.5),
            "marian-untied": (1.0, 0.1, 1.0)}


def reference(kind, path, init=INIT):
    """A random tiny HF model of `kind`, saved to `path`."""
    torch.manual_seed(0)
    pad, eos, start = _ids(kind)
    # forced_eos/bos off: generation is then plain greedy/beam search on both sides
    common = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
                  decoder_ffn_dim=40, max_position_embeddings=40, dropout=0.0,
                  attention_dropout=0.0, activation_dropout=0.0, pad_token_id=pad,
                  eos_token_id=eos, decoder_start_token_id=start, forced_eos_token_id=None,
                  forced_bos_token_id=None, attn_implementation="eager")
    if kind.startswith("bart"):
        cfg = transformers.BartConfig(bos_token_id=0, tie_word_embeddings=kind == "bart", **common)
        ref = transformers.BartForConditionalGeneration(cfg)
    else:
        extra = {"marian-unshared": dict(share_encoder_decoder_embeddings=False,
                                         decoder_vocab_size=DEC_VOCAB),
                 "marian-untied": dict(tie_word_embeddings=False)}.get(kind, {})
        cfg = transformers.MarianConfig(scale_embedding=True, activation_function="swish",
                                        **extra, **common)
        ref = transformers.MarianMTModel(cfg)
    ref.eval()
    gain, embed_std, eos_bias = init
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "embed_positions" in name and kind.startswith("marian"):
                continue  # the fixed sinusoids
            if "layer_norm" in name or "layernorm" in name:
                p.add_(0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.normal_(0.0, 0.02)
            elif "embed" in name or "shared" in name:
                p.normal_(0.0, embed_std)
            else:
                p.normal_(0.0, gain / p.shape[1] ** 0.5)
        ref.final_logits_bias.normal_(0.0, 0.5)
        ref.final_logits_bias[0, eos] = eos_bias
    ref.save_pretrained(path)
    return ref


def load(path):
    model = models.from_hf(str(path))
    model.eval()
    return model


def batch(kind):
    """Encoder ids with padding (right on one row, left on another), labels with -100 and a
    decoder mask on one row."""
    pad, _, _ = _ids(kind)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, :4] = 0
    ids = ids.masked_fill(mask == 0, pad)
    dec_vocab = DEC_VOCAB if kind == "marian-unshared" else VOCAB
    labels = torch.randint(3, dec_vocab, (3, 9), generator=g)
    dmask = torch.ones_like(labels)
    dmask[0, 6:] = 0
    labels = labels.masked_fill(dmask == 0, -100)
    return ids, mask, labels, dmask


def T(x):
    return tt.tensor(x.numpy())


def check_logits_loss_and_every_gradient(kind, tmp_path):
    ref = reference(kind, tmp_path)
    model = load(tmp_path)
    ids, mask, labels, dmask = batch(kind)
    r = ref(input_ids=ids, attention_mask=mask, labels=labels, decoder_attention_mask=dmask)
    r.loss.backward()
    o = model(T(ids), attention_mask=T(mask), labels=T(labels), decoder_attention_mask=T(dmask))
    o.loss.backward()
    valid = dmask.numpy().astype(bool)
    np.testing.assert_allclose(o.logits.detach().numpy()[valid], r.logits.detach().numpy()[valid],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(o.loss.item(), r.loss.item(), atol=1e-5, rtol=0)
    ref_params = dict(ref.named_parameters())
    ours = dict(model.named_parameters())
    trained = {n for n, p in ref_params.items() if p.requires_grad}
    hf_names = {n if n == "lm_head.weight" else "model." + n for n in ours}
    assert hf_names == trained, (hf_names ^ trained)  # every trained HF weight, and no other
    for name, p in ours.items():
        g_ref = ref_params[name if name == "lm_head.weight" else "model." + name].grad
        if g_ref is None:  # `shared` when tie_word_embeddings=False: unused on both sides
            assert name == "shared.weight" and p.grad is None, name
            continue
        g_ref = g_ref.numpy()
        scale = np.abs(g_ref).max()
        if name.endswith("k_proj.bias"):  # softmax ignores a per-query shift: zero in theory
            scale = 1.0
        assert scale > 1e-4, name  # the gradient means something
        np.testing.assert_allclose(p.grad.numpy(), g_ref, atol=2e-5 * scale, rtol=1e-4, err_msg=name)


def check_cache_equals_full_decoding(kind, tmp_path):
    reference(kind, tmp_path)
    model = load(tmp_path)
    ids, mask, labels, _ = batch(kind)
    dec = tt.tensor(labels.clamp(min=3).numpy())
    with tt.no_grad():
        enc = model.encode(T(ids), T(mask))
        full = model.decode(dec, enc, T(mask)).numpy()
        cache = model.new_cache()
        steps = [model.decode(dec[:, :3], enc, T(mask), cache=cache).numpy()]
        assert cache.length == 3
        for t in range(3, dec.shape[1]):
            steps.append(model.decode(dec[:, t:t + 1], enc, T(mask), cache=cache).numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5, rtol=0)
    # select() reorders the batch rows of every layer's keys/values, as beam search needs
    cache.select(np.array([2, 2, 0]))
    assert cache.length == dec.shape[1]
    with tt.no_grad():
        nxt = model.decode(dec[[2, 2, 0], -1:], enc[[2, 2, 0]], T(mask[[2, 2, 0]]), cache=cache).numpy()
        again = model.decode(tt.cat([dec[[2, 2, 0]], dec[[2, 2, 0], -1:]], dim=1), enc[[2, 2, 0]],
                             T(mask[[2, 2, 0]])).numpy()
    np.testing.assert_allclose(nxt[:, 0], again[:, -1], atol=1e-5, rtol=0)


def check_generation(kind, tmp_path, num_beams):
    ref = reference(kind, tmp_path, GENERATE[kind])
    model = load(tmp_path)
    pad, eos, start = _ids(kind)
    ids, mask, _, _ = batch(kind)
    expected = ref.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                            num_beams=num_beams, length_penalty=1.0, early_stopping=False,
                            eos_token_id=eos, pad_token_id=pad, decoder_start_token_id=start,
                            no_repeat_ngram_size=0, forced_eos_token_id=None).numpy()
    got = [model.generate(T(ids), attention_mask=T(mask), max_new_tokens=12, num_beams=num_beams,
                          length_penalty=1.0, eos_token_id=eos, use_cache=use_cache).numpy()
           for use_cache in (True, False)]
    np.testing.assert_array_equal(got[0], expected)
    np.testing.assert_array_equal(got[1], expected)
    return expected


def check_save_hf_round_trip(kind, tmp_path):
    ref = reference(kind, tmp_path / "src")
    model = load(tmp_path / "src")
    out = tmp_path / "saved"
    model.save_hf(str(out))
    cls = type(ref)
    back = cls.from_pretrained(str(out), attn_implementation="eager").eval()
    assert back.config.model_type == ref.config.model_type
    for k, v in ref.state_dict().items():  # every weight and buffer, bit for bit
        assert torch.equal(back.state_dict()[k], v), k
    ids, mask, labels, _ = batch(kind)
    kw = dict(input_ids=ids, attention_mask=mask, labels=labels)
    np.testing.assert_array_equal(back(**kw).logits.detach().numpy(), ref(**kw).logits.detach().numpy())
    # and back into tinytensor once more
    again = load(out)
    a = again(T(ids), attention_mask=T(mask), labels=T(labels)).logits.detach().numpy()
    np.testing.assert_allclose(a, ref(**kw).logits.detach().numpy(), atol=1e-5, rtol=0)


def check_full_state_dict_bin_loads(kind, tmp_path):
    """torch.save(ref.state_dict()) repeats every tied tensor (encoder/decoder embed_tokens,
    lm_head) and, for Marian, the sinusoid tables: older hub checkpoints look like this."""
    ref = reference(kind, tmp_path / "src")
    d = tmp_path / "bin"
    d.mkdir()
    torch.save(ref.state_dict(), d / "pytorch_model.bin")
    (d / "config.json").write_text((tmp_path / "src" / "config.json").read_text())
    model = load(d)
    ids, mask, labels, _ = batch(kind)
    r = ref(input_ids=ids, attention_mask=mask, labels=labels).logits.detach().numpy()
    o = model(T(ids), attention_mask=T(mask), labels=T(labels)).logits.detach().numpy()
    np.testing.assert_allclose(o, r, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------- BART
BART_KINDS = ["bart", "bart-untied"]


@pytest.mark.parametrize("kind", BART_KINDS)
def test_logits_loss_and_every_gradient_match(kind, tmp_path):
    check_logits_loss_and_every_gradient(kind, tmp_path)


def test_without_decoder_input_ids_bart_shifts_the_input_right(tmp_path):
    ref = reference("bart", tmp_path)
    model = load(tmp_path)
    ids, mask, _, _ = batch("bart")
    r = ref(input_ids=ids, attention_mask=mask).logits.detach().numpy()
    o = model(T(ids), attention_mask=T(mask)).logits.detach().numpy()
    np.testing.assert_allclose(o, r, atol=1e-5, rtol=0)
    shifted = models.bart.shift_tokens_right(T(ids), PAD, START).numpy()
    assert shifted[:, 0].tolist() == [START] * 3 and (shifted[:, 1:] == ids.numpy()[:, :-1]).all()


def test_cache_decoding_equals_full_decoding(tmp_path):
    check_cache_equals_full_decoding("bart", tmp_path)


@pytest.mark.parametrize("num_beams", [1, 3])
@pytest.mark.parametrize("kind", BART_KINDS)
def test_generation_equals_reference_with_and_without_cache(kind, tmp_path, num_beams):
    out = check_generation(kind, tmp_path, num_beams)
    assert out.shape[1] == 13 and len(np.unique(out[:, 1:])) >= 5  # not one token repeated
    if kind == "bart":  # some rows end at once (EOS, then padding), others run to the limit
        assert (out[:, 1] == EOS).any() and not (out[:, 1] == EOS).all()


@pytest.mark.parametrize("kind", BART_KINDS)
def test_save_hf_loads_back_in_transformers(kind, tmp_path):
    check_save_hf_round_trip(kind, tmp_path)


def test_full_state_dict_with_tied_copies_loads(tmp_path):
    check_full_state_dict_bin_loads("bart", tmp_path)


def test_config_defaults_and_names_are_hf():
    hf_cfg = transformers.BartConfig()
    ours = models.BartConfig()
    for k, v in ours.to_dict().items():
        assert getattr(hf_cfg, k) == v, k
    m = models.BART(models.BartConfig(vocab_size=20, d_model=8, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2,
                                      encoder_ffn_dim=16, decoder_ffn_dim=16,
                                      max_position_embeddings=10))
    names = set(m.state_dict())
    assert {"shared.weight", "final_logits_bias", "encoder.embed_positions.weight",
            "decoder.layers.0.encoder_attn.k_proj.weight", "decoder.layernorm_embedding.bias"} <= names
    assert not any("embed_tokens" in n for n in names)
    assert tuple(m.encoder.embed_positions.weight.shape) == (12, 8)  # offset 2
    with pytest.raises(ValueError, match="exceed max_position_embeddings 10"):
        m(tt.tensor(np.ones((1, 11), dtype=np.int64)))
    with pytest.raises(ValueError, match="activation_function 'nope'"):
        models.BART(models.BartConfig(vocab_size=20, d_model=8, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2,
                                      encoder_ffn_dim=16, decoder_ffn_dim=16,
                                      activation_function="nope"))


def test_training_mode_dropout_and_layerdrop_run(tmp_path):
    reference("bart", tmp_path)
    model = load(tmp_path)
    model.config.encoder_layerdrop = model.config.decoder_layerdrop = 0.5
    for m in model.modules():  # dropout rates are read at construction
        for attr in ("dropout", "activation_dropout"):
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.1)
    model.train()
    ids, mask, labels, _ = batch("bart")
    losses = []
    for _ in range(2):
        tt.manual_seed(3)
        out = model(T(ids), attention_mask=T(mask), labels=T(labels))
        out.loss.backward()
        losses.append(out.loss.item())
    assert losses[0] == losses[1] and np.isfinite(losses[0])  # reproducible under a seed
    model.eval()
    evaluated = model(T(ids), attention_mask=T(mask), labels=T(labels)).loss.item()
    assert evaluated != losses[0]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_cuda_matches_cpu(kind, tmp_path):
    reference(kind, tmp_path)
    cpu = load(tmp_path)
    gpu = models.from_hf(str(tmp_path), device="cuda")
    gpu.eval()
    ids, mask, labels, dmask = batch(kind)

    def C(x):
        return tt.tensor(x.numpy(), device="cuda")

    a = cpu(T(ids), attention_mask=T(mask), labels=T(labels), decoder_attention_mask=T(dmask))
    b = gpu(C(ids), attention_mask=C(mask), labels=C(labels), decoder_attention_mask=C(dmask))
    b.loss.backward()
    assert b.logits.device.type == "cuda"
    valid = dmask.numpy().astype(bool)
    np.testing.assert_allclose(b.logits.detach().cpu().numpy()[valid],
                               a.logits.detach().numpy()[valid], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(b.loss.item(), a.loss.item(), atol=1e-5)
    assert all(p.grad is not None and p.grad.device.type == "cuda" for p in gpu.parameters())
    for nb in (1, 3):
        g = gpu.generate(C(ids), attention_mask=C(mask), max_new_tokens=6, num_beams=nb)
        c = cpu.generate(T(ids), attention_mask=T(mask), max_new_tokens=6, num_beams=nb)
        assert g.device.type == "cuda" and g.shape == c.shape


def test_mismatched_checkpoint_is_a_clear_error(tmp_path):
    import json
    from safetensors.numpy import load_file, save_file
    reference("bart", tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, decoder_ffn_dim=44)))
    with pytest.raises(ValueError, match=r"wrong shape: decoder.layers.0.fc1.weight expects \(44, 32\)"):
        models.from_hf(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    w = load_file(str(tmp_path / "model.safetensors"))
    w["model.encoder.extra.weight"] = np.zeros(3, np.float32)
    w["something_else"] = np.zeros(3, np.float32)
    del w["model.decoder.layers.1.fc2.bias"]
    save_file(w, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="no place for: .*(something_else.*model.encoder.extra.weight"
                                         "|model.encoder.extra.weight.*something_else).*missing from the "
                                         "checkpoint: decoder.layers.1.fc2.bias"):
        models.from_hf(str(tmp_path))
