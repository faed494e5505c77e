"""Integration: a small encoder-decoder Transformer, trained with tinytensor alone, learns to
reverse integer sequences of 2..8 symbols it has never seen (padded batches, so key padding
masks are exercised); greedy decoding runs on the KV cache and stops at EOS."""
import time

import numpy as np

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F

N_SYM, MAX = 10, 8  # symbols 0..9, sequences of 2..MAX of them
BOS, EOS, PAD = 10, 11, 12
VOCAB, D, OUT = 13, 32, MAX + 1  # the output is the reversed sequence, then EOS
STEPS, BATCH, LR = 300, 32, 5e-3


class Reverser(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(VOCAB, D), nn.Embedding(VOCAB, D)
        self.src_pos = nn.LearnedPositionalEmbedding(MAX, D)
        self.tgt_pos = nn.LearnedPositionalEmbedding(OUT, D)
        kw = dict(dim_feedforward=64, dropout=0.0, norm_first=True, batch_first=True)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 4, **kw), 2, norm=nn.LayerNorm(D))
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, 4, **kw), 2, norm=nn.LayerNorm(D))
        self.head = nn.Linear(D, VOCAB)

    def encode(self, src, pad):  # (B, MAX) ints -> (B, MAX, D)
        return self.encoder(self.src_emb(src) + self.src_pos(src.shape[1]), src_key_padding_mask=pad)

    def decode(self, tgt, memory, pad, cache=None, past=0):  # (B, T) -> logits (B, T, VOCAB)
        x = self.tgt_emb(tgt) + self.tgt_pos(tgt.shape[1], past_length=past)
        return self.head(self.decoder(x, memory, tgt_is_causal=True, memory_key_padding_mask=pad,
                                      cache=cache))


def batch(rng, n):
    """src (n, MAX) padded, its padding mask, decoder input and target (n, OUT), lengths."""
    lengths = rng.integers(2, MAX + 1, size=n)
    src = np.full((n, MAX), PAD)
    tgt = np.full((n, OUT), -100)  # cross_entropy's ignore_index after EOS
    for i, n_i in enumerate(lengths):
        seq = rng.integers(0, N_SYM, size=n_i)
        src[i, :n_i], tgt[i, :n_i], tgt[i, n_i] = seq, seq[::-1], EOS
    dec_in = np.concatenate([np.full((n, 1), BOS), np.where(tgt < 0, PAD, tgt)[:, :-1]], axis=1)
    return tt.tensor(src), tt.tensor(src == PAD), tt.tensor(dec_in), tt.tensor(tgt), lengths


def greedy(model, src, pad):
    with tt.no_grad():
        memory = model.encode(src, pad)
        cache = model.decoder.init_cache()
        tok = tt.full((src.shape[0], 1), BOS, dtype=tt.int64)
        out = []
        for t in range(OUT):
            logits = model.decode(tok, memory, pad, cache=cache, past=t)  # (B, 1, VOCAB)
            tok = logits.argmax(dim=-1)  # (B, 1)
            out.append(tok.numpy())
            if (np.concatenate(out, axis=1) == EOS).any(axis=1).all():
                break
    return np.concatenate(out, axis=1)


def exact_match(pred, tgt, lengths):
    return float(np.mean([pred.shape[1] > n and (pred[i, :n + 1] == tgt[i, :n + 1]).all()
                          for i, n in enumerate(lengths)]))


def test_reverse_task():
    t0 = time.perf_counter()
    tt.manual_seed(0)
    rng = np.random.default_rng(0)
    model = Reverser()
    opt = nn.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    for step in range(STEPS):
        for group in opt.param_groups:  # 20 warm-up steps, then linear decay to 0
            group["lr"] = LR * min(1.0, (step + 1) / 20) * (1 - step / STEPS)
        src, pad, dec_in, tgt, _ = batch(rng, BATCH)
        logits = model.decode(dec_in, model.encode(src, pad), pad)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src, pad, _, tgt, lengths = batch(np.random.default_rng(123), 500)  # fresh sequences
    acc = exact_match(greedy(model, src, pad), tgt.numpy(), lengths)
    print(f"reverse task: exact-match accuracy {acc:.3f}, final loss {float(loss):.4f}, "
          f"{time.perf_counter() - t0:.1f} s")
    assert acc > 0.95
