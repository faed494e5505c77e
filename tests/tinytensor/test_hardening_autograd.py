"""Issue 9 (hardening) for the engine's edges: what hooks and custom Functions may return,
optimizer help, numbers in messages, and compare_with_torch without PyTorch."""
import inspect
import re
import sys

import numpy as np
import pytest
import torch

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.nn import init, optim
from tinytensor.testing import compare_with_torch


def _fake_cuda_tensor(*shape):
    """A tensor that claims to live on cuda:0 (its array is NumPy): enough for a device check."""
    return tt.Tensor._make(np.ones(shape, np.float32), tt.Device("cuda:0"), False)


# ------------------------------------------------------------------ tensor hooks
def _hooked_run(lib, hook, backward, where):
    """y = 2x, then (3y).sum(); the hook on x (a leaf) or on y (an op's output)."""
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    (x if where == "leaf" else y).register_hook(hook)
    z = (y * 3).sum()
    if backward == "grad":
        (tt.grad if lib is tt else torch.autograd.grad)(z, x)
    else:
        z.backward()
    return x


# (name, hook for tinytensor, hook for torch, exception both raise, what the message says)
BAD_HOOKS = [
    ("shape", lambda g: tt.ones(4), lambda g: torch.ones(4), RuntimeError,
     r"returned a gradient of shape \(4,\); it must keep the gradient's shape \(3,\)"),
    ("broadcastable_shape", lambda g: tt.ones(1, 3), lambda g: torch.ones(1, 3), RuntimeError,
     r"returned a gradient of shape \(1, 3\)"),
    ("scalar", lambda g: tt.tensor(1.0), lambda g: torch.tensor(1.0), RuntimeError,
     r"returned a gradient of shape \(\)"),
    ("dtype", lambda g: g.double(), lambda g: g.double(), RuntimeError,
     r"returned a gradient of dtype float64; it must keep the gradient's dtype float32"),
    ("int_dtype", lambda g: g.long(), lambda g: g.long(), RuntimeError,
     r"dtype int64; it must keep the gradient's dtype float32"),
    ("ndarray", lambda g: np.ones(3, np.float32), lambda g: np.ones(3, np.float32), TypeError,
     r"returned numpy\.ndarray; a hook must return None or a Tensor"),
    ("float", lambda g: 1.0, lambda g: 1.0, TypeError, r"returned float; a hook must return None"),
]


@pytest.mark.parametrize("where", ["leaf", "nonleaf"])
@pytest.mark.parametrize("backward", ["backward", "grad"])
@pytest.mark.parametrize("name,tt_hook,th_hook,exc,pattern", BAD_HOOKS, ids=[b[0] for b in BAD_HOOKS])
def test_bad_hook_result_raises_like_torch(name, tt_hook, th_hook, exc, pattern, where, backward):
    with pytest.raises(exc):
        _hooked_run(torch, th_hook, backward, where)
    with pytest.raises(exc, match=r"hook '.*<lambda>' registered on .*" + pattern) as info:
        _hooked_run(tt, tt_hook, backward, where)
    assert "np." not in str(info.value)


def test_bad_leaf_hook_leaves_grad_untouched():
    x = tt.ones(3, requires_grad=True)
    x.register_hook(lambda g: tt.ones(4))
    with pytest.raises(RuntimeError):
        (x * 2).sum().backward()
    assert x.grad is None  # before: a (4,) gradient for a (3,) leaf, accepted silently


def test_hook_error_names_the_hook_and_the_leaf_parameter():
    lin = nn.Linear(3, 2)
    lin(tt.ones(1, 3))  # calling the module names its parameters

    def widen(g):
        return tt.ones(5, 3)

    lin.weight.register_hook(widen)
    with pytest.raises(RuntimeError) as info:
        lin(tt.ones(1, 3)).sum().backward()
    msg = str(info.value)
    assert f"hook '{widen.__qualname__}'" in msg
    assert "leaf tensor 'weight' (shape (2, 3), float32)" in msg
    assert "returned a gradient of shape (5, 3)" in msg


def test_nonleaf_hook_shape_error_blames_the_hook_not_the_op():
    class Doubler:  # a callable object: named by its class
        def __call__(self, g):
            return tt.ones(4)

    x = tt.ones(3, requires_grad=True)
    with tt.module_scope("blocks.0.mlp"):
        y = x.exp()
    y.register_hook(Doubler())
    with pytest.raises(RuntimeError) as info:
        (y * 3).sum().backward()
    msg = str(info.value)
    assert msg.startswith(f"hook '{Doubler.__qualname__}' registered on the output of op 'exp' "
                          "in blocks.0.mlp (shape (3,), float32)")
    assert "backward of op" not in msg  # before: "backward of op 'exp' returned a gradient ..."


class SplitHalves(tt.Function):
    @staticmethod
    def forward(ctx, x):
        return x[:2].copy(), x[2:].copy()

    @staticmethod
    def backward(ctx, g0, g1):
        return tt.cat([g0, g1])


def test_hook_on_one_output_of_a_multi_output_op_names_which():
    x = tt.tensor([3.0, 1.0, 2.0], requires_grad=True)
    _, tail = SplitHalves.apply(x)
    tail.register_hook(lambda g: g.double())
    with pytest.raises(RuntimeError, match=r"on output 1 of op 'split_halves' \(shape \(1,\), "
                                           r"float32\) returned a gradient of dtype float64"):
        tail.sum().backward()


def test_hook_changing_device_raises():
    x = tt.ones(2, 3, requires_grad=True)
    x.register_hook(lambda g: _fake_cuda_tensor(2, 3))
    with pytest.raises(RuntimeError, match=r"returned a gradient on device cuda:0; it must keep "
                                           r"the gradient's device cpu"):
        (x * 2).sum().backward()
    assert x.grad is None


def test_chained_hooks_each_checked_and_good_ones_still_apply():
    x = tt.ones(3, requires_grad=True)
    x.register_hook(lambda g: g * 2)
    x.register_hook(lambda g: None)
    x.register_hook(lambda g: g + 1)
    (x * 1.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 4.0))


# ------------------------------------------------------------------ custom Function backward
def _function_returning(result):
    class Scale(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return result(g)

    return Scale


@pytest.mark.parametrize("result,pos,type_name", [
    (lambda g: (g.numpy(), g), 0, "numpy.ndarray"),
    (lambda g: (g, np.ones(3)), 1, "numpy.ndarray"),
    (lambda g: (2.0, g), 0, "float"),
    (lambda g: [g, [1.0, 2.0, 3.0]], 1, "list"),
], ids=["ndarray_first", "ndarray_second", "float", "list"])
def test_function_backward_returning_non_tensor_says_what_it_must_return(result, pos, type_name):
    fn = _function_returning(result)
    a, b = tt.ones(3, requires_grad=True), tt.ones(3, requires_grad=True)
    with pytest.raises(TypeError) as info:
        fn.apply(a, b).sum().backward()
    msg = str(info.value)
    assert f"{fn.__qualname__}.backward" in msg
    assert f"returned {type_name} at position {pos}" in msg
    assert "a Tensor or None for each of the 2 tensor inputs of forward" in msg
    assert "memoryview" not in msg
    assert a.grad is None and b.grad is None


def test_function_backward_returning_ndarray_under_detect_anomaly():
    fn = _function_returning(lambda g: (g, g.numpy()))
    y = fn.apply(tt.ones(3, requires_grad=True), tt.ones(3, requires_grad=True)).sum()
    with tt.detect_anomaly(), pytest.raises(TypeError, match=r"numpy\.ndarray at position 1"):
        y.backward()


@pytest.mark.parametrize("result,got", [
    (lambda g: (g, g, g), 3),
    (lambda g: g, 1),
], ids=["too_many", "too_few"])
def test_function_backward_wrong_number_of_gradients_names_the_class(result, got):
    fn = _function_returning(result)
    with pytest.raises(RuntimeError) as info:
        fn.apply(tt.ones(3, requires_grad=True), tt.ones(3, requires_grad=True)).sum().backward()
    msg = str(info.value)
    assert re.search(rf"op 'scale' returned {got} gradients?, expected 2", msg), msg
    assert f"{fn.__qualname__}.backward must return" in msg


def test_function_backward_wrong_shape_names_the_class_and_position():
    fn = _function_returning(lambda g: (g, tt.ones(4)))
    with tt.module_scope("head"):
        y = fn.apply(tt.ones(3, requires_grad=True), tt.ones(3, requires_grad=True))
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    msg = str(info.value)
    assert "op 'scale' in head returned a gradient of shape (4,) for an input of shape (3,) " \
           "at position 1" in msg
    assert f"{fn.__qualname__}.backward" in msg


def test_function_backward_returning_none_or_broadcast_gradient_is_fine():
    fn = _function_returning(lambda g: (None, g.reshape(1, 3)))
    a, b = tt.ones(3, requires_grad=True), tt.ones(3, requires_grad=True)
    fn.apply(a, b).sum().backward()
    assert a.grad is None
    np.testing.assert_allclose(b.grad.numpy(), np.ones(3))


# ------------------------------------------------------------------ optimizer help
OPTIMIZERS = [optim.Optimizer, optim.SGD, optim.Adam, optim.AdamW]


@pytest.mark.parametrize("cls", OPTIMIZERS, ids=[c.__name__ for c in OPTIMIZERS])
def test_every_public_optimizer_method_has_a_docstring(cls):
    # inherited ones too: help(SGD) lists them, and without a docstring pydoc shows the
    # comment above the def instead (zero_grad showed a "---- stepping" divider)
    missing = [name for name, member in inspect.getmembers(cls, callable)
               if not name.startswith("_") and not inspect.getdoc(member)]
    assert not missing, f"{cls.__name__}: no docstring on {missing}"
    assert inspect.getdoc(cls)


def test_zero_grad_help_explains_set_to_none():
    doc = inspect.getdoc(optim.Optimizer.zero_grad)
    assert doc and "set_to_none" in doc and "None" in doc and "zero" in doc


# ------------------------------------------------------------------ numbers in messages
i, f = np.int64, np.float64  # short, for the table below
x = tt.randn

# calls that raise with NumPy scalars among their arguments: (name, call, exception, text
# the message must hold, with the numbers printed as Python prints them)
NUMPY_ARGS = [
    ("permute_count", lambda: x(3, 2).permute(i(0)), ValueError, "got 1 dims (0,)"),
    ("permute_repeat", lambda: x(3, 2).permute(i(0), i(0)), ValueError, "dims (0, 0) are not"),
    ("roll", lambda: x(4, 3).roll((i(1), i(2)), (i(0),)), ValueError, "for 1 dims (0,)"),
    # p <= 0 is a norm now (torch's): a string p and a matrix order are the wrong values
    ("norm_p", lambda: x(4, 3).norm(p=np.str_("foo")), ValueError, "got 'foo'"),
    ("norm_p_float32", lambda: tt.linalg.matrix_norm(x(4, 3), np.float32(3.0)), ValueError, "order 3.0 is"),
    ("layer_norm", lambda: F.layer_norm(x(2, 3), (i(4),)), ValueError, "normalized_shape (4,)"),
    ("rms_norm", lambda: F.rms_norm(x(2, 3), (i(4),)), ValueError, "normalized_shape (4,)"),
    ("LayerNorm", lambda: nn.LayerNorm((i(4),))(x(2, 3)), ValueError, "normalized_shape (4,)"),
    ("broadcast_shapes", lambda: tt.broadcast_shapes((i(3), i(4)), (i(5),)), ValueError,
     "shapes (3, 4) and (5,)"),
    ("div_mode", lambda: x(3).div(x(3), rounding_mode=np.str_("x")), ValueError, "got 'x'"),
    ("gelu", lambda: F.gelu(x(3), approximate=np.str_("x")), ValueError, "got 'x'"),
    ("pad_mode", lambda: F.pad(x(3), (1, 1), mode=np.str_("reflect")), NotImplementedError,
     "mode 'reflect'"),
    ("reduction", lambda: F.mse_loss(x(3), x(3), reduction=np.str_("avg")), ValueError, "got 'avg'"),
    ("einsum", lambda: tt.einsum(np.str_("ij,jk->ik"), x(3, 4)), ValueError, "'ij,jk->ik'"),
    ("FeedForward", lambda: nn.FeedForward(4, 8, activation=np.str_("x")), ValueError, "got 'x'"),
    ("CrossEntropyLoss", lambda: nn.CrossEntropyLoss(reduction=np.str_("avg")), ValueError,
     "got 'avg'"),
    ("Adam_betas", lambda: optim.Adam([tt.randn(2, requires_grad=True)], betas=(f(1.0), f(0.9))),
     ValueError, "invalid betas (1.0, 0.9)"),
    ("clip_norm_type", lambda: nn.clip_grad_norm_([tt.randn(2, requires_grad=True)], 1.0,
                                                  norm_type=np.str_("x")), ValueError, "got 'x'"),
    ("calculate_gain_slope", lambda: init.calculate_gain("leaky_relu", np.float32(0.5)), ValueError,
     "negative_slope must be an int or float, got 0.5 (float32)"),
    ("calculate_gain_name", lambda: init.calculate_gain(np.str_("foo")), ValueError,
     "nonlinearity 'foo'"),
    ("fan_mode", lambda: init.kaiming_uniform_(tt.ones(2, 2), mode=np.str_("fan")), ValueError,
     "got 'fan'"),
    ("save_key", lambda: nn.save({i(3): 1.0}, "/nonexistent/never-written.tt"), TypeError,
     "dict key 3 at"),
    # these already printed plain numbers: kept so that they go on doing so
    ("SGD_lr", lambda: optim.SGD([tt.randn(2, requires_grad=True)], lr=f(-1.0)), ValueError,
     "learning rate (lr) -1.0"),
    ("reshape", lambda: x(3, 4).reshape(i(5), i(2)), ValueError, "shape (5, 2) is invalid"),
    ("expand", lambda: x(3, 2).expand(i(3), i(4)), ValueError, "to (3, 4)"),
    ("split", lambda: x(4, 3).split([i(1), i(2)]), ValueError, "sections [1, 2]"),
    ("sum_dim", lambda: x(4, 3).sum(dim=i(3)), IndexError, "dimension 3"),
    ("getitem", lambda: x(3, 4)[i(1), i(7)], IndexError, "index 7"),
    ("randint", lambda: tt.randint(i(5), i(5), (i(2),)), ValueError, "high (5)"),
    ("dropout", lambda: F.dropout(x(2), p=f(1.5)), ValueError, "got 1.5"),
]


@pytest.mark.parametrize("name,fn,exc,text", NUMPY_ARGS, ids=[c[0] for c in NUMPY_ARGS])
def test_messages_print_numpy_scalars_as_plain_numbers(name, fn, exc, text):
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    assert "np." not in msg and "numpy." not in msg, msg
    assert text in msg, msg


def test_anomaly_and_tape_print_numpy_attributes_as_plain_numbers():
    a = tt.tensor([-1.0, 4.0], requires_grad=True)
    with tt.detect_anomaly(), pytest.raises(tt.AnomalyError) as info:
        a.pow(f(0.5))
    assert "attributes: {'exponent': 0.5}" in str(info.value)
    with tt.record() as tape:
        a.reshape(1, 2).softmax(i(0)).clamp(f(0.0), f(1.0))
    text = repr(tape)
    assert "np." not in text, text
    assert "dim=0" in text and "min=0.0, max=1.0" in text


def test_compare_with_torch_mismatch_prints_plain_numbers():
    with pytest.raises(AssertionError) as info:
        compare_with_torch(lambda a: a * 2, lambda a: a * 3, [np.array([1.0, 2.0])], grad=False)
    msg = str(info.value)
    assert "np." not in msg and "tinytensor 4.0 vs torch 6.0" in msg, msg


# ------------------------------------------------------------------ compare_with_torch without torch
def test_compare_with_torch_without_torch_names_the_test_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what an environment without torch gives
    with pytest.raises(ModuleNotFoundError) as info:
        compare_with_torch(lambda a: a, lambda a: a, [(2,)])
    msg = str(info.value)
    assert msg.startswith("compare_with_torch needs PyTorch")
    assert "pip install -e '.[test]'" in msg and "torch==2.13.0" in msg
    assert info.value.name == "torch"
