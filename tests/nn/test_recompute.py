"""nn.recompute: forward keeps only the inputs, backward reruns fn with the dropout RNG
replayed, so values and gradients are bitwise those of the plain run."""
import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.5)
        self.grad_modes = []

    def forward(self, x, scale):
        self.grad_modes.append(tt.is_grad_enabled())
        return self.drop(F.gelu(self.fc(x))) * scale + x


def _run(use_recompute, seed=0, device="cpu"):
    tt.manual_seed(seed)
    body = Body().double().to(device)
    x = tt.randn(3, 4, 6, dtype=tt.float64, device=device, requires_grad=True)
    y = nn.recompute(body, x, 2.0) if use_recompute else body(x, 2.0)
    (y * y).sum().backward()
    after = tt.rand(5, dtype=tt.float64, device=device)  # the replay must not shift later draws
    return body, x, y, after


def test_values_gradients_and_later_draws_are_bitwise_the_plain_run(device):
    body0, x0, y0, after0 = _run(False, device=device)
    body1, x1, y1, after1 = _run(True, device=device)
    np.testing.assert_array_equal(y1.detach().numpy(), y0.detach().numpy())
    np.testing.assert_array_equal(x1.grad.numpy(), x0.grad.numpy())
    for (name, p0), (_, p1) in zip(body0.named_parameters(), body1.named_parameters()):
        np.testing.assert_array_equal(p1.grad.numpy(), p0.grad.numpy(), err_msg=name)
    np.testing.assert_array_equal(after1.numpy(), after0.numpy())
    assert (y0.detach().numpy() == x0.detach().numpy()).any()  # dropout really dropped something


def test_forward_runs_without_grad_and_backward_reruns_with_it():
    body, _, y, _ = _run(True)
    assert body.grad_modes == [False, True]
    assert y.grad_fn.name == "recompute"


def test_without_inputs_that_need_grad_it_is_a_plain_call():
    body = Body().double()
    with tt.no_grad():
        y = nn.recompute(body, tt.ones(2, 6, dtype=tt.float64), 1.0)
    assert y.grad_fn is None and body.grad_modes == [False]


def test_tuple_outputs_and_unused_outputs():
    x = tt.randn(4, dtype=tt.float64, requires_grad=True)
    a, b = nn.recompute(lambda t: (t * 3.0, t.exp()), x)
    a.sum().backward()                                # b gets no gradient
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 3.0))


def test_double_backward_and_bad_arguments_are_clear_errors():
    x = tt.randn(3, dtype=tt.float64, requires_grad=True)
    y = nn.recompute(lambda t: (t * t).sum(), x)
    with pytest.raises(NotImplementedError, match=r"nn\.recompute: .*create_graph"):
        tt.grad(y, x, create_graph=True)
    with pytest.raises(TypeError, match=r"nn\.recompute: fn must be callable, got Tensor"):
        nn.recompute(x, x)
    with pytest.raises(TypeError, match=r"nn\.recompute: fn must return a Tensor or a tuple of "
                                        r"Tensors, got float"):
        nn.recompute(lambda t: 1.0, x)


class _FakeCupy:
    """Stands in for CuPy to test CudaGenerator's bookkeeping without a GPU: each RandomState
    remembers its seed, and a draw returns that seed."""

    class cuda:
        class curand:
            CURAND_RNG_PSEUDO_PHILOX4_32_10 = 161

        class Device:
            def __init__(self, index):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

    class random:
        class RandomState:
            def __init__(self, seed, method):
                assert method == 161 and 0 <= seed < 2 ** 63
                self.key = seed

            def random_sample(self, shape):
                return self.key


def test_cuda_generator_state_rewinds_its_draws():
    from tinytensor.random import CudaGenerator

    class Dev:
        xp, index = _FakeCupy, 0
    g = CudaGenerator(Dev(), seed=7)
    first = [g.random_sample((2,)) for _ in range(3)]
    assert len(set(first)) == 3 and g.state == (7, 3)
    g.state = (7, 1)
    assert [g.random_sample((2,)) for _ in range(2)] == first[1:]
    assert CudaGenerator(Dev(), seed=8).random_sample((2,)) != first[0]  # other seed, other stream
