"""Every op with a fast first-order backward (`backward_arrays`, on raw arrays) agrees with
its `backward` in tinytensor ops, in float64. The list of ops is found by walking the
Function subclasses, so an op that gains a fast form without a sample here fails. The fused
ops (tinytensor/ops/{softmax,norms,batch_norm,cross_entropy,attention}.py) are among them: their
one-pass array backward against their op-level backward, the reference formula."""
import sys

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.core.function import Function
from tinytensor.ops.recurrent import gru_cell, lstm_cell

RNG = np.random.default_rng(0)


_DTYPE = tt.float64   # of the samples' leaves (a test below sets float32)


def _t(shape, low=-2.0, high=2.0):
    return tt.tensor(RNG.uniform(low, high, shape), dtype=_DTYPE, requires_grad=True)


def _positive(shape):
    return _t(shape, 0.5, 2.0)


# class name -> a function producing the op's output from fresh float64 leaves
def _shared_matmul(a_shape):
    """tt.func.vmap's product of a batch with a weight lifted into it (a stride-0 expand)."""
    from tinytensor.func.batching_rules import SharedMatmul
    return SharedMatmul.apply(_t(a_shape), _t((4, 5)).unsqueeze(0).expand(3, 4, 5))


SAMPLES = {
    "SharedMatmul": [lambda: _shared_matmul((3, 2, 4)), lambda: _shared_matmul((3, 4))],
    "Add": [lambda: _t((3, 4)) + _t((3, 4)), lambda: _t((3, 4)) + _t((4,))],
    "Sub": [lambda: _t((3, 4)) - _t((3, 4)), lambda: _t((3, 4)) - _t((3, 1))],
    "Cumsum": [lambda: _t((3, 4)).cumsum(-1), lambda: _t((3, 4)).cumsum(0)],
    "Sum": [lambda: _t((3, 4)).sum(), lambda: _t((3, 4, 5)).sum(1),
            lambda: _t((3, 4)).sum(0, keepdim=True), lambda: _t((2, 3, 4)).sum((0, 2))],
    "SumTo": lambda: tt.core.primitives.sum_to(_t((3, 4)), (1, 4)),
    "Reshape": [lambda: _t((3, 4)).reshape(2, 6), lambda: _t((3, 4)).mT.reshape(12)],
    "Permute": [lambda: _t((2, 3, 4)).permute(2, 0, 1), lambda: _t((3, 4)).mT],
    "Clone": lambda: _t((3, 4)).clone(),
    "MatMul": [lambda: _t((3, 4)) @ _t((4, 5)), lambda: _t((2, 3, 4)) @ _t((4, 5)),
               lambda: _t((2, 1, 3, 4)) @ _t((3, 4, 2))],
    "GetItem": [lambda: _t((3, 4))[1:, ::2], lambda: _t((3, 4, 2))[..., 1, None]],
    "GetItemCopy": [lambda: _t((3, 4))[tt.tensor([0, 2, 0])], lambda: _t((3, 4))[_t((3, 4)) > 0]],
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
    "LstmCell": lambda: lstm_cell(_t((3, 8)), _t((3, 2))),
    "GruCell": lambda: gru_cell(_t((3, 6)), _t((3, 6)), _t((3, 2))),
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
    "RoundDecimals": lambda: _t((3,)).round(decimals=2),
    "Softmax": [lambda: _t((3, 5)).softmax(-1), lambda: _t((3, 5)).softmax(0)],
    "LogSoftmax": [lambda: _t((3, 5)).log_softmax(-1), lambda: _t((3, 5)).log_softmax(0)],
    "LayerNormCore": lambda: F.layer_norm(_t((3, 2, 5)), (2, 5)),
    "RMSNormCore": lambda: F.rms_norm(_t((3, 2, 5)), (5,)),
    # the fused ops (run with fusion on): their array backward against their op-level one
    "FusedSoftmax": lambda: _t((3, 5)).softmax(-1),
    "FusedLogSoftmax": lambda: _t((3, 5)).log_softmax(-1),
    "FusedNorm": [lambda: F.layer_norm(_t((3, 2, 5)), (2, 5), _t((2, 5)), _t((2, 5))),
                  lambda: F.layer_norm(_t((3, 5)), (5,))],
    "FusedRMSNorm": [lambda: F.rms_norm(_t((3, 2, 5)), (5,), _t((5,))), lambda: F.rms_norm(_t((3, 5)), (5,))],
    # at the C kernels' sizes (c_eager.MIN_ELEMENTS): smaller calls run the reference ops
    "BatchNormTrain": [lambda: F.batch_norm(_t((4, 8, 32, 32)), None, None, _t((8,)), _t((8,)), training=True),
                       lambda: F.batch_norm(_t((2, 4, 64, 64)), None, None, training=True)],
    "FusedCrossEntropy": [
        lambda: F.cross_entropy(_t((4, 5)), tt.tensor([0, 3, -100, 4]), ignore_index=-100),
        lambda: F.cross_entropy(_t((4, 5, 3)), tt.tensor(RNG.integers(0, 5, (4, 3))), reduction="none",
                                weight=tt.tensor(RNG.uniform(0.5, 2, 5)), label_smoothing=0.1),
        lambda: F.cross_entropy(_t((5,)), tt.tensor(2), reduction="sum", label_smoothing=0.2)],
    "FlashAttention": [
        lambda: F.scaled_dot_product_attention(_t((2, 4, 5, 3)), _t((2, 2, 6, 3)), _t((2, 2, 6, 3)),
                                               is_causal=True, enable_gqa=True),
        lambda: F.scaled_dot_product_attention(_t((2, 5, 3)), _t((2, 6, 3)), _t((2, 6, 3)),
                                               attn_mask=tt.tensor(RNG.uniform(size=(5, 6)) < 0.6)),
        lambda: F.scaled_dot_product_attention(_t((2, 5, 3)), _t((2, 6, 3)), _t((2, 6, 3)),
                                               attn_mask=tt.tensor(RNG.uniform(-1, 0, (5, 6))))],
    "Conv": lambda: F.conv2d(_t((2, 4, 7, 6)), _t((6, 2, 3, 2)), stride=(2, 1), padding=1, dilation=(1, 2),
                             groups=2),
    "ConvTranspose": lambda: F.conv_transpose2d(_t((2, 4, 5, 4)), _t((4, 3, 3, 2)), stride=2, padding=1,
                                                output_padding=1, groups=2),
    "ConvWeight": lambda: tt.ops.conv.ConvWeight.apply(_t((2, 4, 9)), _t((2, 6, 4)), kernel_size=(3,), stride=(2,),
                                                       pads=((1, 0),), dilation=(1,), groups=2),
    # ops/math_functions.py
    "Tan": lambda: tt.tan(_t((3, 4)) * 0.7),
    "Asin": lambda: tt.asin(_t((3, 4)) * 0.45),
    "Acos": lambda: tt.acos(_t((3, 4)) * 0.45),
    "Atan": lambda: tt.atan(_t((3, 4))),
    "Sinh": lambda: tt.sinh(_t((3, 4))),
    "Cosh": lambda: tt.cosh(_t((3, 4))),
    "Asinh": lambda: tt.asinh(_t((3, 4))),
    "Acosh": lambda: tt.acosh(_positive((3, 4)) + 1.0),
    "Atanh": lambda: tt.atanh(_t((3, 4)) * 0.45),
    "Log2": lambda: tt.log2(_positive((3, 4))),
    "Log10": lambda: tt.log10(_positive((3, 4))),
    "Exp2": lambda: tt.exp2(_t((3, 4))),
    "Expm1": lambda: tt.expm1(_t((3, 4))),
    "Atan2": lambda: tt.atan2(_t((3, 4)), tt.tensor(np.r_[0.0, 1.0, -1.0, 0.5], dtype=tt.float64, requires_grad=True)),
    "Hypot": lambda: tt.hypot(_t((3, 4)), _t((4,))),
    "Logaddexp": lambda: tt.logaddexp(_t((3, 4)) * 5, _t((3, 1))),
    "Logaddexp2": lambda: tt.logaddexp2(_t((3, 4)) * 5, _t((3, 1))),
    "Copysign": lambda: tt.copysign(tt.tensor(np.r_[0.0, -0.0, 1.5, -2.0], dtype=tt.float64, requires_grad=True), _t((3, 4))),
    "Fmod": lambda: tt.fmod(_t((3, 4)) * 3, _positive((4,))),
    "Lerp": [lambda: tt.lerp(_t((3, 4)), _t((4,)), _t((3, 1))), lambda: tt.lerp(_t((3, 4)), _t((3, 4)), 0.7)],
    # ops/activations.py (corners 0, +-3 and the bounds included)
    "Elu": lambda: F.elu(tt.cat([_t((6,)), tt.tensor([0.0, -3.0], dtype=tt.float64, requires_grad=True)]), 0.5),
    "Selu": lambda: F.selu(_t((3, 4))),
    "Celu": lambda: F.celu(_t((3, 4)), 2.0),
    "Mish": lambda: F.mish(_t((3, 4)) * 3),
    "Hardswish": lambda: F.hardswish(tt.cat([_t((6,)) * 3, tt.tensor([-3.0, 3.0], dtype=tt.float64, requires_grad=True)])),
    "Hardsigmoid": lambda: F.hardsigmoid(_t((3, 4)) * 3),
    "Hardtanh": lambda: F.hardtanh(tt.cat([_t((6,)), tt.tensor([-1.0, 1.0], dtype=tt.float64, requires_grad=True)])),
    "Relu6": lambda: F.relu6(_t((3, 4)) * 5),
    "Logsigmoid": lambda: F.logsigmoid(_t((3, 4)) * 5),
    # ops/cumulative.py
    "Cumprod": [lambda: tt.cumprod(_t((3, 5)), 1),
                lambda: tt.cumprod(tt.tensor([[2.0, 0.0, 3.0, 0.0], [0.0, 1.0, 2.0, 3.0]], dtype=tt.float64,
                                             requires_grad=True), -1)],
    "Logcumsumexp": [lambda: tt.logcumsumexp(_t((3, 5)) * 5, 0),
                     lambda: tt.logcumsumexp(tt.tensor([-np.inf, 1.0, -np.inf, 2.0], dtype=tt.float64,
                                                       requires_grad=True), 0)],
    # ops/scatter.py, ops/diagonal.py, ops/shape_ops.py (repeated indices, ties and zeros included)
    "Scatter": lambda: _t((3, 4)).scatter(0, tt.tensor([[0, 2, 1, 2], [1, 0, 2, 0]]), _t((2, 4))),
    "ScatterReduce": [
        lambda red=red, inc=inc: _t((3, 4)).scatter_reduce(0, tt.tensor([[0, 2, 2, 1], [0, 0, 0, 1]]),
                                                         _t((2, 4)), red, include_self=inc)
        for red in ("sum", "mean", "prod", "amax", "amin") for inc in (True, False)] + [
        lambda: tt.tensor([[1.0, 0.0, 2.0, 3.0], [0.5, 2.0, 1.5, 0.0]], dtype=tt.float64, requires_grad=True)
        .scatter_reduce(0, tt.tensor([[0, 1, 0, 1], [1, 1, 1, 0]]),
                        tt.tensor([[0.0, 2.0, 3.0, 1.5], [0.5, 2.0, 0.0, 3.0]], dtype=tt.float64,
                                  requires_grad=True), "prod"),
        lambda: tt.tensor([1.0, 5.0, 3.0], dtype=tt.float64, requires_grad=True).scatter_reduce(
            0, tt.tensor([0, 0, 1, 2]), tt.tensor([1.0, 1.0, 7.0, 3.0], dtype=tt.float64, requires_grad=True),
            "amax")],
    "Diagonal": lambda: _t((2, 3, 4)).diagonal(1, 2, 0),
    "DiagonalPut": lambda: _t((2, 3)).diag_embed(-1, 0, 2),
    "Im2Col": lambda: F.unfold(_t((2, 2, 5, 6)), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
    "Col2Im": lambda: F.fold(_t((2, 12, 15)), (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
    # one call of a compiled function (compiler/aot.py): its backward runs the compiled program
    "CompiledCall": lambda: tt.compile(lambda x, y: (x * y).sin() + x, backend="numpy")(
        _t((3, 4)), _t((4,))),
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


def _summed(a, shape):
    """a (of shape or broadcast from it) summed back to shape, as the engine's sum_to."""
    a = np.broadcast_to(a, np.broadcast_shapes(np.shape(a), shape))
    a = a.sum(axis=tuple(range(a.ndim - len(shape)))) if a.ndim > len(shape) else a
    return a.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1), keepdims=True)


@pytest.mark.parametrize("cls", _with_fast_form(), ids=lambda c: c.__name__)
def test_backward_arrays_equals_backward(cls):
    samples = SAMPLES[cls.__name__]
    for make in samples if isinstance(samples, list) else [samples]:
        # a fused op's sample runs with fusion on, every other op's with it off (the reference
        # ops, which the fused ones would otherwise replace)
        with tt.kernels.use_fusion(getattr(cls, "fusion", None) == "fused"):
            out = make()
        outs = out if isinstance(out, tuple) else (out,)   # a multi-output op: a gradient each
        node = outs[0].grad_fn
        assert node is not None and node.fn is cls, f"sample for {cls.__name__} ran {node}"
        gs = [RNG.standard_normal(o.shape).astype(o.data.dtype) for o in outs]
        with tt.no_grad():
            slow = cls.backward(node, *[tt.tensor(g, dtype=o.dtype) for g, o in zip(gs, outs)])
        fast = cls.backward_arrays(node, *gs)
        slow = slow if isinstance(slow, tuple) else (slow,)
        fast = fast if isinstance(fast, tuple) else (fast,)
        assert len(slow) == len(fast)
        for k, (s, f) in enumerate(zip(slow, fast)):
            assert (s is None) == (f is None), f"{cls.__name__}: input {k}"
            if s is not None:  # either may be of the broadcast shape: the engine sums both
                shape = node.in_meta[k][0]
                np.testing.assert_allclose(_summed(f, shape), _summed(s.numpy(), shape), rtol=1e-12,
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


@pytest.mark.parametrize("fusion", [True, False])
def test_softmax_backward_in_ops_is_as_accurate_as_on_arrays(fusion):
    # found by the tt.compile fuzzer (issue 22 §7): a compiled step records `backward`, which
    # computed g*y - y*sum(g*y), rounding both terms before they cancel: 11x eager's float32
    # error on these values (softmax over a dim where g = 2y ~ sum(g*y))
    rng = np.random.default_rng(77002)
    a, w = rng.standard_normal((3, 1)), rng.standard_normal((1, 8))

    def grad(dtype, create_graph):
        x = tt.tensor(a.astype(dtype))
        p = tt.tensor(w.astype(dtype), requires_grad=True)
        with tt.kernels.use_fusion(fusion):
            y = ((-x) @ p).sum(dim=-2).softmax(dim=0)
            (y * y).sum().backward(create_graph=create_graph)
        return p.grad.detach().numpy().astype(np.float64)
    exact = grad(np.float64, False)
    arrays = np.abs(grad(np.float32, False) - exact).max()
    in_ops = np.abs(grad(np.float32, True) - exact).max()
    assert in_ops <= 2 * arrays + 4 * np.finfo(np.float32).eps * np.abs(exact).max()


@pytest.mark.parametrize("rms", [False, True])
def test_norm_backward_in_ops_is_as_accurate_as_on_arrays(rms):
    # found by the tt.compile fuzzer (issue 22, seed 100074): a compiled step records
    # `backward`, which rebuilt xhat from x in ops; on rows whose variance is tiny beside eps
    # its mean rounds apart from the forward's, and that shift is all of xhat's small part:
    # 7x eager's float32 error in the gradient. Now it uses the forward's xhat, as eager does
    rng = np.random.default_rng(12)
    a = 3.0 + 3e-3 * rng.standard_normal((6, 5))            # nearly constant rows
    c = rng.standard_normal((6, 5))
    norm = (lambda t: F.rms_norm(t, (5,))) if rms else (lambda t: F.layer_norm(t, (5,)))

    def grad(dtype, create_graph):
        x = tt.tensor(a.astype(dtype), requires_grad=True)
        with tt.kernels.use_fusion(False):
            y = norm(x)
            (y * tt.tensor(c.astype(dtype)) + y * y).sum().backward(create_graph=create_graph)
        return x.grad.detach().numpy().astype(np.float64)
    exact = grad(np.float64, False)
    arrays = np.abs(grad(np.float32, False) - exact).max()
    in_ops = np.abs(grad(np.float32, True) - exact).max()
    assert in_ops <= 2 * arrays + 4 * np.finfo(np.float32).eps * np.abs(exact).max(), (in_ops, arrays)


@pytest.mark.parametrize("rms", [False, True])
def test_norm_backward_in_ops_differentiates_again_as_torch(rms):
    import torch
    rng = np.random.default_rng(3)
    a, c = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))

    def tt_side():
        x = tt.tensor(a, requires_grad=True)
        with tt.kernels.use_fusion(False):
            y = F.rms_norm(x, (6,)) if rms else F.layer_norm(x, (6,))
            (g,) = tt.grad((y * tt.tensor(c)).sum(), [x], create_graph=True)
            (gg,) = tt.grad((g * g).sum(), [x])
        return g.detach().numpy(), gg.numpy()

    x = torch.tensor(a, requires_grad=True)
    y = torch.nn.functional.rms_norm(x, (6,)) if rms else torch.nn.functional.layer_norm(x, (6,))
    (g,) = torch.autograd.grad((y * torch.tensor(c)).sum(), [x], create_graph=True)
    (gg,) = torch.autograd.grad((g * g).sum(), [x])
    got_g, got_gg = tt_side()
    np.testing.assert_allclose(got_g, g.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_gg, gg.numpy(), rtol=1e-9, atol=1e-11)


BITWISE = ["Reshape", "Permute", "Clone", "MatMul", "GetItem", "GetItemCopy"]


@pytest.mark.parametrize("name", BITWISE)
def test_movement_and_matmul_fast_forms_give_backwards_bits(name, monkeypatch):
    # these fast forms run the very forward their backward's ops would run, so in float32 (not
    # only float64 within a tolerance, above) they give its bits, and the gradients of a whole
    # backward with and without them agree exactly
    monkeypatch.setattr(sys.modules[__name__], "_DTYPE", tt.float32)
    cls = next(c for c in _with_fast_form() if c.__name__ == name)
    samples = SAMPLES[name]
    for make in samples if isinstance(samples, list) else [samples]:
        with tt.kernels.use_fusion(False):
            out = make()
        node = out.grad_fn
        assert node.fn is cls and out.dtype is tt.float32, node
        g = RNG.standard_normal(out.shape).astype(np.float32)
        with tt.no_grad():
            slow = cls.backward(node, tt.tensor(g))
        fast = cls.backward_arrays(node, g)
        slow = slow if isinstance(slow, tuple) else (slow,)
        fast = fast if isinstance(fast, tuple) else (fast,)
        for s, f in zip(slow, fast):
            assert (s is None) == (f is None)
            if s is not None:
                assert f.dtype == s.data.dtype == np.float32 and f.shape == s.shape
                np.testing.assert_array_equal(f, s.numpy())


def test_not_implemented_fast_form_runs_backward():
    # a backward_arrays that does not serve a call hands it to backward on Tensors
    calls = []

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            calls.append("backward")
            return 2 * g

        @staticmethod
        def backward_arrays(ctx, g):
            calls.append("arrays")
            return NotImplemented

    x = _t((3,))
    Twice.apply(x).sum().backward()
    assert calls == ["arrays", "backward"]
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))


def test_a_square_written_x_times_x_gives_each_factor_the_same_product():
    # Mul's fast backward computes g * x once for both factors of x * x; the engine adds the
    # two: 2 (g x), the bits of g * x + x * g, and a hook on x sees the sum once
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 33)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    X = tt.tensor(x, requires_grad=True)
    seen = []
    X.register_hook(lambda gr: seen.append(gr.numpy().copy()))
    (X * X).backward(tt.tensor(g))
    assert np.array_equal(X.grad.numpy(), g * x + x * g)
    assert len(seen) == 1 and np.array_equal(seen[0], X.grad.numpy())
    Y = tt.tensor(x, requires_grad=True)
    Z = Y.detach().requires_grad_()   # another leaf on the very same array: two gradients
    assert Z.data is Y.data
    (Y * Z).backward(tt.tensor(g))
    assert np.array_equal(Y.grad.numpy(), g * x) and np.array_equal(Z.grad.numpy(), g * x)
    Y.grad.numpy()[0, 0] = 1e9   # the two .grad arrays are not one array
    assert Z.grad.numpy()[0, 0] != 1e9
