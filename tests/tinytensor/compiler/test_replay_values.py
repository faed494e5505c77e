"""Ops whose result depends on their inputs' values must follow those values at replay.

Each case runs a compiled function on two inputs of one signature (so the second call
replays the program captured on the first) and compares with eager: an op that computed
its result from `.data` in Python (an argmax, a pooling window's winner, an integer
division) and did not record itself would replay the first call's answer. Gradients are
taken with tt.grad inside the step, so they are program outputs too."""
import re

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F

RNG = np.random.default_rng(22)


def _f(*shape):
    return RNG.standard_normal(shape)


def _i(lo, hi, *shape):
    return RNG.integers(lo, hi, shape)


def _with_grads(fn):
    """fn's outputs, then the gradient of sum(output * a fixed cotangent) for each float
    input: a frozen index would route the gradient to the first call's positions."""
    def step(*xs):
        outs = fn(*xs)
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        diff = [x for x in xs if x.requires_grad]
        floats = [o for o in outs if o.is_floating_point() and o.requires_grad]
        if not diff or not floats:
            return outs
        loss = sum((o * tt.cos(tt.arange(o.numel()).reshape(o.shape).to(o.dtype))).sum() for o in floats)
        return outs + tuple(tt.grad(loss, diff))
    return step


def _tensors(arrays):
    return [tt.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def assert_replays_eager(fn, calls, backend, grads=True):
    """fn compiled, called on each input list of `calls` in turn, equals eager fn."""
    step = _with_grads(fn) if grads else fn
    compiled = tt.compile(step, backend=backend)
    for arrays in calls:
        want = step(*_tensors(arrays))
        got = compiled(*_tensors(arrays))
        want = tuple(want) if isinstance(want, (tuple, list)) else (want,)
        got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype and g.shape == w.shape, (k, g, w)
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=f"output {k} of {len(got)}")
    assert len(compiled.programs) == 1   # the later calls were replays


X1 = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
X2 = np.array([[9.0, 1.0, 2.0], [0.0, 0.0, 8.0]])
IMG = [[_f(2, 3, 6, 6)] for _ in range(2)]

CASES = {
    "argmax_dim": (lambda x: x.argmax(dim=1), [[X1], [X2]]),
    "argmax_all": (lambda x: tt.argmax(x), [[X1], [X2]]),
    "argmin_keepdim": (lambda x: x.argmin(dim=0, keepdim=True), [[X1], [X2]]),
    "argsort": (lambda x: tt.argsort(x, dim=-1, descending=True), [[X1], [X2]]),
    "sort": (lambda x: tuple(tt.sort(x, dim=1)), [[X1], [X2]]),
    "topk": (lambda x: tuple(tt.topk(x, 2, dim=1)), [[X1], [X2]]),
    "max_dim": (lambda x: x.max(dim=1).values, [[X1], [X2]]),
    "min_dim": (lambda x: tuple(x.min(dim=0)), [[X1], [X2]]),
    "cummax": (lambda x: tuple(tt.cummax(x, 1)), [[X1], [X2]]),
    "cummin": (lambda x: tuple(tt.cummin(x, 0)), [[X1], [X2]]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), IMG),
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True), IMG),
    "max_pool1d": (lambda x: F.max_pool1d(x, 2, stride=1), [[_f(2, 3, 7)], [_f(2, 3, 7)]]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), [[_f(1, 2, 4, 4, 4)], [_f(1, 2, 4, 4, 4)]]),
    "nn_maxpool2d": (nn.MaxPool2d(2, stride=2), IMG),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), IMG),
    "int_floordiv": (lambda a, b: a // b, [[_i(-20, 20, 6), _i(1, 5, 6)], [_i(-20, 20, 6), _i(1, 5, 6)]]),
    "float_floordiv": (lambda a, b: a // b, [[_f(6) * 9, _f(6) + 3], [_f(6) * 9, _f(6) + 3]]),
    "div_floor": (lambda a, b: tt.div(a, b, rounding_mode="floor"), [[_i(-20, 20, 6), _i(1, 5, 6)],
                                                                     [_i(-20, 20, 6), _i(1, 5, 6)]]),
    "div_trunc": (lambda a, b: tt.div(a, b, rounding_mode="trunc"), [[_f(6) * 9, _f(6) + 3],
                                                                     [_f(6) * 9, _f(6) + 3]]),
    "int_abs": (lambda a: tt.abs(a), [[_i(-9, 9, 7)], [_i(-9, 9, 7)]]),
    "bool_sign": (lambda a: tt.sign(a), [[_i(0, 2, 7).astype(bool)], [_i(0, 2, 7).astype(bool)]]),
    "int_fmod": (lambda a, b: tt.fmod(a, b), [[_i(-20, 20, 6), _i(1, 5, 6)], [_i(-20, 20, 6), _i(1, 5, 6)]]),
    "isclose": (lambda a, b: tt.isclose(a, b, atol=0.5), [[_f(8), _f(8)], [_f(8), _f(8)]]),
    "one_hot": (lambda t: F.one_hot(t, 5), [[_i(0, 5, 6)], [_i(0, 5, 6)]]),
    "remainder_grad": (lambda a, b: a % b, [[_f(6) * 9, _f(6) + 3], [_f(6) * 9, _f(6) + 3]]),
    "prod_grad_meets_a_zero": (lambda x: x.prod(dim=1), [[X1 + 1], [X2]]),
    "scatter_reduce_mean": (lambda x, s, i: tt.scatter_reduce(x, 0, i, s, "mean"),
                            [[_f(4), _f(6), _i(0, 4, 6)], [_f(4), _f(6), _i(0, 4, 6)]]),
}


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("name", list(CASES))
def test_value_dependent_op_replays_eager(name, backend):
    fn, calls = CASES[name]
    assert_replays_eager(fn, calls, backend)


def test_the_issue_example_max_dim():
    g = tt.compile(lambda x: x.max(dim=1).values)
    g(tt.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]]))
    assert g(tt.tensor([[9.0, 1.0, 2.0], [0.0, 0.0, 8.0]])).tolist() == [9.0, 8.0]


# ---------------------------------------------------------------- modules and steps
def _close(got, want, tol):
    got, want = (t.detach().numpy() if isinstance(t, tt.Tensor) else t for t in (got, want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_multi_head_attention_weights_follow_a_padding_mask(backend):
    """need_weights=True with a key padding mask: captured on a mask without a dead row, a
    replay with one must give that row zeros (eager's), not NaN."""
    tt.manual_seed(0)
    mha = nn.MultiHeadAttention(8, 2)
    x = tt.randn(2, 3, 8)

    def f(x, pad):
        return mha(x, key_padding_mask=pad, need_weights=True)
    g = tt.compile(f, backend=backend)
    live = tt.tensor([[False, False, True], [False, True, True]])
    dead = tt.tensor([[False, False, True], [True, True, True]])   # batch 1 sees no key
    for pad in (live, dead):
        for got, want in zip(g(x, pad), f(x, pad)):
            assert not np.isnan(got.detach().numpy()).any()
            _close(got, want, 1e-6)


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_compiled_cnn_with_max_pooling_trains_as_eager(backend):
    """A conv + max-pool + linear classifier, its SGD step compiled: every step's loss and
    the final weights follow eager (the pooling winners and their gradients per call)."""
    def make():
        tt.manual_seed(3)
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 4, 3), nn.AdaptiveMaxPool2d(1))

    def step(m, opt, x, y):
        loss = F.cross_entropy(m(x).reshape(4, 4), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    rng = np.random.default_rng(1)
    batches = [(tt.tensor(rng.standard_normal((4, 1, 8, 8)).astype(np.float32)),
                tt.tensor(rng.integers(0, 3, 4))) for _ in range(4)]
    runs = []
    for fn in (step, tt.compile(step, backend=backend)):
        m = make()
        opt = nn.optim.SGD(m.parameters(), lr=0.5)
        runs.append(([float(fn(m, opt, x, y)) for x, y in batches], [p.data.copy() for p in m.parameters()]))
    (eager_losses, eager_w), (losses, w) = runs
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for a, b in zip(w, eager_w):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("clip", ["norm", "value"])
def test_clipping_is_captured_in_a_compiled_step(clip, backend):
    """nn.clip_grad_norm_ / clip_grad_value_ inside a compiled training step: recorded, so
    every replay clips its own gradients as eager does (the norm returned too)."""
    def make():
        tt.manual_seed(4)
        return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 2))

    def step(m, opt, x, y):
        loss = ((m(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if clip == "norm":
            norm = nn.clip_grad_norm_(m.parameters(), 0.3)
        else:
            nn.clip_grad_value_(m.parameters(), 0.05)
            norm = loss
        opt.step()
        return loss, norm
    rng = np.random.default_rng(2)
    batches = [(tt.tensor(rng.standard_normal((5, 6)) * s), tt.tensor(rng.standard_normal((5, 2))))
               for s in (1.0, 0.01, 3.0, 0.1)]   # some steps clip, some do not
    runs = []
    for fn in (step, tt.compile(step, backend=backend)):
        m = make().to(tt.float64)
        opt = nn.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        out = [tuple(float(t) for t in fn(m, opt, x, y)) for x, y in batches]
        runs.append((out, [p.data.copy() for p in m.parameters()]))
    (eager_out, eager_w), (out, w) = runs
    np.testing.assert_allclose(out, eager_out, rtol=1e-12)
    for a, b in zip(w, eager_w):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_clip_grad_norm_error_if_nonfinite_is_refused_under_capture_naming_the_line():
    m = nn.Linear(3, 1)

    def step(x):
        m(x).sum().backward()
        nn.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)
    with pytest.raises(tt.compiler.CaptureError, match=r"clip_grad_norm_\(error_if_nonfinite=True\).*"
                       r"test_replay_values.py:\d+"):
        tt.compile(step)(tt.randn(2, 3))


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_compiled_llama_follows_position_ids(backend):
    from tinytensor import models
    tt.manual_seed(0)
    m = models.Llama(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    m.eval()
    ids = tt.tensor([[3, 5, 7, 9], [1, 2, 3, 4]])
    f = tt.compile(lambda ids, pos: m(ids, position_ids=pos).logits, backend=backend)
    for pos in (tt.tensor([[0, 1, 2, 3], [0, 1, 2, 3]]), tt.tensor([[5, 6, 7, 8], [0, 0, 1, 2]])):
        _close(f(ids, pos), m(ids, position_ids=pos).logits, 1e-5)
    assert len(f.programs) == 1


@pytest.mark.parametrize("make", [
    lambda: nn.SinusoidalPositionalEmbedding(16, 8),
    lambda: nn.LearnedPositionalEmbedding(16, 8, offset=2),
], ids=["sinusoidal", "learned"])
def test_compiled_position_embeddings_follow_position_tensors(make):
    tt.manual_seed(0)
    emb = make()
    f = tt.compile(lambda pos: emb(pos))
    for pos in (tt.tensor([0, 1, 2, 3]), tt.tensor([7, 3, 9, 0])):
        _close(f(pos), emb(pos), 1e-6)


def test_an_in_place_write_of_a_traced_value_is_refused_at_the_op_naming_the_line():
    """`buf = tt.zeros(3); buf.add_(x)`: the write put x's values into a constant the
    program kept (a replay returned the first call's x); now refused at the op."""
    def f(x):
        buf = tt.zeros(3)
        buf.add_(x)
        return buf * 1
    with pytest.raises(tt.compiler.CaptureError, match=r"in-place op add_ .*test_replay_values.py:\d+ "
                                                       r"\(`buf.add_\(x\)`\)"):
        tt.compile(f)(tt.ones(3))



def test_checks_on_values_run_at_every_replay():
    """The checks that read values moved into the ops' forwards: a replay checks its own
    inputs (before, only the captured call was checked)."""
    f = tt.compile(lambda a, b: tt.fmod(a, b))
    f(tt.tensor([5, 7]), tt.tensor([2, 3]))
    with pytest.raises(ZeroDivisionError, match="fmod: integer division by zero"):
        f(tt.tensor([5, 7]), tt.tensor([2, 0]))
    g = tt.compile(lambda t: F.one_hot(t, 3))
    g(tt.tensor([0, 2]))
    with pytest.raises(IndexError, match=r"one_hot: class values must be in \[0, 3\)"):
        g(tt.tensor([0, 3]))


@pytest.mark.parametrize("fn,op", [
    (lambda t: F.one_hot(t), "one_hot without num_classes"),
    (lambda t: tt.multinomial(t.float() + 1.0, 1), "multinomial"),
    (lambda t: tt.nonzero(t), "nonzero"),
])
def test_a_size_read_off_the_values_is_refused_naming_the_op_and_line(fn, op):
    with pytest.raises(tt.compiler.CaptureError, match=re.escape(op) + r".*test_replay_values.py:\d+"):
        tt.compile(fn)(tt.tensor([0, 2, 1]))


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_a_compiled_embedding_refuses_a_negative_id_at_replay(backend):
    """Eager refuses a negative id (NumPy would wrap it to the last rows); the check read
    the ids in Python, so a replay skipped it and looked up the wrapped rows."""
    emb = nn.Embedding(5, 3)
    f = tt.compile(lambda ids: emb(ids), backend=backend)
    ids = tt.tensor([0, 4, 1])
    _close(f(ids), emb(ids), 0)
    with pytest.raises(IndexError, match=r"embedding: index -1 is negative"):
        f(tt.tensor([0, -1, 1]))


@pytest.mark.parametrize("op", ["gather", "scatter_add", "scatter_reduce"])
def test_compiled_gather_and_scatter_refuse_an_index_out_of_range_at_replay(op):
    x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    fns = {"gather": lambda x, i: tt.gather(x, 1, i),
           "scatter_add": lambda x, i: tt.scatter_add(x, 1, i, x[:, :2] * 1),
           "scatter_reduce": lambda x, i: tt.scatter_reduce(x, 1, i, x[:, :2] * 1, "amax")}
    f = tt.compile(fns[op])
    good = tt.tensor([[0, 2], [1, 1]])
    _close(f(x, good), fns[op](x, good), 0)
    with pytest.raises(IndexError, match=rf"{op}: index -1 is out of"):
        f(x, tt.tensor([[0, -1], [1, 1]]))


def test_compiled_max_unpool_refuses_an_index_out_of_range_at_replay():
    f = tt.compile(lambda x, i: F.max_unpool1d(x, i, 2))
    x = tt.tensor([[[1.0, 2.0]]])
    good = tt.tensor([[[1, 2]]])
    _close(f(x, good), F.max_unpool1d(x, good, 2), 0)
    with pytest.raises(IndexError, match="max_unpool1d: index 9 is an invalid max index"):
        f(x, tt.tensor([[[1, 9]]]))
