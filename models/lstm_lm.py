"""An LSTM language model: token embedding -> multi-layer LSTM -> linear to the vocabulary.

The shape of PyTorch's word_language_model example (RNNModel with an LSTM), with its
parameter names (`encoder`, `rnn`, `decoder`), so its checkpoints load by name: dropout on
the embeddings, between the LSTM layers and on the LSTM output; optional weight tying
(decoder.weight is encoder.weight, Press & Wolf 2017). Time-major by default, as the
example: ids (T, B) -> logits (T, B, vocab); the hidden state (h, c) is returned so a
caller can carry it over the next chunk of text (truncated backpropagation through time:
detach it between chunks).
"""
import tinytensor as tt
import tinytensor.functional as F
from tinytensor import nn


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_layers=2, dropout=0.0,
                 tie_weights=False, batch_first=False, device=None, dtype=None):
        super().__init__()
        if tie_weights and hidden_size != embed_dim:
            raise ValueError(f"LSTMLanguageModel: tie_weights needs hidden_size == embed_dim, got "
                             f"hidden_size={hidden_size}, embed_dim={embed_dim}")
        self.vocab_size, self.num_layers, self.hidden_size = vocab_size, num_layers, hidden_size
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, embed_dim, device=device, dtype=dtype)
        self.rnn = nn.LSTM(embed_dim, hidden_size, num_layers, dropout=dropout, batch_first=batch_first,
                           device=device, dtype=dtype)
        self.decoder = nn.Linear(hidden_size, vocab_size, device=device, dtype=dtype)
        if tie_weights:
            self.decoder.weight = self.encoder.weight

    def init_hidden(self, batch_size):
        """Zero (h, c), each (num_layers, batch_size, hidden_size)."""
        w = self.decoder.weight
        shape = (self.num_layers, batch_size, self.hidden_size)
        return (tt.zeros(shape, dtype=w.dtype, device=w.device),
                tt.zeros(shape, dtype=w.dtype, device=w.device))

    def forward(self, ids, hidden=None):
        """ids (T, B) (batch_first: (B, T)) -> (logits (T, B, vocab_size), (h, c))."""
        emb = self.drop(self.encoder(ids))           # (T, B, E)
        out, hidden = self.rnn(emb, hidden)          # (T, B, H), ((L, B, H), (L, B, H))
        return self.decoder(self.drop(out)), hidden

    def loss(self, ids, targets, hidden=None):
        """Mean next-token cross-entropy of the logits against targets (same shape as ids)."""
        logits, hidden = self(ids, hidden)
        return F.cross_entropy(logits.reshape(-1, self.vocab_size), targets.reshape(-1)), hidden
