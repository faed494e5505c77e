"""Tiny HF directories built offline: a byte-level BPE GPT-2 and a WordPiece BERT with a
sentence-transformers pooling config, each with its tokenizer trained in memory."""
import json
import os

import pytest

tokenizers = pytest.importorskip("tokenizers")

from tinytensor import models  # noqa: E402
import tinytensor as tt  # noqa: E402

CORPUS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog",
          "hello world, hello tokens", "what the cat saw was the dog"] * 4


def _write(directory, name, obj):
    with open(os.path.join(directory, name), "w") as f:
        json.dump(obj, f)


def gpt2_dir(directory):
    from tokenizers import Tokenizer, decoders, models as tm, pre_tokenizers, trainers
    tok = Tokenizer(tm.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<|endoftext|>"]))  # corpus bytes only: every token is ASCII
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    _write(directory, "tokenizer_config.json", {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
                                                 "padding_side": "left"})
    eos = tok.token_to_id("<|endoftext|>")
    tt.manual_seed(0)
    models.GPT(vocab_size=tok.get_vocab_size(), n_positions=32, n_embd=16, n_layer=2, n_head=2,
               bos_token_id=eos, eos_token_id=eos).save_hf(directory)
    return directory


def bert_dir(directory, pooling="mean", normalize=True):
    from tokenizers import Tokenizer, models as tm, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    tok = Tokenizer(tm.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(
        vocab_size=80, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                 ("[SEP]", tok.token_to_id("[SEP]"))])
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    _write(directory, "tokenizer_config.json", {"pad_token": "[PAD]", "cls_token": "[CLS]",
                                                 "sep_token": "[SEP]", "unk_token": "[UNK]"})
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    _write(os.path.join(directory, "1_Pooling"), "config.json", {
        "word_embedding_dimension": 16, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": pooling == "max"})
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        mods.append({"idx": 2, "name": "2", "path": "2_Normalize",
                     "type": "sentence_transformers.models.Normalize"})
    _write(directory, "modules.json", mods)
    tt.manual_seed(0)
    models.BERT(vocab_size=tok.get_vocab_size(), hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
                pad_token_id=0).save_hf(directory)
    return directory


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return gpt2_dir(str(tmp_path_factory.mktemp("gpt2")))


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return bert_dir(str(tmp_path_factory.mktemp("bert")))
