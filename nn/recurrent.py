"""Recurrent nets as torch.nn: RNN (tanh/relu), LSTM (with proj_size), GRU and their cells.

Parameters carry torch's names, shapes and gate order (LSTM i, f, g, o; GRU r, z, n) and
torch's init, uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), so a torch state dict
loads as it is and the outputs match.

A layer is a Python loop over time of tinytensor ops: the input projection of every step is
one matmul up front, cut into its steps by one op (split_parts), then each step adds the
recurrent matmul and applies the gates: in eager mode as one fused op per step
(tinytensor/ops/recurrent.py, its backward in ops too), else as the reference ops. So
autodiff (higher orders too) needs nothing of its own, and tt.compile records the unrolled
loop of reference ops, which it fuses itself: the sequence length is part of the input's shape, so another length captures another
program. Sequences of different lengths (a PackedSequence) run as torch runs them: at step
t only the first batch_sizes[t] rows (the sequences still running, longest first) step;
the others keep their state, which is their final state.
"""
import math
import warnings

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.ops.recurrent import gru_cell, lstm_cell, use_fused
from tinytensor.ops.split_parts import split_parts

from . import init
from .layers import _uniform
from .module import Module, Parameter
from .utils.rnn import PackedSequence, batch_sizes_of

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _project(x, weight, bias):
    return F.linear(x, weight, bias)


def _gates(z, n):
    """z (B, n * H) as its n gates, one op (a chunk is a slice per gate, each with a backward
    of z's whole size)."""
    return split_parts(z, (z.shape[-1] // n,) * n, z.ndim - 1)


# --------------------------------------------------------------------------- one step
# xp: the input projection x @ w_ih.T + b_ih of this step, (B, gates * H)

def rnn_step(xp, h, w_hh, b_hh, relu):
    pre = xp + _project(h, w_hh, b_hh)
    return F.relu(pre) if relu else tt.tanh(pre)


def lstm_step(xp, h, c, w_hh, b_hh, w_hr=None):
    z = xp + _project(h, w_hh, b_hh)             # (B, 4H)
    if use_fused():                              # eager: the gates as one op (ops/recurrent.py)
        h, c = lstm_cell(z, c)
    else:                                        # the reference, which tt.compile fuses itself
        i, f, g, o = _gates(z, 4)
        c = tt.sigmoid(f) * c + tt.sigmoid(i) * tt.tanh(g)
        h = tt.sigmoid(o) * tt.tanh(c)
    if w_hr is not None:                         # proj_size: h = W_hr h, (B, proj_size)
        h = _project(h, w_hr, None)
    return h, c


def gru_step(xp, h, w_hh, b_hh):
    hp = _project(h, w_hh, b_hh)                 # (B, 3H)
    if use_fused():                              # eager: the gates as one op (ops/recurrent.py)
        return gru_cell(xp, hp, h)
    xr, xz, xn = _gates(xp, 3)
    hr, hz, hn = _gates(hp, 3)
    r = tt.sigmoid(xr + hr)
    z = tt.sigmoid(xz + hz)
    n = tt.tanh(xn + r * hn)                     # torch's GRU: r gates W_hn h + b_hn
    return n + z * (h - n)                       # (1 - z) * n + z * h


# --------------------------------------------------------------------------- modules
def _reset_uniform(self):
    """torch's initialisation of every recurrent weight and bias: U(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1.0 / math.sqrt(self.hidden_size)
    for p in self.parameters():
        init.uniform_(p, -bound, bound)


class RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters, checks, layers, directions, packing."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        for what, v in (("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name}: {what} must be an integer greater than zero, got {v!r}")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"{name}: proj_size must be a non-negative integer, got {proj_size!r}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size is supported by LSTM only")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size ({proj_size}) has to be smaller than hidden_size ({hidden_size})")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} and num_layers=1: dropout acts between layers, "
                          "so it does nothing here", UserWarning, stacklevel=3)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                group = []
                for base, shape in shapes:
                    setattr(self, base + sfx, Parameter(_uniform(shape, bound, device, dtype)))
                    group.append(base + sfx)
                names.append(group)
        self._all_weights_names = names

    # torch's views of the parameters
    @property
    def _flat_weights_names(self):
        return [n for group in self._all_weights_names for n in group]

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in group] for group in self._all_weights_names]

    def flatten_parameters(self):
        """torch packs the weights into one buffer for cuDNN; nothing to pack here."""

    reset_parameters = _reset_uniform

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ----------------------------------------------------------------- forward
    def forward(self, input, hx=None):
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        directions = 2 if self.bidirectional else 1
        out_size = self.proj_size or self.hidden_size
        packed = isinstance(input, PackedSequence)
        if packed:
            batch_sizes = batch_sizes_of(input, name)
            data, sorted_indices, unsorted_indices = input.data, input.sorted_indices, input.unsorted_indices
            B, batched = batch_sizes[0], True
            if data.ndim != 2:
                raise ValueError(f"{name}: a PackedSequence's data must be 2-D, got shape {tuple(data.shape)}")
        else:
            if input.ndim not in (2, 3):
                raise ValueError(f"{name}: expected input to be 2-D or 3-D, got {input.ndim}-D (shape "
                                 f"{tuple(input.shape)})")
            batched = input.ndim == 3
            x = input if not batched else (input.transpose(0, 1) if self.batch_first else input)
            if not batched:
                x = x.unsqueeze(1)                   # (T, 1, I)
            T, B = x.shape[0], x.shape[1]
            batch_sizes = [B] * T
            data = x.reshape(T * B, x.shape[2])      # (T*B, I): the packed layout, all running
            sorted_indices = unsorted_indices = None
        if data.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {data.shape[-1]} (input shape {tuple(data.shape)})")
        h0, c0 = self._initial_state(hx, batched, B, directions, out_size, data, sorted_indices)
        layer_in, finals_h, finals_c = data, [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                weights = [getattr(self, n) for n in self._all_weights_names[k]]
                out, h, c = self._run(layer_in, batch_sizes, weights, h0[k],
                                      None if c0 is None else c0[k], reverse=direction == 1)
                outs.append(out)
                finals_h.append(h)
                finals_c.append(c)
            layer_in = outs[0] if directions == 1 else tt.cat(outs, -1)   # (N, D * out_size)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        h_n = tt.stack(finals_h, 0)                  # (L * D, B, out_size)
        c_n = tt.stack(finals_c, 0) if lstm else None
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = c_n.index_select(1, unsorted_indices) if lstm else None
        if packed:
            output = PackedSequence(layer_in, input.batch_sizes, sorted_indices, unsorted_indices)
        else:
            output = layer_in.reshape(T, B, layer_in.shape[-1])
            if not batched:
                output, h_n = output.squeeze(1), h_n.squeeze(1)
                c_n = c_n.squeeze(1) if lstm else None
            elif self.batch_first:
                output = output.transpose(0, 1)
        return output, ((h_n, c_n) if lstm else h_n)

    def _initial_state(self, hx, batched, B, directions, out_size, like, sorted_indices):
        """h0 (and c0) as (L*D, B, size) in the sorted batch order, zeros when not given."""
        name = type(self).__name__
        L = self.num_layers * directions
        lstm = self.mode == "LSTM"
        if hx is None:
            h0 = tt.zeros((L, B, out_size), dtype=like.dtype, device=like.device)
            c0 = tt.zeros((L, B, self.hidden_size), dtype=like.dtype, device=like.device) if lstm else None
            return h0, c0
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            states = [(hx[0], "h_0", out_size), (hx[1], "c_0", self.hidden_size)]
        else:
            if not isinstance(hx, tt.Tensor):
                raise TypeError(f"{name}: hx must be a Tensor, got {type(hx).__name__}")
            states = [(hx, "h_0", out_size)]
        out = []
        for s, what, size in states:
            expected = (L, B, size) if batched else (L, size)
            if tuple(s.shape) != expected:
                raise RuntimeError(f"{name}: expected {what} of shape {expected}, got {tuple(s.shape)}"
                                   + ("" if batched else " (unbatched input: 2-D states)"))
            if not batched:
                s = s.unsqueeze(1)
            elif sorted_indices is not None:     # states follow the batch into sorted order
                s = s.index_select(1, sorted_indices)
            out.append(s)
        return out[0], (out[1] if lstm else None)

    def _run(self, data, batch_sizes, weights, h0, c0, reverse):
        """One layer, one direction over the packed rows `data` (N, I): (output (N, size),
        final h (B, size), final c or None)."""
        w_ih, w_hh = weights[0], weights[1]
        b_ih, b_hh = (weights[2], weights[3]) if self.bias else (None, None)
        w_hr = weights[-1] if self.proj_size else None
        xp = _project(data, w_ih, b_ih)              # (N, gates * H): every step's input at once
        # one piece per step in one op: its backward is one concatenation, not T slices of N rows
        xs = (xp,) if len(batch_sizes) == 1 else split_parts(xp, batch_sizes, 0)
        T, B = len(batch_sizes), batch_sizes[0]
        lstm, relu = self.mode == "LSTM", self.mode == "RNN_RELU"

        def step(t, h, c):
            x_t = xs[t]
            if lstm:
                return lstm_step(x_t, h, c, w_hh, b_hh, w_hr)
            if self.mode == "GRU":
                return gru_step(x_t, h, w_hh, b_hh), None
            return rnn_step(x_t, h, w_hh, b_hh, relu), None

        outs = [None] * T
        if not reverse:
            h, c, done_h, done_c = h0, c0, [], []
            for t in range(T):
                bs = batch_sizes[t]
                if bs < h.shape[0]:              # the rows past bs ended: their state is final
                    done_h.append(h[bs:])
                    h = h[:bs]
                    if c is not None:
                        done_c.append(c[bs:])
                        c = c[:bs]
                h, c = step(t, h, c)
                outs[t] = h
            if done_h:                           # back in row order: the latest to end first
                h = tt.cat([h] + done_h[::-1], 0)
                c = None if c is None else tt.cat([c] + done_c[::-1], 0)
        else:
            last = batch_sizes[-1]
            h = h0 if last == B else h0[:last]
            c = c0 if c0 is None or last == B else c0[:last]
            for t in range(T - 1, -1, -1):
                bs = batch_sizes[t]
                if bs > h.shape[0]:              # sequences whose last step is t start here
                    h = tt.cat([h, h0[h.shape[0]:bs]], 0)
                    c = None if c is None else tt.cat([c, c0[c.shape[0]:bs]], 0)
                h, c = step(t, h, c)
                outs[t] = h
        out = outs[0] if T == 1 else tt.cat(outs, 0)   # (N, size)
        return out, h, c


class RNN(RNNBase):
    """Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), tanh or relu."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM with torch's gates (i, f, g, o) and optional projection of h (proj_size)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """GRU with torch's gates (r, z, n); r gates the recurrent term W_hn h + b_hn."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


# --------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, gates, device, dtype):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = Parameter(_uniform((gates * hidden_size, input_size), bound, device, dtype))
        self.weight_hh = Parameter(_uniform((gates * hidden_size, hidden_size), bound, device, dtype))
        if bias:
            self.bias_ih = Parameter(_uniform((gates * hidden_size,), bound, device, dtype))
            self.bias_hh = Parameter(_uniform((gates * hidden_size,), bound, device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    reset_parameters = _reset_uniform

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _input(self, input, hx, n_states):
        """(input as (B, I), states as (B, H) each, batched?): checks and unbatched 1-D input."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: expected input to be 1-D or 2-D, got {input.ndim}-D "
                             f"(shape {tuple(input.shape)})")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input has inconsistent input_size: got {input.shape[-1]}, "
                             f"expected {self.input_size} (input shape {tuple(input.shape)})")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        B = x.shape[0]
        if hx is None:
            states = [tt.zeros((B, self.hidden_size), dtype=x.dtype, device=x.device)] * n_states
        else:
            states = list(hx) if n_states == 2 else [hx]
            if len(states) != n_states:
                raise TypeError(f"{name}: hx must be a tuple (h, c)")
            expected = (B, self.hidden_size) if batched else (self.hidden_size,)
            for s in states:
                if tuple(s.shape) != expected:
                    raise RuntimeError(f"{name}: expected a hidden state of shape {expected} for "
                                       f"input shape {tuple(input.shape)}, got {tuple(s.shape)}")
            if not batched:
                states = [s.unsqueeze(0) for s in states]
        return x, states, batched


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._input(input, hx, 1)
        h = rnn_step(_project(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                     self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, (h, c), batched = self._input(input, hx, 2)
        h, c = lstm_step(_project(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._input(input, hx, 1)
        h = gru_step(_project(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
