"""End to end: 20 AdamW steps of tiny Llama and T5 from models/, compiled (forward, backward
and the optimizer update in one program) against eager, with padding and ignored labels
that change from batch to batch, and with dropout."""
import numpy as np
import pytest

from tinytensor import models
from tinytensor import nn
import tinytensor as tt
from tinytensor.kernels import fusion

from .helpers import train_run as _train, training_step  # lr decays each step: a schedule must not recompile


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def llama(drop=0.0):
    tt.manual_seed(0)
    # GQA: 4 query heads share 2 key/value heads
    return models.Llama(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                        attention_dropout=drop)


def t5(drop=0.0):
    tt.manual_seed(0)
    return models.T5(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16,
                     dropout_rate=drop)


def t5_v1_1(drop=0.0):  # gated-gelu (tanh) FFN, untied lm_head, no output scaling
    tt.manual_seed(0)
    return models.T5(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16,
                     dropout_rate=drop, feed_forward_proj="gated-gelu", tie_word_embeddings=False)


MODELS = [llama, t5, t5_v1_1]


def _batches(n, seed=1):
    """(ids, attention_mask, labels), batch 2, length 8: the second row is right-padded and
    its labels past the padding are -100, by a length that changes each batch (so neither
    the mask nor the count of counted labels may be baked into the program)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(2, 64, (2, 8))
        mask = np.ones((2, 8), np.int64)
        mask[1, rng.integers(3, 9):] = 0
        labels = rng.integers(2, 64, (2, 8))
        labels[1, rng.integers(3, 9):] = -100
        out.append((tt.tensor(ids), tt.tensor(mask), tt.tensor(labels)))
    return out


def _loss(m, ids, mask, labels):
    if isinstance(m, models.Llama):  # next-token loss on the ids themselves, padding ignored
        labels = tt.where(mask == 0, tt.full_like(ids, -100), ids)
    # T5: the decoder reads the labels shifted right behind decoder_start_token_id
    return m(ids, attention_mask=mask, labels=labels).loss


train_step = training_step(_loss)
reference_step = training_step(_loss, create_graph=True)   # run with fusion off


def _adamw(make, batches, step):
    """(losses, final parameter arrays, model, optimizer) of AdamW steps, one per batch."""
    return _train(make, nn.optim.AdamW, batches, step, dict(weight_decay=0.1))


def _reference(make, batches, step=reference_step):
    state = fusion.set_fusion(False)
    try:
        return _adamw(make, batches, step)
    finally:
        fusion.restore_fusion(state)


def _seeded(step):
    """`step`, with the generator seeded anew before each call (100, 101, ...): runs that
    draw the same dropout masks."""
    calls = []

    def run(m, opt, *batch):
        tt.manual_seed(100 + len(calls))
        calls.append(None)
        return step(m, opt, *batch)
    return run


def _checking_grads(step, make, worst):
    """`step`, which also computes eager's gradients at the parameters it starts from (a
    twin model) and records in `worst` each step's largest gradient difference, relative to
    the parameter's largest gradient entry: the gradients compared at equal parameters."""
    twin = make()

    def run(m, opt, *batch):
        for p, q in zip(m.parameters(), twin.parameters()):
            q.data[...] = p.data
            q.grad = None
        _loss(twin, *batch).backward()
        loss = step(m, opt, *batch)
        worst.append(max(float(np.abs(p.grad.data - q.grad.data).max() / np.abs(q.grad.data).max())
                         for p, q in zip(m.parameters(), twin.parameters())))
        return loss
    return run


def _rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def _assert_matches_reference(backend, compiled, reference):
    """Against eager with the backward the capture records (reference_step): the losses,
    the final parameters and the last step's .grads."""
    named = list(compiled[2].named_parameters())
    grads = [(p.grad.data, q.grad.data) for (_, p), q in zip(named, reference[2].parameters())]
    if backend == "numpy":  # the interpreter runs each op's own NumPy code: bitwise
        assert compiled[0] == reference[0]
        for (name, _), a, b, (g, h) in zip(named, compiled[1], reference[1], grads):
            assert a.tobytes() == b.tobytes() and g.tobytes() == h.tobytes(), name
        return
    # the C kernels' exp/log/tanh are within twice NumPy's error, not its bits
    # (test_codegen_c), and softmax's exp now runs in a fused row kernel; measured: losses
    # 2.3e-7 relative, parameters 3.0e-6 apart at most (one T5 cross-attention k entry whose
    # gradient sits near AdamW's eps, which turns rounding into lr-sized steps)
    assert _rel(compiled[0], reference[0]) < 1e-6
    for (name, _), a, b, (g, h) in zip(named, compiled[1], reference[1], grads):
        np.testing.assert_allclose(a, b, rtol=0, atol=6e-6, err_msg=name)
        np.testing.assert_allclose(g, h, rtol=0, atol=2e-5 * np.abs(h).max(), err_msg=name)


def _assert_near_eager(compiled, eager):
    """Against plain eager (backward_arrays, fused kernels)."""
    assert _rel(compiled[0], eager[0]) < 2e-6  # measured at most 5.1e-7 (the issue asks 1e-5)
    for (name, _), a, b in zip(compiled[2].named_parameters(), compiled[1], eager[1]):
        # AdamW's first step moves each entry by lr * g / (|g| + eps): an entry whose
        # gradient cancels down to near eps = 1e-8 (T5's cross-attention k weight has one at
        # 2.5e-8, summed from terms ~1e-3) carries a rounding difference of several percent
        # of itself, which that step turns into a few percent of lr = 1e-2 (1.6e-4
        # measured, on that one entry; later steps carry it into the weights it meets;
        # Llama's largest is 5.5e-6). The gradients compared at equal parameters are the
        # check of the backward; this bounds where the two runs end up.
        np.testing.assert_allclose(a, b, rtol=0, atol=5e-4, err_msg=name)


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("make", MODELS, ids=lambda f: f.__name__)
def test_20_adamw_steps_match_eager(make, backend):
    batches = _batches(20)
    step = tt.compile(train_step, backend=backend)
    worst = []
    compiled = _adamw(make, batches, _checking_grads(step, make, worst))
    assert len(step.programs) == 1
    _assert_matches_reference(backend, compiled, _reference(make, batches))

    # every step's gradients, at the parameters that step started from, agree with plain
    # eager's to a few ulps of each parameter's largest entry. Measured at most 7e-6, on
    # the query side of attention (q and the norm before it), whose gradient is a difference
    # of larger terms (softmax's centring), so its rounding is large for its size
    assert max(worst) < 2e-5, worst
    _assert_near_eager(compiled, _adamw(make, batches, train_step))


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("make", MODELS, ids=lambda f: f.__name__)
def test_dropout_same_seed_same_steps_as_eager(make, backend):
    # Llama's attention dropout, T5's dropout_rate (embeddings, every sublayer, attention
    # probabilities, the FFN's hidden layer): the draws are recorded ops, redrawn at each
    # replay from the generator eager would draw from
    batches = _batches(4)
    dropped = lambda: make(drop=0.1)  # noqa: E731
    step = tt.compile(train_step, backend=backend)
    compiled = _adamw(dropped, batches, _seeded(step))
    assert len(step.programs) == 1
    assert "dropout_mask" in {ins.op for ins in step.programs[0].instrs}
    assert _rel(compiled[0], _adamw(make, batches, train_step)[0]) > 1e-3  # dropout is on
    _assert_matches_reference(backend, compiled, _reference(dropped, batches, _seeded(reference_step)))
    _assert_near_eager(compiled, _adamw(dropped, batches, _seeded(train_step)))
