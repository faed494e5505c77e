"""FeedForward: the position-wise MLP of a Transformer block, plain or gated.

Plain (relu, gelu, gelu_tanh, silu):  fc2(dropout(act(fc1(x))))       -- as torch.nn.TransformerEncoderLayer
Gated (swiglu, geglu):                down_proj(dropout(act(gate_proj(x)) * up_proj(x)))  -- as LLaMA / T5 v1.1

The gated names follow HF LLaMA (gate_proj, up_proj, down_proj), so its checkpoints load by name.
"""
import tinytensor.functional as F
from tinytensor.autograd import plain

from .layers import Linear
from .module import Module

_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "swiglu": F.silu,   # gated: act(gate) * up
    "geglu": F.gelu,
}
_GATED = ("swiglu", "geglu")


class FeedForward(Module):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if not callable(activation) and activation not in _ACTIVATIONS:
            raise ValueError(f"FeedForward: activation must be one of {sorted(_ACTIVATIONS)}, "
                             f"got {plain(activation)!r}")
        self.d_model, self.d_ff, self.activation = d_model, d_ff, activation
        self.dropout = dropout
        self.gated = not callable(activation) and activation in _GATED
        kw = dict(bias=bias, device=device, dtype=dtype)
        if self.gated:
            self.gate_proj = Linear(d_model, d_ff, **kw)
            self.up_proj = Linear(d_model, d_ff, **kw)
            self.down_proj = Linear(d_ff, d_model, **kw)
        else:
            self.fc1 = Linear(d_model, d_ff, **kw)
            self.fc2 = Linear(d_ff, d_model, **kw)

    def forward(self, x):  # (..., d_model)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"FeedForward: input shape {tuple(x.shape)} does not end in "
                             f"d_model={self.d_model}")
        act = self.activation if callable(self.activation) else _ACTIVATIONS[self.activation]
        if self.gated:
            h = act(self.gate_proj(x)) * self.up_proj(x)  # (..., d_ff)
        else:
            h = act(self.fc1(x))  # (..., d_ff)
        h = F.dropout(h, self.dropout, self.training)
        return (self.down_proj if self.gated else self.fc2)(h)  # (..., d_model)

    def extra_repr(self):
        return (f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self._act_name()}, "
                f"dropout={self.dropout}")

    def _act_name(self):
        a = self.activation
        return repr(a) if isinstance(a, str) else getattr(a, "__name__", type(a).__name__)
