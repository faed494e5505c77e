"""The per-call path of tt.compile: the label-free guard key (guards.call_key) must check
everything the labelled signature does, so a change made between calls recompiles or
replays exactly as eager would run."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.compiler import guards

from .helpers import mlp, mse_step, training_step


def _key_pair(*args, cleared=frozenset(), **kwargs):
    return guards.call_key(args, kwargs, (), cleared), guards.key(guards.signature(args, kwargs, (), cleared))


class _Twice(nn.Module):
    """A submodule registered twice and a parameter shared by two layers, a None parameter
    and buffer: named_modules / named_parameters list each once."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a
        self.c = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.c[0].weight = self.a.weight
        self.register_parameter("none", None)
        self.register_buffer("running", tt.zeros(4))
        self.register_buffer("empty", None)


class _Hiding(nn.Module):
    """Walks its parameters its own way: the key must follow its named_parameters."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def named_parameters(self, prefix="", recurse=True):
        yield "l.weight", self.l.weight


@pytest.mark.parametrize("make", [mlp, _Twice, _Hiding, lambda: nn.Sequential(_Hiding(), nn.ReLU())])
def test_call_key_is_the_labelled_signature_key(make):
    m = make()
    opt = nn.optim.AdamW(list(m.parameters()), lr=1e-3)
    x = tt.randn(2, 4)
    nested = {"xs": [x, 3, "s"], "t": (x, None)}
    fast, slow = _key_pair(m, opt, x, 2.0, nested, flag=True)
    assert fast == slow
    next(m.parameters()).grad = tt.ones_like(next(m.parameters()))
    m.eval()
    fast2, slow2 = _key_pair(m, opt, x, 2.0, nested, flag=True)
    assert fast2 == slow2 and fast2 != fast


def test_overridden_traversal_is_followed_by_the_call_key():
    m = _Hiding()
    fast, _ = _key_pair(m)
    m.l.bias.requires_grad_(False)   # hidden from its named_parameters: not in the signature
    assert _key_pair(m)[0] == fast
    m.l.weight.requires_grad_(False)
    assert _key_pair(m)[0] != fast


def _flip_case(change):
    """Two equal models, one run eagerly, one compiled; `change` is applied to both after a
    capture and a replay; the next 3 calls must agree bitwise (results and .grads). Returns
    the programs compiled before the change and after the first call following it."""
    m1, m2 = mlp(), mlp()
    step = tt.compile(mse_step)
    tt.manual_seed(5)
    x, y = tt.randn(8, 16), tt.randn(8, 4)
    mse_step(m1, x, y), step(m2, x, y)
    step(m2, x, y), mse_step(m1, x, y)   # a replay, then the change
    change(m1), change(m2)
    before = len(step.programs)
    for k in range(3):
        e, c = mse_step(m1, x, y), step(m2, x, y)
        assert e.data.tobytes() == c.data.tobytes()
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            assert (p1.grad is None) == (p2.grad is None)
            if p1.grad is not None:
                assert p1.grad.data.tobytes() == p2.grad.data.tobytes()
        if k == 0:
            after = len(step.programs)
    return before, after


def _replace_parameter(m):
    m[0].weight = nn.Parameter(tt.tensor(m[0].weight.data * 2))


def _add_submodule(m):
    tt.manual_seed(7)  # the same new layer in both models
    m.add_module("3", nn.Linear(4, 4))


def _set_grad(m):
    for p in m.parameters():
        p.grad = tt.ones_like(p)


def _clear_grad(m):
    for p in m.parameters():
        p.grad = None


@pytest.mark.parametrize("change", [_replace_parameter, _add_submodule, lambda m: m.eval(),
                                    lambda m: m[2].bias.requires_grad_(False)],
                         ids=["parameter replaced", "submodule added", "eval", "requires_grad off"])
def test_a_module_change_between_calls_recompiles(change):
    before, after = _flip_case(change)
    assert after == before + 1   # the program captured before the change is not replayed


@pytest.mark.parametrize("change", [_set_grad, _clear_grad], ids=[".grad set", ".grad cleared"])
def test_a_grad_set_or_cleared_between_calls_replays_like_eager(change):
    _flip_case(change)  # a .grad of the same shape, or none: a program it already has


def test_training_step_with_zero_grad_keeps_one_program():
    # the cleared .grads are left out of the key: the second call replays, not recompiles
    m = mlp()
    opt = nn.optim.SGD(m.parameters(), lr=0.1)
    step = tt.compile(training_step(lambda m, x, y: ((m(x) - y) ** 2).mean()))
    x, y = tt.randn(8, 16), tt.randn(8, 4)
    for _ in range(3):
        step(m, opt, x, y)
    assert len(step.programs) == 1


def test_a_replay_on_a_non_contiguous_argument_reads_it_as_eager_does():
    # the kernels skip layout checks only for arrays the runner made itself: an argument
    # may come in any layout at any call
    def f(x, w):
        return ((x * 1.5 + 0.5) * w).relu() - x

    step = tt.compile(f, backend="c")
    rng = np.random.default_rng(4)
    a, w = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    step(tt.tensor(a), tt.tensor(w))
    cpu = tt.tensor(a).device
    for view in (np.ascontiguousarray(a.T).T, a[::-1], a[:, None, :][:, 0]):
        x = tt.Tensor._make(view, cpu, False)   # as it is: tt.tensor would copy it
        assert not view.flags.c_contiguous or view.base is not None
        assert step(x, tt.tensor(w)).data.tobytes() == f(x, tt.tensor(w)).data.tobytes()
    assert len(step.programs) == 1
