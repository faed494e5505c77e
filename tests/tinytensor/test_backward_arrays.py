"""Every op with a fast first-order backward (`backward_arrays`, on raw arrays) agrees with
its `backward` in tinytensor ops, in float64. The list of ops is found by walking the
Function subclasses, so an op that gains a fast form without a sample here fails."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.core.function import Function

RNG = np.random.default_rng(0)


def _t(shape, low=-2.0, high=2.0):
    return tt.tensor(RNG.uniform(low, high, shape), dtype=tt.float64, requires_grad=True)


def _positive(shape):
    return _t(shape, 0.5, 2.0)


# class name -> a function producing the op's output from fresh float64 leaves
SAMPLES = {
    "SumTo": lambda: tt.core.primitives.sum_to(_t((3, 4)), (1, 4)),
    "Expand": lambda: _t((1, 4)).expand(3, 4),
    "Cast": lambda: _t((3,)).to(tt.float32),
    "Mul": lambda: _t((3, 4)) * _t((3, 4)),
    "Div": lambda: _t((3, 4)) / _positive((3, 4)),
    "Neg": lambda: -_t((3,)),
    "PowScalar": lambda: _positive((3, 4)) ** 2.5,
    "Exp": lambda: _t((3, 4)).exp(),
    "Log": lambda: _positive((3, 4)).log(),
    "Log1p": lambda: _positive((3, 4)).log1p(),
    "Sqrt": lambda: _positive((3, 4)).sqrt(),
    "Rsqrt": lambda: _positive((3, 4)).rsqrt(),
    "Sin": lambda: _t((3, 4)).sin(),
    "Cos": lambda: _t((3, 4)).cos(),
    "Tanh": lambda: _t((3, 4)).tanh(),
    "Sigmoid": lambda: _t((3, 4)).sigmoid(),
    "Erf": lambda: _t((3, 4)).erf(),
    "Silu": lambda: F.silu(_t((3, 4))),
    "Abs": lambda: _t((3, 4)).abs(),
    "Relu": lambda: _t((3, 4)).relu(),
    "LeakyRelu": lambda: F.leaky_relu(_t((3, 4)), 0.1),
    "Gelu": [lambda: F.gelu(_t((3, 4))), lambda: F.gelu(_t((3, 4)), approximate="tanh")],
    "Softplus": lambda: F.softplus(_t((3, 4)) * 10, beta=2.0, threshold=5.0),
    "Softsign": lambda: F.softsign(_t((3, 4)) * 3),
    "Maximum": lambda: tt.maximum(_t((3, 4)), tt.tensor(np.r_[0.0, 1.0, -1.0, 0.5], dtype=tt.float64,
                                                          requires_grad=True).expand(3, 4)),
    "Minimum": lambda: tt.minimum(_t((3, 4)), _t((3, 4))),
    "ClampScalar": lambda: _t((3, 4)).clamp(-0.5, 0.7),
    "Where": lambda: tt.where(_t((3, 4)) > 0, _t((3, 4)), _t((3, 4))),
    "Remainder": lambda: _t((3, 4)) % _positive((3, 4)),
    "Floor": lambda: _t((3,)).floor(),
    "Ceil": lambda: _t((3,)).ceil(),
    "Trunc": lambda: _t((3,)).trunc(),
    "Round": lambda: _t((3,)).round(),
    "Softmax": [lambda: _t((3, 5)).softmax(-1), lambda: _t((3, 5)).softmax(0)],
    "LogSoftmax": [lambda: _t((3, 5)).log_softmax(-1), lambda: _t((3, 5)).log_softmax(0)],
    "LayerNormCore": lambda: F.layer_norm(_t((3, 2, 5)), (2, 5)),
    "RMSNormCore": lambda: F.rms_norm(_t((3, 2, 5)), (5,)),
}


def _with_fast_form():
    seen, stack = [], list(Function.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.backward_arrays is not None and cls.forward is not Function.forward:
            seen.append(cls)
    return sorted(set(seen), key=lambda c: c.__name__)


def test_every_fast_form_has_a_sample():
    missing = [c.__qualname__ for c in _with_fast_form() if c.__name__ not in SAMPLES]
    assert not missing, f"ops with backward_arrays but no sample input in SAMPLES: {missing}"


@pytest.mark.parametrize("cls", _with_fast_form(), ids=lambda c: c.__name__)
def test_backward_arrays_equals_backward(cls):
    samples = SAMPLES[cls.__name__]
    for make in samples if isinstance(samples, list) else [samples]:
        with tt.kernels.use_fusion(False):  # the reference ops, not the fused kernels
            out = make()
        node = out.grad_fn
        assert node is not None and node.fn is cls, f"sample for {cls.__name__} ran {node}"
        g = RNG.standard_normal(out.shape).astype(out.data.dtype)
        with tt.no_grad():
            slow = cls.backward(node, tt.tensor(g, dtype=out.dtype))
        fast = cls.backward_arrays(node, g)
        slow = slow if isinstance(slow, tuple) else (slow,)
        fast = fast if isinstance(fast, tuple) else (fast,)
        assert len(slow) == len(fast)
        for k, (s, f) in enumerate(zip(slow, fast)):
            assert (s is None) == (f is None), f"{cls.__name__}: input {k}"
            if s is not None:
                np.testing.assert_allclose(np.broadcast_to(f, s.shape), s.numpy(), rtol=1e-12,
                                           atol=1e-14, err_msg=f"{cls.__name__} input {k}")
                assert f.dtype == s.data.dtype, f"{cls.__name__} input {k}: {f.dtype} vs {s.dtype}"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_first_order_gelu_backward_records_no_ops(approximate):
    x = _t((4, 8))
    y = F.gelu(x, approximate=approximate)
    with tt.record() as tape:
        y.backward(tt.ones_like(y))
    assert len(tape) == 0, tape
    x2 = x.detach().requires_grad_()
    (g,) = tt.grad(F.gelu(x2, approximate=approximate), x2, tt.ones_like(y), create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), x.grad.numpy(), rtol=1e-12)
