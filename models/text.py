"""Text in and out: a HuggingFace directory's `tokenizer.json` through the `tokenizers`
library (the optional extra `text`: `pip install tinytensor[text]`), with HF's padding,
attention masks and special tokens (read from tokenizer_config.json and
special_tokens_map.json). A malformed file of the directory is a ConfigError naming the file
and the field (models/hf_json.py)."""
import os

import numpy as np

import tinytensor as tt

from .hf_json import ConfigError, problem, read_json

SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class Tokenizer:
    """`tok(texts)` -> {"input_ids", "attention_mask"} as (B, T) int64 Tensors; `decode`,
    `batch_decode`; `tok.eos_token` / `tok.eos_token_id` and the like for every special token."""

    def __init__(self, tokenizer, special_tokens=None, padding_side="right", source="Tokenizer"):
        if padding_side not in ("left", "right"):
            raise ValueError(f"Tokenizer: padding_side must be 'left' or 'right', got {padding_side!r}")
        self.backend, self.padding_side, self.source = tokenizer, padding_side, source
        # tokenizer.json may carry a fixed padding/truncation (all-MiniLM-L6-v2 pads to 128);
        # as in transformers, each call decides instead
        tokenizer.no_padding()
        tokenizer.no_truncation()
        for name in SPECIAL:
            token = (special_tokens or {}).get(name)
            token_id = None if token is None else tokenizer.token_to_id(token)
            if token is not None and token_id is None:
                raise ValueError(f"Tokenizer: {name} {token!r} given by {source} is not in the "
                                 "vocabulary of its tokenizer.json")
            setattr(self, name, token)
            setattr(self, name + "_id", token_id)

    @classmethod
    def from_dir(cls, directory, **special_tokens):
        """The tokenizer of an HF directory; keywords (pad_token="<|endoftext|>") override its
        special tokens, e.g. to pad with GPT-2, which has no pad token."""
        try:
            from tokenizers import Tokenizer as Backend
        except ImportError:
            raise ImportError("Tokenizer: needs the `tokenizers` library: pip install "
                              "'tinytensor[text]' (or pip install tokenizers)") from None
        path = os.path.join(directory, "tokenizer.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Tokenizer: {path} not found; tinytensor reads only the fast "
                                    "tokenizer file (save it with transformers' "
                                    "tokenizer.save_pretrained, which writes tokenizer.json)")
        try:
            backend = Backend.from_file(path)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 -- the Rust library raises a bare Exception,
            # or on some malformed files panics (pyo3's PanicException, a BaseException)
            raise ConfigError(f"Tokenizer: {path} cannot be read by the tokenizers library "
                              f"({_clip(str(e))})") from None
        special, origin, padding_side = {}, {}, ("right", None)
        for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the latter wins, as in HF
            p = os.path.join(directory, name)
            config = read_json(p, "Tokenizer") or {}
            for key in SPECIAL:
                if key in config:
                    special[key], origin[key] = _special(config[key], key, p, backend), p
            if "padding_side" in config:
                padding_side = (config["padding_side"], p)
        if padding_side[0] not in ("left", "right"):
            raise problem("Tokenizer", padding_side[1], "padding_side", padding_side[0],
                          '"left" or "right"')
        special.update(special_tokens)
        where = origin.get("pad_token", os.path.join(directory, "tokenizer_config.json"))
        return cls(backend, special, padding_side[0], where)

    def token_to_id(self, token):
        return self.backend.token_to_id(token)

    @property
    def vocab_size(self):
        return self.backend.get_vocab_size()

    def encode(self, text, add_special_tokens=True):
        """The ids of one text (a list of ints)."""
        _check_texts([text])
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, texts, padding=True, truncation=False, max_length=None,
                 add_special_tokens=True, device=None):
        """Encode a text or a list of texts into a padded batch; attention_mask is 1 for
        tokens, 0 for padding (on the side padding_side says)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        _check_texts(texts)
        if truncation:
            if max_length is None:
                raise ValueError("Tokenizer: truncation=True needs max_length")
            self.backend.enable_truncation(max_length)  # keeps the special tokens, as HF
        try:
            rows = [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)]
        finally:
            if truncation:
                self.backend.no_truncation()
        width = max(len(r) for r in rows) if rows else 0
        if any(len(r) != width for r in rows) and not padding:
            raise ValueError(f"Tokenizer: {len(texts)} texts of lengths "
                             f"{sorted({len(r) for r in rows})} need padding=True to form a batch")
        if any(len(r) != width for r in rows) and self.pad_token_id is None:
            raise ValueError(f"Tokenizer: padding {len(texts)} texts of different lengths needs a "
                             f"pad token, and {self.source} names none; pass pad_token=... to "
                             "Tokenizer.from_dir (GPT-2 pads with its eos_token)")
        ids = np.full((len(rows), width), self.pad_token_id or 0, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            cols = slice(width - len(r), width) if self.padding_side == "left" else slice(0, len(r))
            ids[i, cols], mask[i, cols] = r, 1
        return {"input_ids": tt.tensor(ids, device=device), "attention_mask": tt.tensor(mask, device=device)}

    def decode(self, ids, skip_special_tokens=False):
        return self.backend.decode(_ints(ids), skip_special_tokens=skip_special_tokens)

    def batch_decode(self, rows, skip_special_tokens=False):
        return [self.decode(r, skip_special_tokens) for r in rows]

    def __repr__(self):
        specials = ", ".join(f"{k}={getattr(self, k)!r}" for k in SPECIAL if getattr(self, k) is not None)
        return f"Tokenizer(vocab_size={self.vocab_size}, padding_side={self.padding_side!r}, {specials})"


def _special(token, field, path, backend):
    """A special token of tokenizer_config.json / special_tokens_map.json: null, a string or
    an AddedToken ({"content": ..., ...}), in the vocabulary of tokenizer.json."""
    text = token.get("content") if isinstance(token, dict) else token
    if token is None:
        return None
    if not isinstance(text, str) or not _encodable(text):
        raise problem("Tokenizer", path, field, token, 'a token: a string or {"content": "<string>"}')
    if backend.token_to_id(text) is None:
        raise problem("Tokenizer", path, field, token, "a token in the vocabulary of tokenizer.json")
    return text


def _encodable(text):
    """False for a string with lone surrogates (undecodable bytes from argv, or a JSON
    escape such as \\udcff), which the tokenizers library refuses with a TypeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_texts(texts):
    """Refuse a text with a lone surrogate, naming it (the tokenizers library's TypeError
    names neither the text nor the character); other inputs are the library's to judge."""
    for i, t in enumerate(texts):
        if isinstance(t, str) and not _encodable(t):
            bad = next(j for j, c in enumerate(t) if not _encodable(c))
            code = ord(t[bad])
            shown = (f"byte 0x{code - 0xDC00:02x}, which was not valid UTF-8 and was decoded with "
                     "surrogateescape" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}")
            raise ValueError(f"Tokenizer: text {i} is not valid Unicode: a lone surrogate at "
                             f"character {bad} ({shown}); decode the bytes with errors='replace'")


def _clip(text, n=300):
    return text if len(text) <= n else text[:n - 3] + "..."


def _ints(ids):
    if isinstance(ids, tt.Tensor):
        ids = ids.tolist()
    return [int(i) for i in np.asarray(ids).reshape(-1)]
