"""Marian against HuggingFace's MarianMTModel (helpers and reference models: test_bart.py)."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tinytensor import models  # noqa: E402

from .test_bart import (T, batch, check_cache_equals_full_decoding,  # noqa: E402
                        check_full_state_dict_bin_loads, check_generation,
                        check_logits_loss_and_every_gradient, check_save_hf_round_trip, load,
                        reference)

KINDS = ["marian", "marian-unshared", "marian-untied"]


@pytest.mark.parametrize("kind", KINDS)
def test_logits_loss_and_every_gradient_match(kind, tmp_path):
    check_logits_loss_and_every_gradient(kind, tmp_path)


def test_cache_decoding_equals_full_decoding(tmp_path):
    check_cache_equals_full_decoding("marian", tmp_path)


@pytest.mark.parametrize("num_beams", [1, 3])
@pytest.mark.parametrize("kind", ["marian", "marian-untied"])
def test_generation_equals_reference_with_and_without_cache(kind, tmp_path, num_beams):
    out = check_generation(kind, tmp_path, num_beams)
    assert (out[:, 0] == 0).all()  # Marian starts from the pad token


@pytest.mark.parametrize("kind", KINDS)
def test_save_hf_loads_back_in_transformers(kind, tmp_path):
    check_save_hf_round_trip(kind, tmp_path)


def test_full_state_dict_with_sinusoids_and_tied_copies_loads(tmp_path):
    check_full_state_dict_bin_loads("marian", tmp_path)


def test_positions_are_hf_sinusoids_and_not_weights(tmp_path):
    ref = reference("marian", tmp_path)
    model = load(tmp_path)
    for stack in ("encoder", "decoder"):
        ours = getattr(model, stack).embed_positions(40, dtype=tt.float32).numpy()
        theirs = getattr(ref.model, stack).embed_positions.weight.detach().numpy()
        np.testing.assert_array_equal(ours, theirs)
    assert not any("embed_positions" in n for n in model.state_dict())
    # [sin | cos] halves for an odd width too (HF puts the extra column in the sin half)
    hf_table = transformers.models.marian.modeling_marian.MarianSinusoidalPositionalEmbedding(9, 7)
    ours = nn.sinusoidal_positions(9, 7, interleaved=False, dtype=tt.float32).numpy()
    np.testing.assert_array_equal(ours, hf_table.create_weight().numpy())


def test_marian_needs_decoder_input_ids_or_labels(tmp_path):
    reference("marian", tmp_path)
    model = load(tmp_path)
    ids, mask, labels, _ = batch("marian")
    with pytest.raises(ValueError, match="pass decoder_input_ids or labels"):
        model(T(ids), attention_mask=T(mask))
    # labels alone: decoder_input_ids = labels shifted right behind the start (= pad) token
    a = model(T(ids), attention_mask=T(mask), labels=T(labels)).logits.detach().numpy()
    dec = models.bart.shift_tokens_right(T(labels), 0, 0)
    assert (dec.numpy()[:, 0] == 0).all()
    b = model(T(ids), attention_mask=T(mask), decoder_input_ids=dec).logits.detach().numpy()
    np.testing.assert_array_equal(a, b)


def test_config_defaults_and_names_are_hf():
    hf_cfg = transformers.MarianConfig()
    for k, v in models.MarianConfig().to_dict().items():
        assert getattr(hf_cfg, k) == v, k
    small = dict(vocab_size=20, d_model=8, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                 decoder_ffn_dim=16, max_position_embeddings=10, pad_token_id=0,
                 decoder_start_token_id=0)
    m = models.Marian(models.MarianConfig(**small))
    assert m.config.decoder_vocab_size == 20
    names = set(m.state_dict())
    assert {"shared.weight", "final_logits_bias", "decoder.layers.0.fc2.bias"} <= names
    assert not any("layernorm_embedding" in n or "embed_positions" in n or "embed_tokens" in n
                   for n in names)
    unshared = models.Marian(models.MarianConfig(share_encoder_decoder_embeddings=False,
                                                 decoder_vocab_size=12, **small))
    assert tuple(unshared.state_dict()["decoder.embed_tokens.weight"].shape) == (12, 8)
    assert tuple(unshared.final_logits_bias.shape) == (1, 12)
    assert "shared.weight" not in unshared.state_dict()
    with pytest.raises(ValueError, match="exceed max_position_embeddings 10"):
        m(tt.tensor(np.ones((1, 4), dtype=np.int64)),
          decoder_input_ids=tt.tensor(np.ones((1, 11), dtype=np.int64)))
