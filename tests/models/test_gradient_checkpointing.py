"""model.gradient_checkpointing_enable(): every block recomputed in backward (nn.recompute),
gradients bitwise those of the plain run in float64 with dropout on, activations not kept."""
import tracemalloc

import numpy as np
import pytest

from tinytensor import models
import tinytensor as tt

GPT = dict(vocab_size=50, n_positions=32, n_embd=16, n_layer=3, n_head=2,
           resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
LLAMA = dict(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=2, attention_dropout=0.1)


def _step(cls, config, checkpointing, ids):
    tt.manual_seed(0)
    model = cls(**config).double()
    if checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    out = model(ids, labels=ids)
    out.loss.backward()
    return model, out.loss.item()


@pytest.mark.parametrize("cls,config", [(models.GPT, GPT), (models.Llama, LLAMA)],
                         ids=["gpt", "llama"])
def test_gradients_are_bitwise_the_plain_run(cls, config):
    ids = tt.tensor(np.random.default_rng(1).integers(0, 50, (2, 12)))
    plain, loss0 = _step(cls, config, False, ids)
    ckpt, loss1 = _step(cls, config, True, ids)
    assert ckpt.is_gradient_checkpointing and not plain.is_gradient_checkpointing
    assert loss1 == loss0
    for (name, p0), (_, p1) in zip(plain.named_parameters(), ckpt.named_parameters()):
        np.testing.assert_array_equal(p1.grad.numpy(), p0.grad.numpy(), err_msg=name)


def test_blocks_are_recomputed_and_their_activations_not_kept():
    config = dict(GPT, n_embd=32, n_layer=4, n_positions=64)
    ids = tt.tensor(np.random.default_rng(2).integers(0, 50, (4, 64)))

    def kept_after_forward(checkpointing):
        tt.manual_seed(0)
        model = models.GPT(**config)
        if checkpointing:
            model.gradient_checkpointing_enable()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        loss = model(ids, labels=ids).loss
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        names = {n.name for n in _nodes(loss)}
        return kept, names

    kept_plain, names_plain = kept_after_forward(False)
    kept_ckpt, names_ckpt = kept_after_forward(True)
    assert "recompute" in names_ckpt and "recompute" not in names_plain
    assert kept_ckpt < 0.5 * kept_plain, (kept_ckpt, kept_plain)


def test_eval_and_cached_generation_run_plainly():
    tt.manual_seed(0)
    model = models.GPT(**GPT)
    model.gradient_checkpointing_enable()
    model.eval()
    ids = tt.tensor([[1, 2, 3]])
    assert "recompute" not in {n.name for n in _nodes(model(ids, labels=ids).loss)}
    plain = models.GPT(**GPT)
    plain.load_state_dict(model.state_dict())
    plain.eval()
    assert model.generate(ids, 4).tolist() == plain.generate(ids, 4).tolist()
    model.gradient_checkpointing_disable()
    assert not model.is_gradient_checkpointing


def _nodes(t):
    seen, todo = set(), [t.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or not hasattr(n, "edges") or n in seen:
            continue
        seen.add(n)
        todo.extend(e[0] for e in n.edges if isinstance(e, tuple))
    return seen
