"""Variable-length sequences for recurrent nets, as torch.nn.utils.rnn: pad_sequence,
pack_padded_sequence, pad_packed_sequence, pack_sequence, unpad_sequence, unpack_sequence
and PackedSequence.

A PackedSequence holds the real steps only, time-major: `data` is (sum of lengths, *) with
the batch_sizes[t] sequences still running at step t next to each other, longest first.
Moving values between padded and packed layouts is one index_select with an index built
from the lengths, so gradients flow through the recorded op.

The lengths decide the layout: they are Python numbers here. Lengths given as a list are
Python values (tt.compile keys a list argument by value, so other lengths capture again);
lengths given as a Tensor, and the batch_sizes of a PackedSequence, are read through
`read_value`, which tt.compile refuses by name for a tensor of the step (an argument, or
one computed from one) instead of freezing the first call's lengths into the program.
"""
from collections import namedtuple

import tinytensor as tt
from tinytensor.core.grad_mode import STATE

from ..module import ToShortcuts

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation"]


def _ints(values, what):
    """A list of Python ints from a list, tuple, NumPy array or Tensor (read by name)."""
    if isinstance(values, tt.Tensor):
        if values.ndim != 1:
            raise ValueError(f"{what}: expected a 1-D tensor, got shape {tuple(values.shape)}")
        STATE.hooks.read_value(values, what)
        return [int(v) for v in values.tolist()]
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [int(v) for v in values]


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None): its argsort, a recorded op."""
    if permutation is None:
        return None
    return tt.argsort(permutation)


class PackedSequence(namedtuple("PackedSequence_", "data batch_sizes sorted_indices unsorted_indices"),
                     ToShortcuts):
    """(data, batch_sizes, sorted_indices, unsorted_indices), as torch's. batch_sizes is an
    int64 CPU tensor; sorted_indices (None when the batch came sorted) orders the batch by
    decreasing length, unsorted_indices restores the caller's order."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (data, batch_sizes, ...)")
        if not isinstance(batch_sizes, tt.Tensor):
            batch_sizes = tt.tensor(_ints(batch_sizes, "PackedSequence"), dtype=tt.int64)
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """data moved/cast as Tensor.to; the indices follow data's device; batch_sizes stays
        on the CPU, as torch keeps it."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        idx = [None if i is None else i.to(data.device) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *idx)

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"


def batch_sizes_of(sequence, op):
    """sequence.batch_sizes as Python ints; `op` names the reader if tt.compile refuses."""
    return _ints(sequence.batch_sizes, f"{op}: the batch_sizes of a PackedSequence")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (batch_first: (B, max L, *)),
    padding_value filling the missing steps at the end ("right") or the start ("left")."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    if isinstance(sequences, tt.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    rest = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if s.ndim == 0 or tuple(s.shape[1:]) != rest:
            raise ValueError(f"pad_sequence: every sequence must have shape (L, *{rest}); sequence {i} "
                             f"has shape {tuple(s.shape)} (sequence 0: {tuple(sequences[0].shape)})")
    lengths = [s.shape[0] for s in sequences]
    T, B = max(lengths), len(sequences)
    first = sequences[0]
    filler = tt.full((1,) + rest, padding_value, dtype=first.dtype, device=first.device)
    flat = tt.cat(sequences + [filler], 0)       # (sum L + 1, *): the last row pads
    pad_row = sum(lengths)
    starts = [sum(lengths[:b]) for b in range(B)]
    idx = []
    for t in range(T):
        for b, n in enumerate(lengths):
            k = t if padding_side == "right" else t - (T - n)
            idx.append(starts[b] + k if 0 <= k < n else pad_row)
    out = flat.index_select(0, tt.tensor(idx, dtype=tt.int64, device=first.device))
    out = out.reshape((T, B) + rest)             # (T, B, *)
    return out.transpose(0, 1) if batch_first else out


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """The real steps of a padded batch (T, B, *) (batch_first: (B, T, *)) with the given
    lengths, packed time-major. enforce_sorted=False sorts the batch by decreasing length
    (stably) and records the permutation in the result."""
    op = "pack_padded_sequence"
    lengths = _ints(lengths, f"{op}(lengths=Tensor)")
    if input.ndim < 2:
        raise ValueError(f"{op}: input must have a time and a batch dimension, got shape {tuple(input.shape)}")
    bdim = 0 if batch_first else 1
    T, B = input.shape[1 - bdim], input.shape[bdim]
    if len(lengths) != B:
        raise ValueError(f"{op}: {len(lengths)} lengths for a batch of {B} (input shape "
                         f"{tuple(input.shape)}, batch_first={batch_first})")
    if any(n <= 0 for n in lengths):
        raise RuntimeError(f"{op}: every length must be greater than 0, got {lengths}")
    if max(lengths) > T:
        raise RuntimeError(f"{op}: a length {max(lengths)} exceeds the {T} steps of input shape "
                           f"{tuple(input.shape)} (batch_first={batch_first})")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(f"{op}: lengths {lengths} must be sorted in decreasing order when "
                               "enforce_sorted=True; pass enforce_sorted=False to have them sorted")
    else:
        order = sorted(range(B), key=lambda b: -lengths[b])
        lengths = [lengths[b] for b in order]
        sorted_indices = tt.tensor(order, dtype=tt.int64, device=input.device)
        input = input.index_select(bdim, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)            # (T, B, *)
    rest = tuple(input.shape[2:])
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    idx = [t * B + b for t, bs in enumerate(batch_sizes) for b in range(bs)]
    flat = input.reshape((T * B,) + rest)
    data = flat.index_select(0, tt.tensor(idx, dtype=tt.int64, device=input.device))
    return PackedSequence(data, tt.tensor(batch_sizes, dtype=tt.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded, lengths): the inverse of pack_padded_sequence, in the caller's batch order;
    total_length pads the time dimension to that many steps."""
    op = "pad_packed_sequence"
    batch_sizes = batch_sizes_of(sequence, op)
    data = sequence.data
    T, B = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"{op}: total_length={total_length} is less than the longest sequence "
                             f"({T} steps, batch_sizes {batch_sizes})")
        T = total_length
    rest = tuple(data.shape[1:])
    filler = tt.full((1,) + rest, padding_value, dtype=data.dtype, device=data.device)
    flat = tt.cat([data, filler], 0)             # (N + 1, *): the last row pads
    pad_row, idx, offset = data.shape[0], [], 0
    for t in range(T):
        bs = batch_sizes[t] if t < len(batch_sizes) else 0
        idx.extend(offset + b if b < bs else pad_row for b in range(B))
        offset += bs
    padded = flat.index_select(0, tt.tensor(idx, dtype=tt.int64, device=data.device))
    padded = padded.reshape((T, B) + rest)       # (T, B, *), sorted batch order
    lengths = tt.tensor([sum(1 for bs in batch_sizes if bs > b) for b in range(B)], dtype=tt.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.to(lengths.device))
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    """pack_padded_sequence(pad_sequence(sequences), their lengths)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) of a padded batch, as pad_sequence took them."""
    lengths = _ints(lengths, "unpad_sequence(lengths=Tensor)")
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)   # (B, T, *)
    return [padded_sequences[b, :n] for b, n in enumerate(lengths)]


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
