"""Marian <-> HuggingFace MarianMTModel weights.

As BART (models/bart_hf.py), except that the sinusoidal position tables
(`model.{encoder,decoder}.embed_positions.weight`) are not weights: HF does not save them
and we compute them, so any found in an older checkpoint are skipped. With
share_encoder_decoder_embeddings=False the encoder and decoder keep their own
`embed_tokens` and the LM head is tied to the decoder's.
"""
from . import hf
from .bart import Marian, MarianConfig
from .bart_hf import DIVISIBLE, LAYERS, shapes, to_hf, to_ours


def _build(config):
    return Marian(MarianConfig.from_dict(config))


hf.register(hf.Family("marian", "MarianMTModel", _build, to_ours, to_hf,
                      config_class=MarianConfig, shapes=shapes, layers=LAYERS, divisible=DIVISIBLE,
                      ignore=("embed_positions.weight", "encoder.version", "decoder.version")))
