"""The embedded default corpus: the source text of Python's own standard library.

It exists on every machine that runs Python, so the main job needs no download. Files
are taken in sorted order until `max_bytes`, so the corpus is the same on every run of
the same Python version. Text is tokenized as raw bytes (vocabulary 256).
"""
import os
import sysconfig

import numpy as np


def stdlib_text(max_bytes=2_000_000):
    root = sysconfig.get_paths()["stdlib"]
    chunks, total = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests",
                                                              "idlelib", "__pycache__"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(dirpath, name), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            chunks.append(data)
            total += len(data)
            if total >= max_bytes:
                return b"".join(chunks)[:max_bytes]
    if not chunks:
        raise RuntimeError(f"no Python source found under {root}")
    return b"".join(chunks)


def load_tokens(path=None, max_bytes=2_000_000):
    """Byte tokens of `path` (any file) or of the standard-library corpus."""
    if path is None:
        data = stdlib_text(max_bytes)
    else:
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes if max_bytes else -1)
        except OSError as e:
            raise SystemExit(f"train: cannot read --data {path!r}: {e.strerror}")
        if len(data) < 1000:
            raise SystemExit(f"train: --data {path!r} has only {len(data)} bytes; need at least 1000")
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)


def decode(tokens):
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


def _byte_chars():
    """GPT-2's printable stand-in for each byte (what the `tokenizers` ByteLevel step maps
    bytes to): printable Latin-1 bytes stand for themselves, the rest for chr(256 + k)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def byte_tokenizer_json():
    """A HuggingFace tokenizer.json whose token ids are the byte values, as this corpus
    tokenizes (a byte-level BPE with no merges), so a model trained here can be loaded with
    its tokenizer by models.Tokenizer / tools/generate.py, or by transformers."""
    vocab = {c: b for b, c in _byte_chars().items()}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": []}}
