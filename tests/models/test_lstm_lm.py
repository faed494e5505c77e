"""The 2-layer LSTM language model (models/lstm_lm.py) against a torch twin with copied
weights, in float64: logits, hidden state, loss and every parameter's gradient, in train
mode (dropout 0) and eval mode, over two chunks with the hidden state carried (detached)
between them; tied weights; and a compiled SGD step equal to eager."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn
from tinytensor.models import LSTMLanguageModel

V, E, H, T, B = 11, 6, 6, 4, 3
RNG = np.random.default_rng(2)


class TorchLSTMLM(torch.nn.Module):
    """The twin, written as torch's word_language_model example writes it."""

    def __init__(self, tie_weights=False):
        super().__init__()
        self.drop = torch.nn.Dropout(0.0)
        self.encoder = torch.nn.Embedding(V, E)
        self.rnn = torch.nn.LSTM(E, H, 2, dropout=0.0)
        self.decoder = torch.nn.Linear(H, V)
        if tie_weights:
            self.decoder.weight = self.encoder.weight

    def forward(self, ids, hidden=None):
        out, hidden = self.rnn(self.drop(self.encoder(ids)), hidden)
        return self.decoder(self.drop(out)), hidden


def _twins(tie_weights=False):
    theirs = TorchLSTMLM(tie_weights).double()
    ours = LSTMLanguageModel(V, E, H, num_layers=2, dropout=0.0, tie_weights=tie_weights, dtype=tt.float64)
    state = {k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    assert sorted(dict(ours.named_parameters())) == sorted(dict(theirs.named_parameters()))
    return ours, theirs


def _close(a, b, what):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("tie_weights", [False, True])
def test_lstm_lm_matches_torch(mode, tie_weights):
    ours, theirs = _twins(tie_weights)
    getattr(ours, mode)(), getattr(theirs, mode)()
    hid_o = hid_t = None
    for chunk in range(2):              # the second chunk starts from the first's (detached) state
        ids = RNG.integers(0, V, (T, B))
        targets = RNG.integers(0, V, (T, B))
        ours.zero_grad(), theirs.zero_grad()
        (logits_o, hid_o2) = ours(tt.tensor(ids), hid_o)
        (logits_t, hid_t2) = theirs(torch.tensor(ids), hid_t)
        _close(logits_o, logits_t, f"logits, chunk {chunk}")
        for a, b, what in zip(hid_o2, hid_t2, "hc"):
            _close(a, b, f"{what}_n, chunk {chunk}")
        loss_o = tt.functional.cross_entropy(logits_o.reshape(-1, V), tt.tensor(targets).reshape(-1))
        loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, V), torch.tensor(targets).reshape(-1))
        _close(loss_o, loss_t, "loss")
        loss_o.backward(), loss_t.backward()
        theirs_p = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            _close(p.grad, theirs_p[name].grad, f"grad of {name}, chunk {chunk}")
        hid_o = tuple(h.detach() for h in hid_o2)
        hid_t = tuple(h.detach() for h in hid_t2)


def test_loss_helper_and_init_hidden():
    ours, theirs = _twins()
    ids, targets = RNG.integers(0, V, (T, B)), RNG.integers(0, V, (T, B))
    h0 = ours.init_hidden(B)
    assert [tuple(h.shape) for h in h0] == [(2, B, H)] * 2 and h0[0].dtype == tt.float64
    loss, _ = ours.loss(tt.tensor(ids), tt.tensor(targets), h0)
    logits_t, _ = theirs(torch.tensor(ids))
    want = torch.nn.functional.cross_entropy(logits_t.reshape(-1, V), torch.tensor(targets).reshape(-1))
    _close(loss, want, "loss")


def test_dropout_makes_training_stochastic_and_eval_deterministic():
    tt.manual_seed(0)
    m = LSTMLanguageModel(V, E, H, dropout=0.5, dtype=tt.float64)
    ids = tt.tensor(RNG.integers(0, V, (T, B)))
    assert not np.allclose(m(ids)[0].detach().numpy(), m(ids)[0].detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(ids)[0].detach().numpy(), m(ids)[0].detach().numpy())


def test_compiled_training_step_equals_eager():
    """An SGD step of the LM, compiled: losses and final weights follow eager's."""
    def step(m, opt, ids, targets):
        loss, _ = m.loss(ids, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    batches = [(tt.tensor(RNG.integers(0, V, (T, B))), tt.tensor(RNG.integers(0, V, (T, B)))) for _ in range(3)]
    runs = []
    for fn in (step, tt.compile(step, backend="numpy")):
        tt.manual_seed(5)
        m = LSTMLanguageModel(V, E, H, dtype=tt.float64)
        opt = nn.optim.SGD(m.parameters(), lr=0.5)
        runs.append(([float(fn(m, opt, x, y)) for x, y in batches], [p.detach().numpy().copy() for p in m.parameters()]))
    (eager_losses, eager_w), (losses, w) = runs
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-10)
    for a, b in zip(w, eager_w):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
