"""nn.utils.rnn against torch.nn.utils.rnn in float64: pad_sequence (batch_first,
padding_value, padding_side), pack_padded_sequence (sorted or not, lengths as a list or a
tensor, batch_first), pad_packed_sequence (total_length, padding_value), pack_sequence,
unpad_sequence / unpack_sequence, with gradients through them; errors; and tt.compile:
lengths from a list capture per value, lengths from the step's tensors are refused by name."""
import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn.utils import rnn

RNG = np.random.default_rng(1)


def _close(a, b, what=""):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=what)


def _pair(arrays):
    return ([tt.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays])


def _backward_same(out_o, out_t, ins_o, ins_t):
    g = RNG.standard_normal(tuple(out_t.shape))
    (out_o * tt.tensor(g)).sum().backward()
    (out_t * torch.tensor(g)).sum().backward()
    for a, b in zip(ins_o, ins_t):
        _close(a.grad, b.grad, "input gradient")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(batch_first, padding_side):
    seqs = [RNG.standard_normal((n, 2)) for n in (2, 4, 1)]
    so, st = _pair(seqs)
    po = rnn.pad_sequence(so, batch_first=batch_first, padding_value=-1.5, padding_side=padding_side)
    pt = trnn.pad_sequence(st, batch_first=batch_first, padding_value=-1.5, padding_side=padding_side)
    _close(po, pt)
    _backward_same(po, pt, so, st)


def test_pad_sequence_of_ints_and_of_a_tensor():
    seqs = [np.arange(n) for n in (3, 1)]
    po = rnn.pad_sequence([tt.tensor(s) for s in seqs], padding_value=7)
    pt = trnn.pad_sequence([torch.tensor(s) for s in seqs], padding_value=7)
    assert po.dtype == tt.int64 and po.tolist() == pt.tolist()
    x = RNG.standard_normal((2, 3))
    assert rnn.pad_sequence(tt.tensor(x)).tolist() == trnn.pad_sequence(torch.tensor(x)).tolist()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([4, 2, 2, 1], True), ([2, 4, 1, 3], False),
                                                    ([3, 1, 3, 2], False)])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_pack_then_pad_round_trip(lengths, enforce_sorted, batch_first, as_tensor):
    shape = (4, 4, 2) if not batch_first else (4, 4, 2)
    (xo,), (xt,) = _pair([RNG.standard_normal(shape)])
    lo = tt.tensor(lengths) if as_tensor else lengths
    lt = torch.tensor(lengths) if as_tensor else lengths
    po = rnn.pack_padded_sequence(xo, lo, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pt = trnn.pack_padded_sequence(xt, lt, batch_first=batch_first, enforce_sorted=enforce_sorted)
    _close(po.data, pt.data, "data")
    assert po.batch_sizes.tolist() == pt.batch_sizes.tolist() and po.batch_sizes.dtype == tt.int64
    for a, b in ((po.sorted_indices, pt.sorted_indices), (po.unsorted_indices, pt.unsorted_indices)):
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
    do, lens_o = rnn.pad_packed_sequence(po, batch_first=batch_first, padding_value=0.5, total_length=5)
    dt, lens_t = trnn.pad_packed_sequence(pt, batch_first=batch_first, padding_value=0.5, total_length=5)
    _close(do, dt, "padded")
    assert lens_o.tolist() == lens_t.tolist() == lengths
    _backward_same(do, dt, [xo], [xt])


def test_pack_sequence_and_unpack_unpad():
    seqs = [RNG.standard_normal((n, 3)) for n in (2, 3, 1)]
    so, st = _pair(seqs)
    po, pt = rnn.pack_sequence(so, enforce_sorted=False), trnn.pack_sequence(st, enforce_sorted=False)
    _close(po.data, pt.data)
    assert po.batch_sizes.tolist() == pt.batch_sizes.tolist()
    uo, ut = rnn.unpack_sequence(po), trnn.unpack_sequence(pt)
    assert len(uo) == 3
    for a, b in zip(uo, ut):
        _close(a, b)
    padded = rnn.pad_sequence(so, batch_first=True)
    for a, s in zip(rnn.unpad_sequence(padded, tt.tensor([2, 3, 1]), batch_first=True), seqs):
        np.testing.assert_array_equal(a.detach().numpy(), s)


def test_packed_sequence_fields_and_conversions():
    p = rnn.PackedSequence(tt.randn(3, 2), [2, 1], tt.tensor([1, 0]))
    assert p.batch_sizes.tolist() == [2, 1] and p.unsorted_indices.tolist() == [1, 0]
    q = p.double()
    assert q.data.dtype == tt.float64 and q.batch_sizes is p.batch_sizes and not q.is_cuda
    data, batch_sizes, sorted_indices, unsorted_indices = q       # a namedtuple, as torch's
    assert sorted_indices.tolist() == [1, 0]


@pytest.mark.parametrize("call,err,match", [
    (lambda: rnn.pack_padded_sequence(tt.randn(3), [3]), ValueError, "pack_padded_sequence: input must have"),
    (lambda: rnn.pack_padded_sequence(tt.randn(3, 2, 1), [1, 2]), RuntimeError,
     r"pack_padded_sequence: lengths \[1, 2\] must be sorted in decreasing order when enforce_sorted=True"),
    (lambda: rnn.pack_padded_sequence(tt.randn(3, 2, 1), [3, 0]), RuntimeError, "every length must be greater than 0"),
    (lambda: rnn.pack_padded_sequence(tt.randn(3, 2, 1), [3, 2, 1]), ValueError,
     r"pack_padded_sequence: 3 lengths for a batch of 2 \(input shape \(3, 2, 1\)"),
    (lambda: rnn.pack_padded_sequence(tt.randn(3, 2, 1), [4, 2]), RuntimeError, "a length 4 exceeds the 3 steps"),
    (lambda: rnn.pad_packed_sequence(rnn.pack_sequence([tt.randn(3), tt.randn(2)]), total_length=2), ValueError,
     r"pad_packed_sequence: total_length=2 is less than the longest sequence \(3 steps"),
    (lambda: rnn.pad_sequence([tt.randn(3, 2), tt.randn(2, 3)]), ValueError,
     r"pad_sequence: every sequence must have shape \(L, \*\(2,\)\); sequence 1 has shape \(2, 3\)"),
    (lambda: rnn.pad_sequence([tt.randn(3)], padding_side="top"), ValueError, "padding_side must be 'left' or 'right'"),
])
def test_errors_name_the_function_and_shapes(call, err, match):
    with pytest.raises(err, match=match):
        call()


# --------------------------------------------------------------------------- tt.compile
def _packed_step(m, x, lengths):
    packed = rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    out, h = m(packed)
    padded, _ = rnn.pad_packed_sequence(out)
    loss = (padded ** 2).sum() + h.sum()
    loss.backward()
    return loss


def test_compiled_packed_step_with_list_lengths_captures_per_lengths():
    """Lengths as a list argument are keyed by value: the second call with other lengths
    (same shapes) captures again, and both calls equal eager, gradients included."""
    tt.manual_seed(0)
    m = nn.GRU(2, 3, bidirectional=True).double()
    f = tt.compile(_packed_step, backend="numpy")
    x = tt.tensor(RNG.standard_normal((3, 3, 2)))
    for lengths in ([3, 1, 2], [2, 3, 3], [3, 1, 2]):
        m.zero_grad()
        want = float(_packed_step(m, x, lengths))
        grads = [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        np.testing.assert_allclose(float(f(m, x, lengths)), want, rtol=1e-10)
        for p, g in zip(m.parameters(), grads):
            np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-9, atol=1e-12)
    assert len(f.programs) == 2


def test_compiled_lengths_tensor_is_refused_by_name():
    m = nn.GRU(2, 3).double()
    f = tt.compile(_packed_step, backend="numpy")
    x = tt.tensor(RNG.standard_normal((3, 2, 2)))
    with pytest.raises(tt.compiler.CaptureError, match=r"pack_padded_sequence\(lengths=Tensor\).*test_rnn_utils.py"):
        f(m, x, tt.tensor([3, 2]))


def test_compiled_packed_sequence_argument_is_refused_by_name():
    """A PackedSequence handed to a compiled function: its batch_sizes are a tensor of the
    call, so the RNN refuses to read them rather than freeze the first call's."""
    m = nn.LSTM(2, 3).double()
    f = tt.compile(lambda m, p: m(p)[0].data.sum(), backend="numpy")
    p = rnn.pack_sequence([tt.randn(3, 2, dtype=tt.float64), tt.randn(2, 2, dtype=tt.float64)])
    with pytest.raises(tt.compiler.CaptureError, match=r"LSTM: the batch_sizes of a PackedSequence"):
        f(m, p)
