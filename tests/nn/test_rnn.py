"""nn.RNN / LSTM / GRU and their cells against torch.nn with copied state dicts, in float64:
outputs, final states, and the gradients of the input, the initial states and every
parameter; multi-layer, bidirectional, batch_first, proj_size, bias=False, unbatched input,
packed input, dropout between layers; torch's names, shapes, init and reprs; errors; the
time loop under tt.compile (another sequence length must capture another program)."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn.utils import rnn as rnn_utils

RNG = np.random.default_rng(0)


def _copy(ours, theirs):
    theirs.double()
    ours.to(tt.float64)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def _close(a, b, what):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=what)


def _flat(out):
    """The tensors of a module's result, in order: output, then h_n (and c_n)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _compare(ours, theirs, inputs, prepare=None):
    """Run both on the same float64 inputs (arrays, `prepare` arranges them as arguments)."""
    _copy(ours, theirs)
    args = prepare or (lambda xs: xs)
    _compare_fn(lambda *xs: ours(*args(xs)), lambda *xs: theirs(*args(xs)), ours, theirs, inputs)


def _compare_fn(fo, ft, ours, theirs, inputs):
    """fo / ft on the same float64 inputs: compare every result and, after the same random
    upstream gradient into every result, the inputs' and the parameters' gradients."""
    xs_o = [tt.tensor(a, requires_grad=True) for a in inputs]
    xs_t = [torch.tensor(a, requires_grad=True) for a in inputs]
    res_o, res_t = _flat(fo(*xs_o)), _flat(ft(*xs_t))
    assert len(res_o) == len(res_t)
    loss_o, loss_t = 0, 0
    for k, (a, b) in enumerate(zip(res_o, res_t)):
        assert tuple(a.shape) == tuple(b.shape), (k, a.shape, b.shape)
        _close(a, b, f"result {k}")
        g = RNG.standard_normal(tuple(b.shape))
        loss_o = loss_o + (a * tt.tensor(g)).sum()
        loss_t = loss_t + (b * torch.tensor(g)).sum()
    loss_o.backward()
    loss_t.backward()
    for k, (a, b) in enumerate(zip(xs_o, xs_t)):
        _close(a.grad, b.grad, f"grad of input {k}")
    ours_p, theirs_p = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(ours_p) == list(theirs_p)
    for name, p in theirs_p.items():
        _close(ours_p[name].grad, p.grad, name)


def both(name, *args, **kw):
    return lambda: getattr(nn, name)(*args, **kw), lambda: getattr(torch.nn, name)(*args, **kw)


def _x(*shape):
    return RNG.standard_normal(shape)


def _state_args(xs):
    """(x, (h0, c0)) for an LSTM from three inputs, (x, h0) from two."""
    return (xs[0], (xs[1], xs[2])) if len(xs) == 3 else (xs[0], xs[1])


MODULE_CASES = [
    ("rnn tanh", both("RNN", 3, 4), [_x(4, 2, 3)], None),
    ("rnn relu 2 layers bidirectional no bias h0",
     both("RNN", 3, 4, 2, nonlinearity="relu", bias=False, bidirectional=True),
     [_x(3, 2, 3), _x(4, 2, 4)], _state_args),
    ("lstm", both("LSTM", 3, 5), [_x(4, 2, 3)], None),
    ("lstm 2 layers bidirectional batch_first h0 c0", both("LSTM", 3, 4, 2, batch_first=True, bidirectional=True),
     [_x(2, 5, 3), _x(4, 2, 4), _x(4, 2, 4)], _state_args),
    ("lstm proj_size 2 layers bidirectional h0 c0", both("LSTM", 3, 5, 2, bidirectional=True, proj_size=2),
     [_x(3, 2, 3), _x(4, 2, 2), _x(4, 2, 5)], _state_args),
    ("lstm no bias", both("LSTM", 2, 3, bias=False), [_x(3, 2, 2)], None),
    ("gru", both("GRU", 3, 4), [_x(4, 2, 3)], None),
    ("gru 2 layers batch_first h0", both("GRU", 3, 4, 2, batch_first=True), [_x(2, 3, 3), _x(2, 2, 4)], _state_args),
    ("gru bidirectional no bias", both("GRU", 2, 3, bidirectional=True, bias=False), [_x(3, 2, 2)], None),
    ("unbatched lstm bidirectional h0 c0", both("LSTM", 3, 4, bidirectional=True),
     [_x(4, 3), _x(2, 4), _x(2, 4)], _state_args),
    ("unbatched gru", both("GRU", 3, 4, 2), [_x(3, 3)], None),
    ("unbatched rnn h0", both("RNN", 2, 3), [_x(3, 2), _x(1, 3)], _state_args),
    ("single step", both("LSTM", 2, 3, 2), [_x(1, 2, 2)], None),
]


@pytest.mark.parametrize("name,make,inputs,prepare", MODULE_CASES, ids=[c[0] for c in MODULE_CASES])
def test_module_matches_torch(name, make, inputs, prepare):
    ours, theirs = make[0](), make[1]()
    _compare(ours, theirs, inputs, prepare=prepare)


@pytest.mark.parametrize("fusion", [True, False])
def test_fused_cells_and_reference_ops_both_match_torch(fusion):
    """Eager LSTMs and GRUs take the fused cell (one lstm_cell / gru_cell node per step,
    tinytensor/ops/recurrent.py) with fusion on and the reference ops with it off (as
    tt.compile records): both equal torch, gradients included."""
    with tt.kernels.use_fusion(fusion):
        with tt.record() as tape:
            _compare(nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2), torch.nn.LSTM(3, 4, 2, bidirectional=True,
                     proj_size=2), [_x(3, 2, 3), _x(4, 2, 2), _x(4, 2, 4)], prepare=_state_args)
            _compare(nn.GRU(3, 4, bidirectional=True), torch.nn.GRU(3, 4, bidirectional=True),
                     [_x(3, 2, 3), _x(2, 2, 4)], prepare=_state_args)
    names = [node.name for node in tape.nodes]
    assert names.count("lstm_cell") == (3 * 4 if fusion else 0)
    assert names.count("gru_cell") == (3 * 2 if fusion else 0)
    assert ("sigmoid" in names) != fusion


CELL_CASES = [
    ("rnncell tanh", both("RNNCell", 3, 4), [_x(2, 3), _x(2, 4)], "h"),
    ("rnncell relu no hx", both("RNNCell", 3, 4, nonlinearity="relu"), [_x(2, 3)], None),
    ("lstmcell", both("LSTMCell", 3, 4), [_x(2, 3), _x(2, 4), _x(2, 4)], "hc"),
    ("lstmcell no bias no hx", both("LSTMCell", 3, 4, bias=False), [_x(2, 3)], None),
    ("grucell", both("GRUCell", 3, 4), [_x(2, 3), _x(2, 4)], "h"),
    ("grucell unbatched", both("GRUCell", 3, 4), [_x(3), _x(4)], "h"),
    ("lstmcell unbatched", both("LSTMCell", 2, 3), [_x(2), _x(3), _x(3)], "hc"),
]


@pytest.mark.parametrize("name,make,inputs,states", CELL_CASES, ids=[c[0] for c in CELL_CASES])
def test_cell_matches_torch(name, make, inputs, states):
    prepare = None if states is None else _state_args
    _compare(make[0](), make[1](), inputs, prepare=prepare)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_packed_input_matches_torch(mode):
    """A PackedSequence (unsorted lengths, initial states) through a 2-layer bidirectional
    net: padded outputs zero past each length, final states from each sequence's last real
    step, and every gradient, as torch."""
    kw = dict(proj_size=2) if mode == "LSTM" else {}
    ours, theirs = getattr(nn, mode)(3, 4, 2, bidirectional=True, **kw), \
        getattr(torch.nn, mode)(3, 4, 2, bidirectional=True, **kw)
    lengths = [2, 4, 1]
    out_size = 2 if mode == "LSTM" else 4
    inputs = [_x(4, 3, 3), _x(4, 3, out_size)] + ([_x(4, 3, 4)] if mode == "LSTM" else [])

    def run(module, utils):
        def f(x, *states):
            packed = utils.pack_padded_sequence(x, lengths, enforce_sorted=False)
            out, hn = module(packed, states if mode == "LSTM" else states[0])
            padded, lens = utils.pad_packed_sequence(out)
            assert lens.tolist() == lengths
            return padded, hn
        return f

    _copy(ours, theirs)
    _compare_fn(run(ours, rnn_utils), run(theirs, torch.nn.utils.rnn), ours, theirs, inputs)


def test_packed_sorted_batch_and_packed_output_fields():
    """enforce_sorted=True: the output PackedSequence has torch's data and batch_sizes and
    no permutation."""
    ours, theirs = nn.GRU(2, 3), torch.nn.GRU(2, 3)
    _copy(ours, theirs)
    x = _x(3, 3, 2)
    po = rnn_utils.pack_padded_sequence(tt.tensor(x), [3, 2, 2])
    pt = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), [3, 2, 2])
    (oo, ho), (ot, ht) = ours(po), theirs(pt)
    assert isinstance(oo, rnn_utils.PackedSequence)
    _close(oo.data, ot.data, "data")
    assert oo.batch_sizes.tolist() == ot.batch_sizes.tolist() == [3, 3, 1]
    assert oo.sorted_indices is None and oo.unsorted_indices is None
    _close(ho, ht, "h_n")


def test_dropout_acts_between_layers_only():
    """dropout=1 in training zeroes what layer 0 hands layer 1, never the last layer's
    output: torch's placement (compared with torch, whose p=1 draws no randomness)."""
    ours, theirs = nn.LSTM(3, 4, 2, dropout=1.0), torch.nn.LSTM(3, 4, 2, dropout=1.0)
    _compare(ours, theirs, [_x(3, 2, 3)])
    # eval: no dropout at all
    ours.eval(), theirs.eval()
    x = _x(3, 2, 3)
    _close(ours(tt.tensor(x))[0], theirs(torch.tensor(x))[0], "eval output")


def test_dropout_in_training_draws_a_mask():
    tt.manual_seed(0)
    m = nn.GRU(3, 8, 2, dropout=0.5).double()
    x = tt.tensor(_x(4, 2, 3))
    a, b = m(x)[0], m(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), m(x)[0].detach().numpy())


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_double_backward_matches_torch(mode):
    """The gradient is itself differentiable (the fused cells' backward is in ops too): d/dW
    of <dL/dx, v>."""
    ours, theirs = getattr(nn, mode)(2, 3), getattr(torch.nn, mode)(2, 3)
    _copy(ours, theirs)
    x, v = _x(3, 2, 2), _x(3, 2, 2)
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (go,) = tt.autograd.grad((ours(xo)[0] ** 2).sum(), [xo], create_graph=True)
    (gt,) = torch.autograd.grad((theirs(xt)[0] ** 2).sum(), [xt], create_graph=True)
    _close(go, gt, "first gradient")
    (ho,) = tt.autograd.grad((go * tt.tensor(v)).sum(), [ours.weight_hh_l0])
    (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), [theirs.weight_hh_l0])
    _close(ho, ht, "second gradient")


@pytest.mark.parametrize("name,kw", [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
                                     ("GRU", dict(bias=False)), ("RNN", dict(nonlinearity="relu"))])
def test_names_shapes_init_and_repr_as_torch(name, kw):
    ours, theirs = getattr(nn, name)(3, 4, **kw), getattr(torch.nn, name)(3, 4, **kw)
    assert [(k, tuple(p.shape)) for k, p in ours.named_parameters()] == \
        [(k, tuple(p.shape)) for k, p in theirs.named_parameters()]
    assert ours.extra_repr() == theirs.extra_repr()
    assert [len(w) for w in ours.all_weights] == [len(w) for w in theirs.all_weights]
    bound = 1 / math.sqrt(4)
    for k, p in ours.named_parameters():
        a = p.detach().numpy()
        assert np.all(np.abs(a) <= bound) and a.std() > bound / 4, k


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_names_and_repr_as_torch(name):
    kw = dict(nonlinearity="relu") if name == "RNNCell" else {}
    ours, theirs = getattr(nn, name)(3, 4, bias=False, **kw), getattr(torch.nn, name)(3, 4, bias=False, **kw)
    assert ours.extra_repr() == theirs.extra_repr()
    assert [(k, tuple(p.shape)) for k, p in ours.named_parameters()] == \
        [(k, tuple(p.shape)) for k, p in theirs.named_parameters()]


def test_torch_state_dict_loads_into_a_fresh_module():
    theirs = torch.nn.LSTM(3, 4, 2, bidirectional=True, proj_size=3).double()
    ours = nn.LSTM(3, 4, 2, bidirectional=True, proj_size=3, dtype=tt.float64)
    ours.load_state_dict({k: tt.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _x(2, 1, 3)
    _close(ours(tt.tensor(x))[0], theirs(torch.tensor(x))[0], "output")


@pytest.mark.parametrize("make,call,match", [
    (lambda: nn.LSTM(3, 4), lambda m: m(tt.randn(5, 2, 4)), r"LSTM: input.size\(-1\) must be equal to input_size. "
                                                           r"Expected 3, got 4"),
    (lambda: nn.LSTM(3, 4, proj_size=2), lambda m: m(tt.randn(5, 2, 3), (tt.zeros(1, 2, 4), tt.zeros(1, 2, 4))),
     r"LSTM: expected h_0 of shape \(1, 2, 2\), got \(1, 2, 4\)"),
    (lambda: nn.GRU(3, 4), lambda m: m(tt.randn(1, 5, 2, 3)), r"GRU: expected input to be 2-D or 3-D, got 4-D"),
    (lambda: nn.RNN(3, 4), lambda m: m(tt.randn(5, 3), tt.zeros(1, 2, 4)),
     r"RNN: expected h_0 of shape \(1, 4\), got \(1, 2, 4\) \(unbatched"),
    (lambda: nn.GRUCell(3, 4), lambda m: m(tt.randn(2, 3), tt.zeros(3, 4)),
     r"GRUCell: expected a hidden state of shape \(2, 4\)"),
    (lambda: nn.LSTMCell(3, 4), lambda m: m(tt.randn(2, 5)), r"LSTMCell: input has inconsistent input_size: got 5"),
])
def test_errors_name_the_module_and_shapes(make, call, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        call(make())


def test_constructor_checks():
    with pytest.raises(ValueError, match=r"LSTM: proj_size \(4\) has to be smaller than hidden_size \(4\)"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="GRU: dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="GRU: hidden_size must be an integer greater than zero"):
        nn.GRU(3, 0)
    with pytest.warns(UserWarning, match="dropout=0.5 and num_layers=1"):
        nn.GRU(3, 4, dropout=0.5)


# --------------------------------------------------------------------------- tt.compile
def _lstm_step(m, x):
    out, (h, c) = m(x)
    loss = (out ** 2).sum() + h.sum() + (c * c).sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_time_loop_follows_the_sequence_length(dynamic):
    """The unrolled loop is a program per sequence length: a call with another length must
    not replay the first one's program (guards on the shape), and each call's loss and
    gradients equal eager's."""
    tt.manual_seed(0)
    m = nn.LSTM(2, 3, bidirectional=True).double()
    f = tt.compile(_lstm_step, backend="numpy", dynamic=dynamic)
    for T in (3, 4, 3, 2):
        x = tt.tensor(_x(T, 2, 2))
        m.zero_grad()
        want = float(_lstm_step(m, x))
        grads = [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        got = float(f(m, x))
        np.testing.assert_allclose(got, want, rtol=1e-10)
        for p, g in zip(m.parameters(), grads):
            np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-9, atol=1e-12)
    if not dynamic:   # one program per length; the second T=3 call replayed the first's
        assert len(f.programs) == 3


def test_compiled_module_differentiates_the_output_alone():
    """tt.compile(lstm): `out, _ = m(x)` and a backward from out only (h_n, c_n get no
    gradient): the compiled backward leaves the missing terms out (their way runs through
    the slices of stack's backward: getitem, compiler/absent.py) and equals eager."""
    tt.manual_seed(0)
    m = nn.LSTM(2, 3, 2).double()
    cm = tt.compile(m, backend="numpy")
    for T in (3, 4):
        x = _x(T, 2, 2)
        grads = []
        for f in (m, cm):
            m.zero_grad()
            out, _ = f(tt.tensor(x))
            (out * out).sum().backward()
            grads.append([p.grad.numpy().copy() for p in m.parameters()])
        for a, b in zip(*grads):
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
