"""Bad inputs give errors that name the op, say what was wrong, and where (module path)."""
import sys

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F

device_mod = sys.modules["tinytensor.device"]  # tt.device is the Device class

# (name, call, exception type, regex the message must match)
ERRORS = [
    ("matmul_shapes", lambda: tt.randn(4, 16, 64) @ tt.randn(32, 64), ValueError,
     r"matmul: shapes \(4, 16, 64\) and \(32, 64\) do not match"),
    ("matmul_1d", lambda: tt.randn(3) @ tt.randn(4), ValueError, r"matmul.*\(3,\).*\(4,\)"),
    ("add_broadcast", lambda: tt.randn(3, 4) + tt.randn(5), ValueError,
     r"add: .*broadcast.*\(3, 4\), \(5,\)"),
    ("mul_broadcast", lambda: tt.randn(2, 3) * tt.randn(2, 1, 4, 2), ValueError,
     r"mul: .*broadcast"),
    ("where_broadcast", lambda: tt.where(tt.ones(3, dtype=tt.bool), tt.ones(3), tt.ones(4)),
     ValueError, r"where.*\(3,\).*\(4,\)"),
    ("reshape", lambda: tt.randn(3, 4).reshape(5, 2), ValueError,
     r"reshape: shape \(5, 2\) is invalid for a tensor of shape \(3, 4\)"),
    ("reshape_two_minus_one", lambda: tt.randn(3, 4).reshape(-1, -1), ValueError,
     r"reshape: only one dimension can be -1"),
    ("expand", lambda: tt.randn(3, 2).expand(3, 4), ValueError, r"expand.*\(3, 2\).*\(3, 4\)"),
    ("cat", lambda: tt.cat([tt.randn(2, 3), tt.randn(3, 2)]), ValueError,
     r"cat: .*\(2, 3\), \(3, 2\)"),
    ("linear", lambda: F.linear(tt.randn(2, 3), tt.randn(4, 5)), ValueError,
     r"linear: input shape \(2, 3\).*weight shape \(4, 5\)"),
    ("layer_norm", lambda: F.layer_norm(tt.randn(2, 3), (4,)), ValueError,
     r"layer_norm: normalized_shape \(4,\).*\(2, 3\)"),
    ("sum_dim", lambda: tt.randn(2, 3).sum(dim=2), IndexError,
     r"sum: dimension 2 is out of range.*2 dimensions"),
    ("softmax_dim", lambda: tt.randn(2, 3).softmax(dim=3), IndexError, r"softmax.*dimension 3"),
    ("getitem_int", lambda: tt.randn(3, 4)[5], IndexError,
     r"getitem: index 5 is out of range for dimension 0 with size 3"),
    ("getitem_dim1", lambda: tt.randn(3, 4)[:, -5], IndexError,
     r"getitem: index -5 is out of range for dimension 1 with size 4"),
    ("getitem_tensor", lambda: tt.randn(3, 4)[tt.tensor([0, 3])], IndexError,
     r"getitem: index 3 is out of range for dimension 0 with size 3"),
    ("getitem_too_many", lambda: tt.randn(3, 4)[1, 2, 3], IndexError,
     r"getitem: too many indices.*\(3, 4\)"),
    ("setitem_oob", lambda: tt.randn(3).__setitem__(3, 1.0), IndexError,
     r"setitem: index 3 is out of range"),
    ("gather_oob", lambda: tt.randn(2, 3).gather(1, tt.tensor([[0], [3]])), IndexError,
     r"gather.*3"),
    ("embedding_oob", lambda: F.embedding(tt.tensor([0, 7]), tt.randn(5, 2)), IndexError,
     r"embedding.*7"),
    ("cross_entropy_target", lambda: F.cross_entropy(tt.randn(2, 3), tt.tensor([0, 3])),
     IndexError, r"cross_entropy: target 3 is out of range for 3 classes"),
    ("requires_grad_int", lambda: tt.tensor([1, 2]).requires_grad_(), RuntimeError,
     r"requires_grad_: only floating-point.*int64"),
    ("requires_grad_bool", lambda: tt.tensor([True], requires_grad=True), RuntimeError,
     r"floating-point.*bool"),
    ("randn_int", lambda: tt.randn(2, dtype=tt.int64), TypeError, r"randn: dtype must be floating"),
    ("randint_range", lambda: tt.randint(5, 5, (2,)), ValueError, r"randint: high \(5\).*low \(5\)"),
    ("ragged", lambda: tt.tensor([[1, 2], [3]]), ValueError, r"tensor: cannot build a tensor"),
    ("strings", lambda: tt.tensor(["a", "b"]), TypeError, r"tensor: cannot build a tensor"),
    ("bad_device", lambda: tt.zeros(2, device="tpu"), ValueError,
     r"unknown device 'tpu'.*'cpu', 'cuda'"),
    ("bad_device_index", lambda: tt.device("cuda:x"), ValueError, r"bad device index"),
    ("item_many", lambda: tt.ones(2).item(), ValueError, r"item\(\).*shape \(2,\)"),
    ("bool_many", lambda: bool(tt.ones(2)), RuntimeError, r"ambiguous"),
    ("inplace_shape", lambda: tt.ones(3).add_(tt.ones(2, 3)), RuntimeError,
     r"add_: the result has shape \(2, 3\).*\(3,\)"),
    ("inplace_dtype", lambda: tt.arange(3).mul_(0.5), RuntimeError,
     r"mul_: result type float32 cannot be cast.*int64"),
    ("apply_non_tensor", lambda: tt.ops.elementwise.Add.apply(tt.ones(1), 2.0), TypeError,
     r"add: positional inputs must be Tensors"),
]


@pytest.mark.parametrize("name,fn,exc,pattern", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_message(name, fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn()


# ------------------------------------------------------------------ module path
SCOPED = [
    ("matmul", lambda: tt.randn(4, 16, 64) @ tt.randn(32, 64), ValueError,
     r"matmul: shapes \(4, 16, 64\) and \(32, 64\) do not match.* in blocks\.0\.attn"),
    ("add", lambda: tt.randn(3, 4) + tt.randn(5), ValueError, r"add: .* in blocks\.0\.attn"),
    ("reshape", lambda: tt.randn(3, 4).view(5, 2), ValueError, r"view: .* in blocks\.0\.attn"),
    ("linear", lambda: F.linear(tt.randn(2, 3), tt.randn(4, 5)), ValueError,
     r"linear: .* in blocks\.0\.attn"),
]


@pytest.mark.parametrize("name,fn,exc,pattern", SCOPED, ids=[e[0] for e in SCOPED])
def test_shape_error_names_module_path(name, fn, exc, pattern):
    with tt.module_scope("blocks.0.attn"):
        with pytest.raises(exc, match=pattern):
            fn()
    with tt.module_scope("blocks"), tt.module_scope("0"), tt.module_scope("attn"):
        with pytest.raises(exc, match=pattern):
            fn()
    with pytest.raises(exc) as info:  # outside any module: no path
        fn()
    assert " in blocks" not in str(info.value)


# ------------------------------------------------------------------ autograd misuse
def test_backward_twice():
    x = tt.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"second time.*retain_graph=True"):
        y.backward()


def test_backward_twice_names_module_path():
    x = tt.randn(3, requires_grad=True)
    with tt.module_scope("blocks.2.mlp"):
        y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"blocks\.2\.mlp.*retain_graph"):
        y.backward()


def test_nonscalar_backward():
    x = tt.randn(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"backward: gradient can be implicitly created only "
                                           r"for scalar outputs.*\(2, 3\)"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"grad: .*scalar outputs"):
        tt.grad(x * 2, x)


def test_backward_of_tensor_without_grad():
    with pytest.raises(RuntimeError, match=r"does not require grad.*requires_grad_"):
        tt.ones(3).sum().backward()


def test_inplace_on_leaf_requiring_grad():
    x = tt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"add_: a leaf tensor that requires grad.*no_grad"):
        x += 1


def test_numpy_of_tensor_requiring_grad():
    with pytest.raises(RuntimeError, match=r"numpy\(\).*detach"):
        tt.randn(3, requires_grad=True).numpy()


# ------------------------------------------------------------------ devices
def _fake_cuda_tensor(*shape):
    """A tensor that claims to live on cuda:0 (its array is NumPy): enough to reach the
    device check every op makes before it runs, without a GPU."""
    return tt.Tensor._make(np.ones(shape, np.float32), tt.Device("cuda:0"), False)


DEVICE_MISMATCH = [
    ("add", lambda g, c: g + c),
    ("mul", lambda g, c: c * g),
    ("matmul", lambda g, c: tt.ones(3, 2) @ g),
    ("cat", lambda g, c: tt.cat([g, c])),
    ("where", lambda g, c: tt.where(c > 0, g, c)),
]


@pytest.mark.parametrize("op,fn", DEVICE_MISMATCH, ids=[d[0] for d in DEVICE_MISMATCH])
def test_device_mismatch(op, fn):
    gpu, cpu = _fake_cuda_tensor(2, 3), tt.ones(2, 3)
    with pytest.raises(RuntimeError, match=rf"{op}: expected all tensors on one device.*"
                                           r"cuda:0.*cpu|cpu.*cuda:0"):
        fn(gpu, cpu)
    with tt.module_scope("blocks.0.attn"):
        with pytest.raises(RuntimeError, match=r"in blocks\.0\.attn.*\.to\(device\)"):
            fn(gpu, cpu)


@pytest.fixture
def no_cupy(monkeypatch):
    """Pretend CuPy is not installed, whether or not it is."""
    import builtins
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(device_mod, "_cupy", None)
    monkeypatch.setattr(device_mod, "_cupy_error", None)


@pytest.mark.parametrize("fn", [
    lambda: tt.zeros(2, device="cuda"),
    lambda: tt.randn(2, device="cuda:0"),
    lambda: tt.ones(2).to("cuda"),
    lambda: tt.ones(2).cuda(),
    lambda: tt.tensor([1.0], device="cuda"),
])
def test_cuda_without_cupy_says_how_to_install(no_cupy, fn):
    with pytest.raises(RuntimeError, match=r"device 'cuda' is not available.*CuPy is not "
                                           r"installed.*pip install .*cupy-cuda12x"):
        fn()
    assert not tt.cuda_is_available()


def test_cuda_with_cupy_but_no_gpu(monkeypatch):
    class FakeRuntime:
        @staticmethod
        def getDeviceCount():
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    class FakeCupy:
        class cuda:
            runtime = FakeRuntime

    monkeypatch.setitem(sys.modules, "cupy", FakeCupy)
    monkeypatch.setattr(device_mod, "_cupy", None)
    monkeypatch.setattr(device_mod, "_cupy_error", None)
    with pytest.raises(RuntimeError, match=r"CuPy cannot reach a CUDA GPU.*no CUDA-capable"):
        tt.zeros(2, device="cuda")
