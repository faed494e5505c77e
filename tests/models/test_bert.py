"""BERT against HuggingFace's BertModel / BertForPreTraining / BertForMaskedLM /
BertForSequenceClassification, built offline from a config (random weights), saved to a
temporary directory and loaded with models.from_hf; plus the MLM masking statistics."""
import json

import numpy as np
import pytest

import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor.models.hf import read_weights  # noqa: E402

VOCAB, MASK_ID, SPECIAL = 80, 3, (0, 1, 2, 3)  # 0 = [PAD], 1 = [CLS], 2 = [SEP], 3 = [MASK]

# case -> (HF class, num_labels, how the labels look)
CASES = {
    "pretraining": ("BertForPreTraining", 2, None),
    "mlm": ("BertForMaskedLM", 2, None),
    "classification": ("BertForSequenceClassification", 3, "int"),
    "regression": ("BertForSequenceClassification", 1, "float"),
    "multilabel": ("BertForSequenceClassification", 3, "multi"),
    "base": ("BertModel", 2, None),
}


def _reference(case, path, **overrides):
    arch, num_labels, _ = CASES[case]
    torch.manual_seed(0)
    kw = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=24, type_vocab_size=2,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=num_labels,
              attn_implementation="eager")
    kw.update(overrides)
    ref = getattr(transformers, arch)(transformers.BertConfig(**kw))
    with torch.no_grad():  # HF zero-inits biases; random ones make the bias gradients count
        for name, p in ref.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.02)
    ref.eval()
    ref.save_pretrained(path)
    return ref


def _batch(case):
    """[CLS] a [SEP] b [SEP] with right padding on two rows, segment ids, and labels."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(len(SPECIAL), VOCAB, (3, 12), generator=g)
    ids[:, 0], ids[:, 5] = 1, 2
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 6:] = 0
    ids[mask == 0] = 0
    token_type = (torch.arange(12) > 5).long().expand(3, 12) * mask
    _, _, kind = CASES[case]
    labels, nsp = None, None
    if case in ("pretraining", "mlm"):
        masked, mlm_labels = models.mask_tokens(ids.numpy(), MASK_ID, VOCAB, SPECIAL, 0.4, seed=0)
        assert (mlm_labels != -100).sum() >= 4
        ids, labels = torch.tensor(masked), torch.tensor(mlm_labels)
        nsp = torch.tensor([0, 1, 1]) if case == "pretraining" else None
    elif kind == "int":
        labels = torch.tensor([2, 0, 1])
    elif kind == "float":
        labels = torch.tensor([0.5, -1.0, 2.0])
    elif kind == "multi":
        labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    return ids, mask, token_type, labels, nsp


def _t(x):
    return None if x is None else tt.tensor(x.numpy())


def _hf_name(name, case):
    if case != "base" and name.startswith(("embeddings.", "encoder.", "pooler.")):
        return "bert." + name
    return name


@pytest.mark.parametrize("case", list(CASES))
def test_outputs_loss_and_every_gradient_match(case, tmp_path):
    ref = _reference(case, tmp_path)
    model = models.from_hf(str(tmp_path))
    model.eval()
    assert model.head == {"base": None, "regression": "classification",
                          "multilabel": "classification"}.get(case, case)
    ids, mask, token_type, labels, nsp = _batch(case)
    kw = {} if labels is None or case == "base" else {"labels": labels}
    if nsp is not None:
        kw["next_sentence_label"] = nsp
    r = ref(ids, attention_mask=mask, token_type_ids=token_type, **kw)
    o = model(_t(ids), attention_mask=_t(mask), token_type_ids=_t(token_type),
              **{k: _t(v) for k, v in kw.items()})
    if case == "base":  # no head: a fixed random projection of both outputs as the loss
        w = torch.randn(3, 12, 32, generator=torch.Generator().manual_seed(2))
        r_loss = (r.last_hidden_state * w).sum() + r.pooler_output.sum()
        o_loss = (o.last_hidden_state * _t(w)).sum() + o.pooler_output.sum()
        pairs = [(o.last_hidden_state, r.last_hidden_state), (o.pooler_output, r.pooler_output)]
    else:
        r_loss, o_loss = r.loss, o.loss
        pairs = [(o.logits, r.prediction_logits if case == "pretraining" else r.logits)]
        if case == "pretraining":
            pairs.append((o.seq_relationship_logits, r.seq_relationship_logits))
    for ours, theirs in pairs:  # every position, padded queries included
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(o_loss.item(), r_loss.item(), atol=1e-5, rtol=1e-6)
    r_loss.backward()
    o_loss.backward()
    ref_params = dict(ref.named_parameters())
    ours = dict(model.named_parameters())
    assert sorted(_hf_name(n, case) for n in ours) == sorted(ref_params)
    for name, p in ours.items():
        np.testing.assert_allclose(p.grad.numpy(), ref_params[_hf_name(name, case)].grad.numpy(),
                                   atol=2e-5, rtol=1e-4, err_msg=name)


def test_pretraining_loss_is_mlm_plus_nsp_and_token_types_default_to_zero(tmp_path):
    ref = _reference("pretraining", tmp_path)
    model = models.from_hf(str(tmp_path))
    ids, mask, _, labels, nsp = _batch("pretraining")
    both = model(_t(ids), _t(mask), labels=_t(labels), next_sentence_label=_t(nsp)).loss.item()
    mlm = model(_t(ids), _t(mask), labels=_t(labels)).loss.item()
    nsp_only = model(_t(ids), _t(mask), next_sentence_label=_t(nsp)).loss.item()
    assert both == pytest.approx(mlm + nsp_only, abs=1e-6) and mlm > 0 and nsp_only > 0
    zeros = model(_t(ids), _t(mask), token_type_ids=tt.zeros(3, 12, dtype=tt.int64)).logits
    np.testing.assert_allclose(model(_t(ids), _t(mask)).logits.detach().numpy(),
                               zeros.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(model(_t(ids)).logits.detach().numpy(),
                               ref(ids).prediction_logits.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("case", ["pretraining", "mlm", "classification", "base"])
def test_save_hf_loads_back_in_transformers(case, tmp_path):
    ref = _reference(case, tmp_path / "src")
    model = models.from_hf(str(tmp_path / "src"))
    out = tmp_path / "saved"
    model.save_hf(str(out))
    arch = CASES[case][0]
    assert json.loads((out / "config.json").read_text())["architectures"] == [arch]
    back = getattr(transformers, arch).from_pretrained(str(out), attn_implementation="eager").eval()
    assert set(read_weights(str(out))) <= set(dict(back.named_parameters()))
    for name, p in back.state_dict().items():  # every tensor, the tied decoder included
        np.testing.assert_array_equal(p.numpy(), ref.state_dict()[name].numpy(), err_msg=name)
    assert models.from_hf(str(out)).head == model.head


def test_old_style_checkpoint_loads(tmp_path):
    """pytorch_model.bin with TF-era gamma/beta names, the tied decoder stored, id buffers."""
    ref = _reference("pretraining", tmp_path / "src")
    state = {}
    for k, v in ref.state_dict().items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[k] = v.clone()
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].clone()
    state["bert.embeddings.position_ids"] = torch.arange(24)[None]
    d = tmp_path / "bin"
    d.mkdir()
    torch.save(state, d / "pytorch_model.bin")
    cfg = json.loads((tmp_path / "src" / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, architectures=["BertForMaskedLM"])))
    model = models.from_hf(str(d))  # a pre-training checkpoint read as masked LM: NSP/pooler dropped
    assert model.head == "mlm" and model.pooler is None
    ids, mask, token_type, _, _ = _batch("classification")
    np.testing.assert_allclose(model(_t(ids), _t(mask), _t(token_type)).logits.detach().numpy(),
                               ref(ids, attention_mask=mask, token_type_ids=token_type)
                               .prediction_logits.detach().numpy(), atol=1e-5)


def test_mismatched_checkpoints_are_clear_errors(tmp_path):
    _reference("classification", tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())

    def load_with(**changes):
        (tmp_path / "config.json").write_text(json.dumps(dict(cfg, **changes)))
        return models.from_hf(str(tmp_path))

    with pytest.raises(ValueError, match=r"wrong shape: .*embeddings.word_embeddings.weight "
                                         r"expects \(80, 64\) but the file has \(80, 32\)"):
        load_with(hidden_size=64)
    with pytest.raises(ValueError, match=r"wrong shape: classifier.weight expects \(5, 32\)"):
        load_with(id2label={str(i): f"L{i}" for i in range(5)})
    with pytest.raises(ValueError, match=r"missing from the checkpoint: cls.predictions.bias"):
        load_with(architectures=["BertForMaskedLM"])
    with pytest.raises(ValueError, match=r"num_hidden_layers=3 but .*model.safetensors holds 2 "
                                         r"layers \(encoder.layer.0 .. encoder.layer.1\)"):
        load_with(num_hidden_layers=3)
    with pytest.raises(ValueError, match=r"BertForQuestionAnswering.*not supported; supported: .*BertForMaskedLM"):
        load_with(architectures=["BertForQuestionAnswering"])
    with pytest.raises(NotImplementedError, match="is_decoder"):
        load_with(is_decoder=True)
    weights = {k: tt.tensor(v) for k, v in read_weights(str(tmp_path)).items()}
    weights["bert.encoder.layer.0.attention.self.rotary.weight"] = tt.zeros(4)
    nn.save(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"no place for: bert.encoder.layer.0.attention.self.rotary.weight"):
        load_with()


def test_forward_errors_and_training_mode_from_scratch():
    config = models.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=24, max_position_embeddings=8)
    with pytest.raises(ValueError, match="head must be one of"):
        models.BERT(config, head="qa")
    with pytest.raises(ValueError, match="hidden_size 16 is not divisible by num_attention_heads 3"):
        models.BERT(config, num_attention_heads=3)
    model = models.BERT(config, head="pretraining")
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position_embeddings 8"):
        model(tt.ones(1, 9, dtype=tt.int64))
    assert model.embeddings.word_embeddings.weight[0].abs().sum().item() == 0  # [PAD] row
    model.train()  # dropout on: runs, and the loss still reaches every parameter
    ids, labels = models.mask_tokens(tt.tensor(np.arange(4, 20).reshape(2, 8)), 3, 50,
                                     special_ids=(0,), mlm_probability=0.5, seed=1)
    out = model(ids, labels=labels, next_sentence_label=tt.tensor([0, 1]))
    out.loss.backward()
    assert np.isfinite(out.loss.item())
    assert all(p.grad is not None for p in model.parameters())
    cls = models.BERT(config, head="classification")
    with pytest.raises(ValueError, match="next_sentence_label needs head='pretraining'"):
        models.BERT(config, head="mlm")(ids, next_sentence_label=tt.tensor([0, 1]))
    assert cls(ids).logits.shape == (2, 2)


def test_mask_tokens_statistics_and_labels():
    rng = np.random.default_rng(0)
    V = 1000
    ids = rng.integers(4, V, (200, 500))
    ids[:, 0], ids[:, -1], ids[::7, 400:] = 1, 2, 0  # [CLS], [SEP], padding
    inputs, labels = models.mask_tokens(ids, MASK_ID, V, SPECIAL, seed=3)
    special = np.isin(ids, SPECIAL)
    selected = labels != -100
    changed = inputs != ids
    # labels hold the original token exactly on the selected positions, -100 elsewhere
    np.testing.assert_array_equal(labels[selected], ids[selected])
    assert not (selected & special).any()
    assert not (changed & ~selected).any()  # unselected tokens are left alone
    frac = selected.sum() / (~special).sum()
    assert abs(frac - 0.15) < 0.005, frac
    n = selected.sum()
    to_mask = (inputs == MASK_ID) & selected
    randomized = changed & ~to_mask
    kept = selected & ~changed
    assert abs(to_mask.sum() / n - 0.8) < 0.01
    assert abs(randomized.sum() / n - 0.1) < 0.01  # (a random draw equal to the original: 0.1/V)
    assert abs(kept.sum() / n - 0.1) < 0.01
    assert inputs[randomized].min() >= 0 and inputs[randomized].max() < V
    # uniform over the vocabulary: ~1400 draws from 1000 ids hit ~760 distinct, mean ~500 +- 8
    assert len(np.unique(inputs[randomized])) > 700 and abs(inputs[randomized].mean() - 499.5) < 30
    # reproducible with a seed, different without; tensors in -> tensors out
    again = models.mask_tokens(ids, MASK_ID, V, SPECIAL, seed=3)
    np.testing.assert_array_equal(again[0], inputs)
    np.testing.assert_array_equal(again[1], labels)
    assert not np.array_equal(models.mask_tokens(ids, MASK_ID, V, SPECIAL, seed=4)[1], labels)
    t_in, t_labels = models.mask_tokens(tt.tensor(ids), MASK_ID, V, SPECIAL, seed=3)
    assert isinstance(t_in, tt.Tensor) and t_labels.dtype == tt.int64
    np.testing.assert_array_equal(t_labels.numpy(), labels)
    none = models.mask_tokens(ids, MASK_ID, V, SPECIAL, mlm_probability=0.0, seed=0)
    assert (none[1] == -100).all() and (none[0] == ids).all()
    every = models.mask_tokens(ids, MASK_ID, V, SPECIAL, mlm_probability=1.0, seed=0)[1]
    np.testing.assert_array_equal(every != -100, ~special)
    with pytest.raises(TypeError, match="input_ids must be integers"):
        models.mask_tokens(ids.astype(float), MASK_ID, V)


@pytest.mark.gpu
def test_on_cuda_matches_reference(tmp_path):
    ref = _reference("pretraining", tmp_path)
    model = models.from_hf(str(tmp_path), device="cuda")
    ids, mask, token_type, labels, nsp = _batch("pretraining")
    r = ref(ids, attention_mask=mask, token_type_ids=token_type, labels=labels, next_sentence_label=nsp)
    on = [tt.tensor(x.numpy(), device="cuda") for x in (ids, mask, token_type, labels, nsp)]
    o = model(on[0], on[1], on[2], labels=on[3], next_sentence_label=on[4])
    assert o.logits.device.type == "cuda"
    np.testing.assert_allclose(o.logits.detach().numpy(), r.prediction_logits.detach().numpy(), atol=1e-4)
    np.testing.assert_allclose(o.loss.item(), r.loss.item(), atol=1e-4)
    o.loss.backward()
    r.loss.backward()
    grad = model.embeddings.word_embeddings.weight.grad.numpy()
    np.testing.assert_allclose(grad, ref.bert.embeddings.word_embeddings.weight.grad.numpy(), atol=1e-4)
    masked, mlm_labels = models.mask_tokens(on[0], MASK_ID, VOCAB, SPECIAL, seed=0)
    assert masked.device.type == "cuda" and mlm_labels.device.type == "cuda"


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_mask_tokens_on_unsigned_token_arrays(dtype):
    ids = (np.arange(400) % 250).astype(dtype).reshape(4, 100)  # bytes, or nanoGPT-style uint16
    inputs, labels = models.mask_tokens(ids, 256, 257, seed=0)   # a mask id past the byte range
    selected = labels != -100
    assert selected.any() and (labels[~selected] == -100).all()
    np.testing.assert_array_equal(labels[selected], ids[selected])
    assert (inputs == 256).any()
