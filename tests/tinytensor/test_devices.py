"""One small op suite on every device (cpu, and cuda under the gpu marker), checked for
values and gradients against PyTorch on CPU. On a GPU machine this runs CuPy for real."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.testing import compare_with_torch

RNG = np.random.default_rng(0)
TARGETS = RNG.integers(0, 5, size=(6,))
CAUSAL = np.tril(np.ones((4, 4), dtype=bool))

# (name, tinytensor fn, torch fn, inputs): inputs as compare_with_torch takes them
OPS = [
    ("add", lambda a, b: a + b, lambda a, b: a + b, [(3, 4), (4,)]),
    ("add_scalar", lambda a: 2.5 + a, lambda a: 2.5 + a, [(3, 4)]),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, [(2, 3, 4), (3, 1)]),
    ("div_exp", lambda a, b: a.exp() / (b * b + 1), lambda a, b: a.exp() / (b * b + 1),
     [(3, 4), (3, 4)]),
    ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, [(3, 4), (4, 5)]),
    ("matmul_batched", lambda a, b: a @ b, lambda a, b: a @ b, [(2, 3, 4), (4, 2)]),
    ("softmax", lambda a: tt.softmax(a, -1), lambda a: torch.softmax(a, -1), [(3, 5)]),
    ("softmax_dim0", lambda a: tt.softmax(a, 0), lambda a: torch.softmax(a, 0), [(3, 5)]),
    ("softmax_extreme", lambda a: tt.softmax(a, -1), lambda a: torch.softmax(a, -1),
     [np.array([[-1000.0, 1.0, 2.0], [500.0, 500.0, -500.0]])]),
    ("log_softmax", lambda a: tt.log_softmax(a, -1), lambda a: torch.log_softmax(a, -1), [(4, 6)]),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (8,), w, b),
     lambda x, w, b: TF.layer_norm(x, (8,), w, b), [(2, 3, 8), (8,), (8,)]),
    ("layer_norm_plain", lambda x: F.layer_norm(x, (4, 8)), lambda x: TF.layer_norm(x, (4, 8)),
     [(2, 4, 8)]),
    ("cross_entropy", lambda x, t: F.cross_entropy(x, t), lambda x, t: TF.cross_entropy(x, t),
     [(6, 5), TARGETS]),
    ("cross_entropy_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"),
     lambda x, t: TF.cross_entropy(x, t, reduction="sum"), [(6, 5), TARGETS]),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     lambda q, k, v: TF.scaled_dot_product_attention(q, k, v), [(2, 2, 4, 8)] * 3),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(2, 4, 8), (2, 4, 8), (2, 4, 8)]),
    ("sdpa_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m),
     [(1, 4, 8), (1, 4, 8), (1, 4, 8), CAUSAL]),
    ("getitem_slice", lambda a: a[1:, ::2], lambda a: a[1:, ::2], [(4, 5)]),
    ("getitem_int", lambda a: a[-1, 2], lambda a: a[-1, 2], [(4, 5)]),
    ("getitem_fancy", lambda a, i: a[i], lambda a, i: a[i], [(4, 3), np.array([0, 3, 0, 1])]),
    ("getitem_mask", lambda a: a[a > 0], lambda a: a[a > 0], [(4, 5)]),
    ("sum", lambda a: a.sum(), lambda a: a.sum(), [(3, 4)]),
    ("sum_dim", lambda a: a.sum(1, keepdim=True), lambda a: a.sum(1, keepdim=True), [(3, 4, 2)]),
    ("mean", lambda a: a.mean((0, 2)), lambda a: a.mean((0, 2)), [(3, 4, 2)]),
    ("max", lambda a: a.max(), lambda a: a.max(), [(3, 4)]),
    ("max_dim", lambda a: a.max(1)[0], lambda a: a.max(1)[0], [(3, 4)]),
    ("max_dim_indices", lambda a: a.max(-1)[1], lambda a: a.max(-1)[1], [(3, 4)]),
    ("tanh_gelu", lambda a: F.gelu(a).tanh(), lambda a: TF.gelu(a).tanh(), [(5,)]),
    ("reshape_transpose", lambda a: a.reshape(4, 3).T * 2, lambda a: a.reshape(4, 3).T * 2,
     [(3, 4)]),
]


@pytest.mark.parametrize("name,f,g,inputs", OPS, ids=[o[0] for o in OPS])
def test_op_on_device_matches_torch(device, name, f, g, inputs):
    out = compare_with_torch(f, g, inputs, device=device)
    assert out.device == device


FLOAT32 = ["add", "matmul", "softmax", "layer_norm", "cross_entropy", "sdpa", "sum", "max_dim"]


@pytest.mark.parametrize("name", FLOAT32)
def test_op_on_device_float32(device, name):
    _, f, g, inputs = next(o for o in OPS if o[0] == name)
    out = compare_with_torch(f, g, inputs, dtype="float32", device=device, atol=1e-5, rtol=1e-4)
    assert out.dtype == tt.float32


def _torch_sdpa_math(q, k, v):
    # torch's fused CPU attention has no double backward: use its math form as the oracle
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1) @ v


@pytest.mark.parametrize("name", ["mul", "softmax", "layer_norm", "cross_entropy", "sdpa"])
def test_double_backward_on_device(device, name):
    _, f, g, inputs = next(o for o in OPS if o[0] == name)
    if name == "sdpa":
        g = _torch_sdpa_math
    compare_with_torch(f, g, inputs, device=device, double_backward=True)


def test_tensors_and_grads_live_on_the_device(device):
    x = tt.randn(3, 4, device=device, requires_grad=True)
    w = tt.ones(4, 2, device=device, dtype=tt.float64, requires_grad=True)
    assert x.device == device and w.device == device
    y = (x.double() @ w).relu().sum()
    assert y.device == device
    y.backward()
    assert x.grad.device == device and w.grad.device == device
    assert x.grad.dtype == tt.float32 and w.grad.dtype == tt.float64
    assert isinstance(x.grad.numpy(), np.ndarray)


def test_creation_on_device(device):
    for t in (tt.zeros(2, 3, device=device), tt.arange(5, device=device),
              tt.eye(3, device=device), tt.full((2,), 1.5, device=device),
              tt.tensor([[1, 2]], device=device), tt.rand(2, device=device),
              tt.randint(0, 4, (3,), device=device), tt.linspace(0, 1, 4, device=device)):
        assert t.device == device
    assert tt.zeros_like(tt.ones(2, device=device)).device == device
    assert tt.arange(4, device=device).tolist() == [0, 1, 2, 3]


def test_round_trip_through_cpu_is_differentiable(device):
    x = tt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to(device)
    assert y.device == device and (y is x) == (device == "cpu")
    z = (y * y).to("cpu").sum()
    z.backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, -4.0, 6.0]


def test_manual_seed_on_device(device):
    tt.manual_seed(7)
    a = tt.randn(4, device=device).numpy()
    tt.manual_seed(7)
    b = tt.randn(4, device=device).numpy()
    np.testing.assert_array_equal(a, b)


def test_inplace_on_device(device):
    a = tt.tensor([1.0, 2.0, 3.0], device=device)
    a.add_(1).mul_(2)
    a[0] = 0.0
    assert a.device == device and a.tolist() == [0.0, 6.0, 8.0] and a._version_number == 3
