"""DLPack both ways: tt.from_dlpack of torch/NumPy/CuPy arrays, torch/NumPy from_dlpack of
Tensors, zero-copy (a write through one side is read through the other), and the refusals."""
import numpy as np
import pytest
import torch

import tinytensor as tt


def test_from_torch_shares_memory_both_ways():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = tt.from_dlpack(x)
    assert t.shape == (2, 3) and t.dtype is tt.float32 and t.device.type == "cpu"
    assert not t.requires_grad
    x[0, 1] = 40.0                       # torch writes, tinytensor reads
    assert t[0, 1].item() == 40.0
    t[1, 2] = -5.0                       # tinytensor writes, torch reads
    assert x[1, 2].item() == -5.0


def test_from_numpy_and_strided_torch_views():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    t = tt.from_dlpack(a)
    a[2, 3] = 99
    assert t.dtype is tt.int64 and t[2, 3].item() == 99
    x = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    v = tt.from_dlpack(x.t())            # a transposed view travels with its strides
    np.testing.assert_array_equal(v.numpy(), x.t().numpy())
    x[0, 1] = 7.0
    assert v[1, 0].item() == 7.0


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool"])
def test_torch_from_tensor_zero_copy(dtype):
    t = tt.ones(2, 3, dtype=getattr(tt, dtype))
    x = torch.from_dlpack(t)
    assert str(x.dtype) == f"torch.{dtype}" and tuple(x.shape) == (2, 3)
    x[1, 0] = 0                          # torch writes into tinytensor's memory
    assert t[1, 0].item() == 0
    t[0, 2] = 0                          # and the other way
    assert x[0, 2].item() == 0


def test_numpy_from_tensor_zero_copy_and_device():
    t = tt.arange(6.0).reshape(2, 3)
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    a[0, 0] = 123.0
    assert t[0, 0].item() == 123.0
    np.testing.assert_array_equal(np.from_dlpack(t.T), a.T)  # a transposed view exports its strides
    np.testing.assert_array_equal(torch.from_dlpack(t.T).numpy(), a.T)


def test_round_trip_through_torch_keeps_the_storage():
    t = tt.zeros(4)
    back = tt.from_dlpack(torch.from_dlpack(t))
    back[2] = 3.0
    assert t[2].item() == 3.0


def test_requires_grad_is_refused_both_ways():
    w = tt.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match=r"__dlpack__.*requires grad.*\.detach\(\)"):
        torch.from_dlpack(w)
    assert torch.from_dlpack(w.detach()).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(BufferError, match=r"tt\.from_dlpack.*Tensor.*detach"):
        tt.from_dlpack(torch.ones(3, requires_grad=True))


def test_negative_strides_are_refused_before_a_consumer_sees_them():
    # torch aborts the whole process on a DLPack tensor with negative strides
    t = tt.from_numpy(np.arange(6.0)[::-1])
    with pytest.raises(BufferError, match=r"__dlpack__.*negative strides \(-1,\).*contiguous\(\)"):
        torch.from_dlpack(t)
    assert torch.from_dlpack(t.contiguous()).tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]


def test_unsupported_inputs_have_clear_errors():
    with pytest.raises(TypeError, match=r"tt\.from_dlpack: list does not implement the DLPack"):
        tt.from_dlpack([1, 2])
    assert tt.from_dlpack(np.zeros(2, dtype=np.complex64)).dtype is tt.complex64  # issue 23: shared now
    # bfloat16 is now shared (test_dlpack_bf16.py); float8 has no NumPy or tinytensor dtype
    with pytest.raises(TypeError, match=r"tt\.from_dlpack: .*shape \(2,\).*float8_e5m2"):
        tt.from_dlpack(torch.zeros(2, dtype=torch.float8_e5m2))


@pytest.mark.gpu
def test_cupy_both_ways():
    cp = pytest.importorskip("cupy")
    c = cp.arange(6, dtype=cp.float32)
    t = tt.from_dlpack(c)
    assert t.device.type == "cuda"
    c[1] = 50.0
    assert t[1].item() == 50.0
    back = cp.from_dlpack(t)
    back[2] = -1.0
    assert t[2].item() == -1.0
    x = torch.from_dlpack(t) if torch.cuda.is_available() else None
    if x is not None:
        x[3] = 8.0
        assert t[3].item() == 8.0
