"""The core redesign (issue 10): NumPy scalars in dtype/device errors and as op arguments
behave like Python numbers (checked against torch), and core imports no op."""
import ast
import os

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F


def test_dtype_error_prints_numpy_string_plainly():
    with pytest.raises(TypeError) as info:
        tt.zeros(2, dtype=np.str_("bogus"))
    msg = str(info.value)
    assert "unknown dtype 'bogus'" in msg and "np." not in msg, msg


@pytest.mark.parametrize("spec,text", [(np.str_("gpu"), "unknown device 'gpu'"),
                                       (np.str_("cuda:x"), "bad device index in 'cuda:x'"),
                                       (np.int64(3), "got 3")])
def test_device_errors_print_numpy_values_plainly(spec, text):
    with pytest.raises((TypeError, ValueError)) as info:
        tt.device(spec)
    msg = str(info.value)
    assert text in msg and "np." not in msg, msg


def test_pow_with_numpy_float_exponent_keeps_float32_like_torch():
    x = np.array([0.5, 1.5, 2.0], dtype=np.float32)
    a = tt.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = a.pow(np.float64(2.5)), b.pow(np.float64(2.5))
    assert ya.dtype is tt.float32 and yb.dtype == torch.float32
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-6)
    ya.sum().backward()
    yb.sum().backward()
    assert a.grad.dtype is tt.float32
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_norm_accepts_numpy_p_like_torch():
    x = np.random.default_rng(0).standard_normal((3, 4))
    got = tt.tensor(x).norm(p=np.float32(3), dim=1).numpy()
    want = torch.tensor(x).norm(p=np.float32(3), dim=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_layer_norm_accepts_numpy_int_shape_like_torch():
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    got = F.layer_norm(tt.tensor(x), np.int64(4)).numpy()
    want = torch.nn.functional.layer_norm(torch.tensor(x), (int(np.int64(4)),)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def _imports(path):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or "")
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def test_core_imports_no_op_and_nothing_imports_the_public_face():
    root = os.path.dirname(tt.__file__)
    core = os.path.join(root, "core")
    for f in os.listdir(core):
        if f.endswith(".py") and f != "methods.py":  # methods binds the ops namespace lazily
            bad = [m for m in _imports(os.path.join(core, f)) if "ops" in m.split(".") or m == ".."]
            assert not bad, f"core/{f} imports {bad}"
    for dp, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".py") and dp != root:
                bad = [m for m in _imports(os.path.join(dp, f))
                       if m in ("tinytensor", "tinytensor.functional", "..functional")]
                assert not bad, f"{os.path.join(dp, f)} imports the public face: {bad}"


def test_tensor_methods_are_in_the_class_body():
    from tinytensor.core.methods import TensorMethods
    for name in ("sum", "__add__", "softmax", "masked_fill_", "new_zeros", "__rtruediv__"):
        assert name in TensorMethods.__dict__, name
