"""What tools/train.py trains on: one class per kind of objective.

    LanguageModeling  next-byte prediction on a text corpus (GPT-1/2, LLaMA)
    MaskedLM          BERT's masked-byte prediction (15%, 80/10/10) on a text corpus
    Reverse           a synthetic sequence-to-sequence task: output the input reversed
                      (the 2017 Transformer, T5, BART); scored by exact-match accuracy

Each task makes batches (`sample`), measures held-out quality (`evaluate`) and shows a
few outputs (`show`).
"""
import os

import numpy as np

import tinytensor as tt

from tinytensor.tools.lib.corpus import byte_tokenizer_json, decode


class LanguageModeling:
    vocab_size = 256
    metric = "val loss"

    def __init__(self, tokens, context, batch_size, seed):
        if len(tokens) <= 2 * (context + 1):
            raise SystemExit(f"train: the data has {len(tokens)} tokens, too few for --context {context}")
        split = int(len(tokens) * 0.9)
        self.train_tokens, self.val_tokens = tokens[:split], tokens[split:]
        self.context, self.batch_size = context, batch_size
        self.rng = np.random.default_rng(seed)
        self.val_rng_seed = seed + 1

    def _windows(self, tokens, rng, n):
        starts = rng.integers(0, len(tokens) - self.context, n)
        return np.stack([tokens[s:s + self.context] for s in starts])

    def sample(self, device):
        x = tt.tensor(self._windows(self.train_tokens, self.rng, self.batch_size), device=device)
        return {"input_ids": x, "labels": x}  # the model shifts labels itself

    def evaluate(self, model, device, batches=8):
        rng = np.random.default_rng(self.val_rng_seed)  # the same held-out windows every time
        with model.evaluating(), tt.no_grad():
            losses = []
            for _ in range(batches):
                x = tt.tensor(self._windows(self.val_tokens, rng, self.batch_size), device=device)
                losses.append(model(input_ids=x, labels=x).loss.item())
        return float(np.mean(losses))

    def show(self, model, device, n_tokens, seed):
        prompt = tt.tensor([list(b"def ")], device=device)
        out = model.generate(prompt, n_tokens, do_sample=True, temperature=0.8, top_k=40, seed=seed)
        return decode(out[0].tolist())

    def export(self, model, directory):
        """Write `model` and a tokenizer for its byte tokens as a HuggingFace directory, so
        tools/generate.py (or transformers) continues text with it."""
        from tinytensor.models.hf import write_json
        model.save_hf(directory)
        write_json(byte_tokenizer_json(), os.path.join(directory, "tokenizer.json"))
        write_json({"tokenizer_class": "PreTrainedTokenizerFast", "padding_side": "left"},
                   os.path.join(directory, "tokenizer_config.json"))


class MaskedLM(LanguageModeling):
    """Bytes plus a [MASK] token (id 256)."""
    vocab_size = 257
    mask_token_id = 256
    metric = "val MLM loss"
    export = None  # a masked LM does not continue text

    def _masked(self, windows, seed):
        from tinytensor.models import mask_tokens
        inputs, labels = mask_tokens(windows, self.mask_token_id, 256, mlm_probability=0.15, seed=seed)
        return inputs, labels

    def sample(self, device):
        inputs, labels = self._masked(self._windows(self.train_tokens, self.rng, self.batch_size),
                                      int(self.rng.integers(1 << 31)))
        return {"input_ids": tt.tensor(inputs, device=device), "labels": tt.tensor(labels, device=device)}

    def evaluate(self, model, device, batches=8):
        rng = np.random.default_rng(self.val_rng_seed)
        with model.evaluating(), tt.no_grad():
            losses = []
            for k in range(batches):
                inputs, labels = self._masked(self._windows(self.val_tokens, rng, self.batch_size), k)
                out = model(input_ids=tt.tensor(inputs, device=device),
                            labels=tt.tensor(labels, device=device))
                losses.append(out.loss.item())
        return float(np.mean(losses))

    def show(self, model, device, n_tokens, seed):
        text = b"    def __init__(self, name, value=None):\n        self.name = name\n"
        ids = np.frombuffer(text, dtype=np.uint8).astype(np.int64)[None, :self.context]
        masked = ids.copy()
        where = np.arange(4, ids.shape[1], 7)
        masked[0, where] = self.mask_token_id
        with model.evaluating(), tt.no_grad():
            pred = model(input_ids=tt.tensor(masked, device=device)).logits.numpy().argmax(-1)
        filled = masked.copy()
        filled[0, where] = pred[0, where]
        shown = masked.copy()
        shown[0, where] = ord("_")
        return ("masked: " + decode(shown[0]).rstrip("\n") + "\nfilled: "
                + decode(np.minimum(filled[0], 255)).rstrip("\n"))


class Reverse:
    """Sequences of 3..8 symbols; the target is the same sequence reversed, then EOS."""
    PAD, START, EOS = 0, 1, 2
    vocab_size = 16
    metric = "exact match"

    def __init__(self, batch_size, seed, min_len=3, max_len=8):
        self.batch_size, self.min_len, self.max_len = batch_size, min_len, max_len
        self.rng = np.random.default_rng(seed)
        self.val = self._make(np.random.default_rng(seed + 1), 200)

    def _make(self, rng, n):
        lengths = rng.integers(self.min_len, self.max_len + 1, n)
        src = np.full((n, self.max_len), self.PAD, dtype=np.int64)
        tgt = np.full((n, self.max_len + 1), -100, dtype=np.int64)
        for i, L in enumerate(lengths):
            seq = rng.integers(3, self.vocab_size, L)
            src[i, :L] = seq
            tgt[i, :L] = seq[::-1]
            tgt[i, L] = self.EOS
        return src, tgt

    def sample(self, device):
        src, tgt = self._make(self.rng, self.batch_size)
        return {"input_ids": tt.tensor(src, device=device),
                "attention_mask": tt.tensor((src != self.PAD).astype(np.int64), device=device),
                "labels": tt.tensor(tgt, device=device)}

    def _predict(self, model, src, device):
        out = model.generate(tt.tensor(src, device=device), self.max_len + 1,
                             attention_mask=tt.tensor((src != self.PAD).astype(np.int64), device=device),
                             eos_token_id=self.EOS)
        return out.numpy()[:, 1:]  # drop the decoder start token

    def evaluate(self, model, device, batches=None):
        src, tgt = self.val
        pred = self._predict(model, src, device)
        hits = 0
        for p, t in zip(pred, tgt):
            want = t[t != -100]
            hits += len(p) >= len(want) and bool((p[:len(want)] == want).all())
        return hits / len(src)

    def show(self, model, device, n_tokens, seed):
        src, tgt = self.val
        pred = self._predict(model, src[:4], device)
        lines = []
        for s, p in zip(src[:4], pred):
            s = s[s != self.PAD]
            p = p[:list(p).index(self.EOS)] if self.EOS in p else p
            lines.append(f"  {s.tolist()} -> {p.tolist()}")
        return "\n".join(lines)
