"""What a compiled function's signature must see (issue 22, section 2): every change between
calls that eager would act on either replays a program made for it or compiles a new one.
Each case runs the same calls eagerly and compiled (both backends) and compares bit for bit:
results and the .grad of every tensor involved."""
import math
import warnings

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.compiler import guards

BACKENDS = ["numpy", "c"]


def bits(t):
    return None if t is None else (tuple(t.shape), t.data.tobytes())


def same(a, b):
    assert bits(a) == bits(b), (a, b)


def leaf(values):
    return tt.tensor(np.asarray(values, dtype=np.float32), requires_grad=True)


def twin_linears():
    """Two Linear(3, 2) with the same weights: one for eager steps, one for compiled."""
    tt.manual_seed(0)
    m1 = nn.Linear(3, 2)
    tt.manual_seed(0)
    return m1, nn.Linear(3, 2)


def square_step(x):
    loss = (x * x * 1.5).sum()
    loss.backward()
    return loss


# -- a tensor argument's .grad ------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_an_arguments_grad_goes_to_this_calls_tensor(backend):
    fast = tt.compile(square_step, backend=backend)
    for values in ([1, 2, 3], [4, 5, 6], [-1, 0, 2]):
        e, c = leaf(values), leaf(values)
        same(square_step(e), fast(c))
        same(e.grad, c.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_arguments_grad_accumulates_as_eager(backend):
    fast = tt.compile(square_step, backend=backend)
    e, c = leaf([1, 2, 3]), leaf([1, 2, 3])
    for _ in range(4):
        same(square_step(e), fast(c))
        same(e.grad, c.grad)
    # a fresh tensor with a .grad of its own, then one without: each as eager
    e, c = leaf([7, 8, 9]), leaf([7, 8, 9])
    e.grad, c.grad = tt.ones(3), tt.ones(3)
    square_step(e), fast(c)
    same(e.grad, c.grad)
    e, c = leaf([2, 2, 2]), leaf([2, 2, 2])
    square_step(e), fast(c)
    same(e.grad, c.grad)
    assert len(fast.programs) == 2   # .grad None, and .grad held: one program each


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_arguments_grad_accumulates_at_every_size_with_dynamic_sizes(backend):
    fast = tt.compile(square_step, backend=backend, dynamic=True)
    for n in (3, 5, 5, 7, 4, 9):
        values = np.arange(n) - 1.5
        e, c = leaf(values), leaf(values)
        for _ in range(3):
            same(square_step(e), fast(c))
            same(e.grad, c.grad)
    assert len(fast.programs) == 2   # the .grad it holds has the argument's sizes


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_arguments_grad_beside_a_modules(backend):
    def step(m, x):
        loss = (m(x) * x.sum()).mean()
        loss.backward()
        return loss

    m1, m2 = twin_linears()
    fast = tt.compile(step, backend=backend)
    for k in range(3):
        values = np.arange(6, dtype=np.float32).reshape(2, 3) * (k + 1) / 7
        e, c = leaf(values), leaf(values)
        same(step(m1, e), fast(m2, c))
        same(e.grad, c.grad)
        same(m1.weight.grad, m2.weight.grad)


# -- aliasing ------------------------------------------------------------------------------

def mix(x, y):
    return x * 2 + y


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_tensor_passed_for_two_arguments(backend):
    fast = tt.compile(mix, backend=backend)
    x, y = tt.tensor([1.0, 2.0]), tt.tensor([10.0, 20.0])
    for a, b in [(x, x), (x, y), (y, y), (x, y), (y, x), (x, x)]:
        same(mix(a, b), fast(a, b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_leaf_passed_twice_gets_both_gradients(backend):
    def step(x, y):
        loss = (x * y * 3).sum()
        loss.backward()
        return loss

    fast = tt.compile(step, backend=backend)
    for twice in (True, False, True, False):
        e1, c1 = leaf([1, 2]), leaf([1, 2])
        e2, c2 = (e1, c1) if twice else (leaf([5, -3]), leaf([5, -3]))
        same(step(e1, e2), fast(c1, c2))
        same(e1.grad, c1.grad)
        same(e2.grad, c2.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parameter_passed_as_an_argument(backend):
    def step(m, w):
        return m(w[:1, :]) + w.sum()

    tt.manual_seed(0)
    m = nn.Linear(3, 3)
    fast = tt.compile(step, backend=backend)
    other = tt.tensor(np.full((3, 3), 0.25, dtype=np.float32), requires_grad=True)
    plain = tt.tensor(np.full((3, 3), 0.5, dtype=np.float32))
    shares = tt.Tensor._make(m.weight.data, m.weight.device, False)   # its array, another tensor
    with tt.no_grad():
        for w in (m.weight, other, m.weight, plain, shares, plain, shares):
            same(step(m, w), fast(m, w))


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_one_array_as_two_arguments(backend):
    fast = tt.compile(mix, backend=backend)
    base = np.arange(8, dtype=np.float32)
    cpu = tt.tensor(base).device
    x = tt.Tensor._make(base[:4], cpu, False)
    y = tt.Tensor._make(base[4:], cpu, False)
    z = tt.Tensor._make(base.copy()[4:], cpu, False)
    for a, b in [(x, y), (x, z), (x, y)]:
        same(mix(a, b), fast(a, b))
    assert len(fast.programs) == 2   # apart / sharing memory


# -- plain attributes of modules, hooks ------------------------------------------------------

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.0)
        self.temperature = 1.0
        self.mode = "half"
        self.clip = (-2.0, 2.0)
        self.shift = None

    def forward(self, x):
        h = self.drop(self.lin(x)) / self.temperature
        h = h * 0.5 if self.mode == "half" else h.relu()
        if self.shift is not None:
            h = h + self.shift
        return h.clamp(*self.clip)


def _scaled_pair():
    tt.manual_seed(3)
    a = Scaled()
    tt.manual_seed(3)
    return a, Scaled()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", [
    lambda m: setattr(m, "temperature", 0.25),
    lambda m: setattr(m, "mode", "relu"),
    lambda m: setattr(m, "clip", (-0.1, 0.1)),
    lambda m: setattr(m, "shift", 0.5),
    lambda m: setattr(m.drop, "p", 1.0),
], ids=["float", "str", "tuple", "None -> float", "Dropout.p"])
def test_a_plain_module_attribute_changed_between_calls(backend, change):
    eager, compiled = _scaled_pair()
    fast = tt.compile(compiled, backend=backend)
    x = tt.tensor(np.linspace(-3, 3, 8, dtype=np.float32).reshape(2, 4))
    for k in range(4):
        if k == 2:
            change(eager), change(compiled)
        tt.manual_seed(k)
        e = eager(x)
        tt.manual_seed(k)
        same(e, fast(x))
    assert len(fast.programs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forward_hook_registered_after_the_first_call(backend):
    tt.manual_seed(0)
    m = nn.Linear(3, 3)
    fast = tt.compile(m, backend=backend)
    x = tt.tensor(np.ones((2, 3), dtype=np.float32))
    with tt.no_grad():
        same(m(x), fast(x))
        handle = m.register_forward_hook(lambda mod, args, out: out * 2)
        for _ in range(2):
            same(m(x), fast(x))
        handle.remove()
        same(m(x), fast(x))
    assert len(fast.programs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_hook_registered_after_the_first_call(backend):
    def step(m, x):
        loss = m(x).sum()
        loss.backward()
        return loss

    m1, m2 = twin_linears()
    fast = tt.compile(step, backend=backend)
    x = tt.tensor(np.ones((2, 3), dtype=np.float32))
    for k in range(3):
        if k == 1:
            for m in (m1, m2):
                m.weight.register_hook(lambda g: g * 3)
        for m in (m1, m2):
            m.zero_grad()
        same(step(m1, x), fast(m2, x))
        same(m1.weight.grad, m2.weight.grad)


# -- Python numbers and NumPy arguments --------------------------------------------------------

def scale(x, s):
    return x * s


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_and_negative_zero_are_two_programs(backend):
    fast = tt.compile(scale, backend=backend)
    x = tt.tensor([1.0, -1.0])
    for s in (0.0, -0.0, 0.0, -0.0):
        same(scale(x, s), fast(x, s))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nan_argument_replays(backend):
    fast = tt.compile(scale, backend=backend)
    x = tt.tensor([1.0, -1.0])
    for s in (math.nan, float("nan"), 2.0, math.nan):
        same(scale(x, s), fast(x, s))
    assert len(fast.programs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_numpy_array_argument_changed_in_place(backend):
    def f(x, a):
        return x + tt.tensor(a)

    fast = tt.compile(f, backend=backend)
    x = tt.tensor(np.zeros(3, dtype=np.float32))
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    same(f(x, a), fast(x, a))
    a[:] = 7
    same(f(x, a), fast(x, a))
    same(f(x, a.copy()), fast(x, a.copy()))   # another array of equal contents: replays
    assert len(fast.programs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalars_are_keyed_by_value(backend):
    fast = tt.compile(scale, backend=backend)
    x = tt.tensor([1.0, -3.0])
    for s in (np.float32(2), np.float32(2), np.float32(-0.0), np.float32(5)):
        same(scale(x, s), fast(x, s))
    assert len(fast.programs) == 3


# -- what a recompile says -------------------------------------------------------------------

def _sig(*args):
    return guards.signature(args, {})


def test_the_changed_message_names_the_new_parts():
    m = Scaled()
    x = leaf([1, 2])
    before = _sig(m, x, x, 0.0, np.zeros(2))
    m.drop.p = 0.5
    x.grad = tt.ones(2)
    after = _sig(m, x, leaf([3, 4]), -0.0, np.ones(2))
    said = guards.changed(before, after, limit=None).split("; ")
    assert "arg 0 drop.p 0.0 -> 0.5" in said
    assert "arg 1 .grad None -> ((2,), 'float32')" in said
    assert "tensor arguments tensor 1 is tensor 0 -> apart" in said
    assert "arg 3 value ('float', 0.0) -> ('float', -0.0)" in said
    assert any(d.startswith("arg 4 value array of shape (2,) float64") for d in said)


def test_the_limit_warning_says_which_attribute_changed():
    tt.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0))
    fast = tt.compile(m)
    x = tt.tensor(np.ones((1, 2), dtype=np.float32))
    with tt.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(10):
            m[1].p = k / 10
            fast(x)
    (w,) = [w for w in caught if "limit" in str(w.message)]
    assert "arg 0 1.p 0.7 -> 0.8" in str(w.message)
