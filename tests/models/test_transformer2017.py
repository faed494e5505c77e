"""The 2017 encoder-decoder against an equivalent model built from torch.nn parts
(torch.nn.Transformer without its final norms, torch.nn.Embedding, a sinusoidal table
written out from the paper's formula) with copied weights, in float64; and a training
run that learns to reverse sequences."""
import math

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")
from tinytensor import models  # noqa: E402

V, D, H, FF, L = 23, 16, 4, 24, 2
PAD, BOS, EOS = 0, 1, 2


def _paper_table(n, d):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / d))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d))
    return torch.tensor(pe)


class TorchReference(torch.nn.Module):
    def __init__(self, label_smoothing):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.emb = torch.nn.Embedding(V, D, padding_idx=PAD)
        self.tr = torch.nn.Transformer(D, H, L, L, FF, dropout=0.0, batch_first=True)
        self.tr.encoder.norm = self.tr.decoder.norm = None  # the paper's Post-LN stacks have none
        self.register_buffer("pe", _paper_table(32, D))

    def embed(self, ids):
        return self.emb(ids) * math.sqrt(D) + self.pe[:ids.shape[1]]

    def forward(self, src, src_mask, tgt, tgt_mask, labels):
        T = tgt.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = may not attend
        h = self.tr(self.embed(src), self.embed(tgt), tgt_mask=causal, tgt_is_causal=True,
                    src_key_padding_mask=src_mask == 0, tgt_key_padding_mask=tgt_mask == 0,
                    memory_key_padding_mask=src_mask == 0)
        logits = h @ self.emb.weight.T
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1),
                                                 ignore_index=-100,
                                                 label_smoothing=self.label_smoothing)
        return logits, loss


def _config(**kw):
    return models.TransformerConfig(vocab_size=V, d_model=D, encoder_layers=L, decoder_layers=L,
                                    encoder_attention_heads=H, decoder_attention_heads=H,
                                    encoder_ffn_dim=FF, decoder_ffn_dim=FF, dropout=0.0,
                                    max_position_embeddings=32, pad_token_id=PAD,
                                    bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS,
                                    **kw)


def _pair(label_smoothing=0.1):
    torch.manual_seed(0)
    ref = TorchReference(label_smoothing).double().eval()
    model = models.Transformer(_config(label_smoothing=label_smoothing)).double().eval()
    state = nn.convert_torch_transformer_state(
        {k[len("tr."):]: v for k, v in ref.state_dict().items() if k.startswith("tr.")})
    state["shared.weight"] = ref.emb.weight.detach().numpy()
    model.load_state_dict({k: tt.tensor(v) for k, v in state.items()})
    return ref, model


def _batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (3, 9), generator=g)
    src_mask = torch.ones(3, 9, dtype=torch.long)
    src_mask[1, 6:] = 0
    src_mask[2, 2:] = 0
    src = src.masked_fill(src_mask == 0, PAD)
    labels = torch.randint(3, V, (3, 7), generator=g)
    labels[0, 6] = labels[1, 4] = EOS
    labels[1, 5:] = -100
    tgt = torch.cat([torch.full((3, 1), BOS), labels[:, :-1]], 1).masked_fill(
        torch.cat([torch.full((3, 1), BOS), labels[:, :-1]], 1) == -100, PAD)
    tgt_mask = (tgt != PAD).long()
    return src, src_mask, tgt, tgt_mask, labels


def test_sinusoids_follow_the_paper_formula():
    got = nn.SinusoidalPositionalEmbedding(32, D)(32, dtype=tt.float64).numpy()
    np.testing.assert_allclose(got, _paper_table(32, D).numpy(), atol=1e-12)


@pytest.mark.parametrize("label_smoothing", [0.1, 0.0])
def test_logits_loss_and_every_gradient_match_torch(label_smoothing):
    ref, model = _pair(label_smoothing)
    src, src_mask, tgt, tgt_mask, labels = _batch()
    r_logits, r_loss = ref(src, src_mask, tgt, tgt_mask, labels)
    r_loss.backward()
    t = lambda x: tt.tensor(x.numpy())  # noqa: E731
    # decoder_input_ids come from shift_tokens_right(labels) inside, as HF's seq2seq models
    out = model(t(src), attention_mask=t(src_mask), decoder_attention_mask=t(tgt_mask),
                labels=t(labels))
    out.loss.backward()
    np.testing.assert_allclose(out.logits.detach().numpy(), r_logits.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(out.loss.item(), r_loss.item(), atol=1e-12)
    grads = {k: v.grad for k, v in ref.tr.named_parameters()}
    grads = nn.convert_torch_transformer_state(grads)
    grads["shared.weight"] = ref.emb.weight.grad.numpy()
    ours = dict(model.named_parameters())
    assert set(ours) == set(grads)
    for name, p in ours.items():
        np.testing.assert_allclose(p.grad.numpy(), grads[name], atol=1e-10, err_msg=name)


def _greedy_torch(ref, src, src_mask, steps):
    ids = torch.full((src.shape[0], 1), BOS)
    for _ in range(steps):
        logits, _ = ref(src, src_mask, ids, torch.ones_like(ids), torch.zeros_like(ids))
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return ids.numpy()


def test_greedy_generation_matches_torch_with_and_without_cache():
    ref, model = _pair()
    src, src_mask, *_ = _batch()
    expected = _greedy_torch(ref, src, src_mask, 8)  # with grad on: torch's nested-tensor fast path stays off
    s, m = tt.tensor(src.numpy()), tt.tensor(src_mask.numpy())
    np.testing.assert_array_equal(model.generate(s, 8, attention_mask=m).numpy(), expected)
    np.testing.assert_array_equal(model.generate(s, 8, attention_mask=m, use_cache=False).numpy(),
                                  expected)


def test_cached_decoding_equals_full_decoding():
    _, model = _pair()
    src, src_mask, tgt, *_ = _batch()
    s, m, y = tt.tensor(src.numpy()), tt.tensor(src_mask.numpy()), tt.tensor(tgt.numpy())
    with tt.no_grad():
        memory = model.encode(s, m)
        full = model.decode(y, memory, m).numpy()
        cache = model.new_cache()
        steps = [model.decode(y[:, :3], memory, m, cache).numpy()]
        for i in range(3, y.shape[1]):
            steps.append(model.decode(y[:, i:i + 1], memory, m, cache).numpy())
    assert cache.length == y.shape[1]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-12)


def test_eos_stops_rows_beam_search_runs_and_clear_errors():
    _, model = _pair()
    src = tt.tensor([[5, 6, 7]])
    first = int(model.generate(src, 1).numpy()[0, 1])
    out = model.generate(src, 6, eos_token_id=first).numpy()
    assert out.tolist() == [[BOS, first]]
    beams = model.generate(src, 5, num_beams=3, eos_token_id=[]).numpy()
    assert beams.shape == (1, 6) and beams[0, 0] == BOS
    with pytest.raises(ValueError, match="decoder_input_ids or labels"):
        model(src)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 32"):
        model.encode(tt.tensor(np.ones((1, 33), dtype=np.int64)))


def test_paper_optimizer_schedule():
    model = models.Transformer(_config())
    opt, sched = models.paper_optimizer(model, warmup_steps=10)
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    assert opt.param_groups[0]["betas"] == (0.9, 0.98) and opt.param_groups[0]["eps"] == 1e-9
    assert int(np.argmax(lrs)) == 9  # warmup ends at step n = 10 (1-based)
    np.testing.assert_allclose(lrs[9], D ** -0.5 * 10 ** -0.5)


def _reversal_batch(rng, B, n=6):
    lengths = rng.integers(3, n + 1, size=B)
    src = np.full((B, n), PAD, np.int64)
    labels = np.full((B, n + 1), -100, np.int64)
    for i, k in enumerate(lengths):
        seq = rng.integers(3, 13, size=k)
        src[i, :k], labels[i, :k], labels[i, k] = seq, seq[::-1], EOS
    return src, (src != PAD).astype(np.int64), labels


@pytest.mark.slow
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_learns_to_reverse_sequences(fusion):
    # The paper's schedule decays only as n^-0.5, so at 600 steps the loss still jumps between
    # updates and exact match swings 0.88..1.0 with the last bits of rounding (fused kernels or
    # not, across seeds). A linear cool-down over the last 200 steps settles it: 1.0 on 4 seeds,
    # fused and unfused, so the 0.95 bar below has real slack.
    rng = np.random.default_rng(0)
    model = models.Transformer(vocab_size=13, d_model=64, encoder_layers=1, decoder_layers=1,
                               encoder_attention_heads=4, decoder_attention_heads=4,
                               encoder_ffn_dim=128, decoder_ffn_dim=128, dropout=0.0,
                               max_position_embeddings=16)
    opt, sched = models.paper_optimizer(model, warmup_steps=100)
    steps, cool_down = 600, 200
    with tt.kernels.use_fusion(fusion):
        for step in range(steps):
            src, mask, labels = _reversal_batch(rng, 64)
            loss = model(tt.tensor(src), attention_mask=tt.tensor(mask), labels=tt.tensor(labels)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            left = steps - 1 - step
            if left < cool_down:  # scale the scheduled lr down to 0 over the last steps
                for group in opt.param_groups:
                    group["lr"] *= left / cool_down
        src, mask, labels = _reversal_batch(np.random.default_rng(1), 200)
        n = mask.sum(1) + 1  # the reversed sequence and its eos
        for num_beams in (1, 3):
            out = model.generate(tt.tensor(src), 7, attention_mask=tt.tensor(mask), eos_token_id=EOS,
                                 num_beams=num_beams).numpy()[:, 1:]  # without the start token
            exact = [out.shape[1] >= k and (out[i, :k] == labels[i, :k]).all() for i, k in enumerate(n)]
            assert np.mean(exact) > 0.95, num_beams


@pytest.mark.gpu
def test_cuda_matches_cpu():
    _, model = _pair()
    src, src_mask, tgt, tgt_mask, labels = (tt.tensor(x.numpy()) for x in _batch())
    cpu = model(src, attention_mask=src_mask, labels=labels)
    greedy = model.generate(src, 6, attention_mask=src_mask).numpy()
    model.to("cuda")
    src, src_mask, labels = src.to("cuda"), src_mask.to("cuda"), labels.to("cuda")
    gpu = model(src, attention_mask=src_mask, labels=labels)
    np.testing.assert_allclose(gpu.logits.detach().cpu().numpy(), cpu.logits.detach().numpy(),
                               atol=1e-9)
    np.testing.assert_array_equal(model.generate(src, 6, attention_mask=src_mask).cpu().numpy(), greedy)
