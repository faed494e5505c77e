"""tt.bfloat16 (through ml_dtypes) against torch's bfloat16 on the CPU: creation and casts
bit for bit, torch's promotion table, ops computing in float32 and rounding once, the fused
CPU kernels, and the clear error when ml_dtypes is missing."""
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("ml_dtypes")

import tinytensor as tt  # noqa: E402
import tinytensor.functional as F  # noqa: E402

BF16_RTOL = 2 ** -7  # one bfloat16 ulp: both sides round once, from float32 results that differ in their last bits


def _bits(t):
    """The raw 16-bit patterns of a tinytensor or torch bfloat16 tensor."""
    if isinstance(t, torch.Tensor):
        return t.view(torch.int16).numpy()
    return t.numpy().view(np.int16)


def _close(ours, theirs, rtol=BF16_RTOL, atol=1e-2):
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", ""), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=rtol, atol=atol)


def _pair(*shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tt.tensor(x, dtype=tt.bfloat16), torch.tensor(x).bfloat16()


def test_creation_and_casts_round_like_torch_bit_for_bit():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32) * 1e3
    x[:4] = [1.00390625, 1.01171875, -0.0, 3.4e38]  # ties to even both ways, -0, overflow to inf
    ours, theirs = tt.tensor(x, dtype=tt.bfloat16), torch.tensor(x).to(torch.bfloat16)
    assert ours.dtype is tt.bfloat16 and ours.is_floating_point()
    np.testing.assert_array_equal(_bits(ours), _bits(theirs))
    np.testing.assert_array_equal(_bits(tt.tensor(x).bfloat16()), _bits(theirs))
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
    np.testing.assert_array_equal(ours.to(tt.float16).numpy(), theirs.half().numpy())
    np.testing.assert_array_equal(ours.to("int32").numpy(), theirs.int().numpy())
    assert tt.zeros(2, 3, dtype="bfloat16").dtype is tt.bfloat16
    assert tt.randn(4, dtype=tt.bfloat16).dtype is tt.bfloat16
    np.testing.assert_array_equal(_bits(tt.arange(300, dtype=tt.bfloat16)),
                                  _bits(torch.arange(300, dtype=torch.bfloat16)))


_TORCH = {tt.bool: torch.bool, tt.uint8: torch.uint8, tt.int8: torch.int8, tt.int16: torch.int16,
          tt.int32: torch.int32, tt.int64: torch.int64, tt.uint16: torch.uint16,
          tt.uint32: torch.uint32, tt.uint64: torch.uint64, tt.float16: torch.float16,
          tt.float32: torch.float32, tt.float64: torch.float64, tt.bfloat16: torch.bfloat16}


@pytest.mark.parametrize("other", list(_TORCH), ids=lambda d: d.name)
def test_promotion_with_every_dtype_is_torchs(other):
    want = torch.promote_types(torch.bfloat16, _TORCH[other])
    for a, b in ((tt.bfloat16, other), (other, tt.bfloat16)):
        assert _TORCH[tt.dtypes.promote(a, b)] == want
        x, y = tt.ones(2, dtype=a), tt.ones(2, dtype=b)
        assert _TORCH[(x + y).dtype] == want, (a, b)
    # a 0-d tensor of another float dtype does not widen a bfloat16 matrix; 0-d bf16 does not
    # make an int matrix anything but bfloat16
    zero_d = tt.tensor(1, dtype=other)
    assert _TORCH[(tt.ones(2, dtype=tt.bfloat16) * zero_d).dtype] == torch.result_type(
        torch.ones(2, dtype=torch.bfloat16), torch.tensor(1, dtype=_TORCH[other]))


def test_python_scalars_keep_bfloat16():
    ours, theirs = _pair(8)
    for f in (lambda t: t * 2.5, lambda t: 1 + t, lambda t: t / 3, lambda t: t ** 2, lambda t: -t):
        _close(f(ours), f(theirs))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "relu", "abs", "sqrt_abs", "gelu",
                                  "gelu_tanh", "silu", "erf", "log_abs"])
def test_elementwise_against_torch(name):
    ours, theirs = _pair(64, seed=2)
    fns = {"exp": lambda t, m: t.exp(), "tanh": lambda t, m: t.tanh(),
           "sigmoid": lambda t, m: t.sigmoid(), "relu": lambda t, m: t.relu(),
           "abs": lambda t, m: t.abs(), "sqrt_abs": lambda t, m: t.abs().sqrt(),
           "gelu": lambda t, m: m.gelu(t), "gelu_tanh": lambda t, m: m.gelu(t, approximate="tanh"),
           "silu": lambda t, m: m.silu(t), "erf": lambda t, m: t.erf(),
           "log_abs": lambda t, m: (t.abs() + 0.1).log()}
    _close(fns[name](ours, F), fns[name](theirs, torch.nn.functional))


def test_sum_and_mean_accumulate_in_float32_like_torch():
    # a bfloat16 running sum stops at 256 (256 + 1 rounds back to 256); torch's is float32
    ours, theirs = tt.ones(4096, dtype=tt.bfloat16), torch.ones(4096, dtype=torch.bfloat16)
    np.testing.assert_array_equal(_bits(ours.sum()), _bits(theirs.sum()))
    assert float(ours.sum()) == 4096.0
    x, y = _pair(64, 300, seed=3)
    x, y = x + 3, y + 3  # a large mean: where a bfloat16 accumulator would drift
    for f in (lambda t: t.sum(1), lambda t: t.mean(1), lambda t: t.var(1), lambda t: t.std(0),
              lambda t: t.norm(), lambda t: t.cumsum(1)[:, -1]):
        _close(f(x), f(y), atol=0.05)


def test_matmul_accumulates_in_float32_and_rounds_once():
    a, ta = _pair(16, 512, seed=4)
    b, tb = _pair(512, 8, seed=5)
    out = a @ b
    assert out.dtype is tt.bfloat16
    exact = (ta.double() @ tb.double()).to(torch.bfloat16)  # the float32 sum rounded once
    mismatched = (_bits(out) != _bits(exact)).mean()
    assert mismatched < 0.05, mismatched
    _close(out, ta @ tb, atol=0.1)
    _close(tt.matmul(a.reshape(2, 8, 512), b), torch.matmul(ta.reshape(2, 8, 512), tb), atol=0.1)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # torch's own
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_norms_of_a_low_precision_input_with_float32_weights_keep_the_input_dtype(low):
    # torch's mixed-dtype layer_norm computes in float32 and rounds once to the input's dtype;
    # its composite rms_norm does the same: the result is the input's dtype, not float32
    x32 = np.random.default_rng(8).standard_normal((4, 32)).astype(np.float32)
    w32 = np.random.default_rng(9).standard_normal(32).astype(np.float32)
    x, tx = tt.tensor(x32).to(getattr(tt, low)), torch.tensor(x32).to(getattr(torch, low))
    w, b = tt.tensor(w32, requires_grad=True), tt.tensor(w32 / 2)
    tw, tb = torch.tensor(w32, requires_grad=True), torch.tensor(w32 / 2)
    tf = torch.nn.functional
    ours, theirs = F.layer_norm(x, (32,), w, b), tf.layer_norm(tx, (32,), tw, tb)
    assert ours.dtype.name == low
    assert ours.detach().float().numpy().tobytes() == theirs.detach().float().numpy().tobytes()  # one rounding
    ours.float().sum().backward()
    theirs.float().sum().backward()
    assert w.grad.dtype is tt.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-2, atol=1e-2)
    _close(F.rms_norm(x, (32,), w.detach()), tf.rms_norm(tx, (32,), tw.detach()), atol=0.05)
    assert F.rms_norm(tt.tensor(x32), (32,), w.detach().double()).dtype is tt.float32  # torch: input's dtype


def test_fused_cpu_kernels_accept_bfloat16():
    x, tx = _pair(4, 6, 32, seed=6)
    w, tw = _pair(32, seed=7)
    tf = torch.nn.functional
    _close(F.softmax(x, -1), tf.softmax(tx, -1))
    _close(F.log_softmax(x, -1), tf.log_softmax(tx, -1), atol=0.05)
    _close(F.layer_norm(x, (32,), w, w), tf.layer_norm(tx, (32,), tw, tw), atol=0.05)
    _close(F.rms_norm(x, (32,), w), tf.rms_norm(tx, (32,), tw), atol=0.05)
    target = tt.tensor(np.arange(24) % 32).reshape(4, 6)
    _close(F.cross_entropy(x.reshape(24, 32), target.reshape(24)),
           tf.cross_entropy(tx.reshape(24, 32), torch.tensor(target.numpy()).reshape(24)), atol=0.05)
    q, tq = _pair(1, 2, 16, 32, seed=8)
    _close(F.scaled_dot_product_attention(q, q, q, is_causal=True),
           tf.scaled_dot_product_attention(tq, tq, tq, is_causal=True), atol=0.05)


def test_autograd_through_bfloat16_gives_bfloat16_gradients():
    x, tx = _pair(8, 16, seed=9)
    w, tw = _pair(16, 4, seed=10)
    w.requires_grad_()
    tw.requires_grad_()
    (x @ w).tanh().sum().backward()
    (tx @ tw).tanh().sum().backward()
    assert w.grad is not None and w.grad.dtype is tt.bfloat16
    _close(w.grad, tw.grad, atol=0.05)


def test_without_ml_dtypes_bfloat16_names_the_package():
    code = ("import sys; sys.modules['ml_dtypes'] = None\n"  # makes `import ml_dtypes` fail
            "import tinytensor as tt\nfrom tinytensor import nn, models\n"
            "x = tt.ones(2) * 2\n"
            "assert repr(tt.bfloat16) == 'tinytensor.bfloat16'\n"
            "try:\n"
            "    tt.zeros(2, dtype=tt.bfloat16)\n"
            "except ImportError as e:\n"
            "    print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "pip install ml_dtypes" in r.stdout, r.stdout


def test_repr_prints_bfloat16_like_torch():
    for values in ([1.0, 1.0], [1.5, 2.0], [1e9, 3.0], [-0.25, float("inf")]):
        ours = repr(tt.tensor(values, dtype=tt.bfloat16)).replace("tinytensor.", "")
        theirs = repr(torch.tensor(values, dtype=torch.bfloat16)).replace("torch.", "")
        assert ours == theirs
