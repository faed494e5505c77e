"""Edges where tinytensor must do what torch does: inputs torch accepts (softmax of a 0-d
tensor, Python ints outside an integer dtype's range) and inputs torch refuses (repeated
flip dims, integer tensors to negative integer powers, a bool linspace), with torch's
exception types."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .oracle import F, check


# ---------------------------------------------------------------- softmax of a 0-d tensor
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_0d(op, dim):
    check(lambda m, x: getattr(x, op)(dim), [()])
    check(lambda m, x: getattr(F(m), op)(x * 3.0, dim=dim), [()])


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_0d_with_fusion_off(op):
    with tt.kernels.use_fusion(False):
        check(lambda m, x: getattr(x, op)(0), [()])


def test_softmax_0d_bad_dim():
    with pytest.raises(IndexError, match=r"softmax: dimension 1 is out of range"):
        tt.tensor(1.0).softmax(1)


# ---------------------------------------------------------------- Python ints against integer tensors
BIG = [0xFFFFFFFF, 2 ** 31, -2 ** 31 - 1, 300, -129, 2 ** 40, 2 ** 63, 2 ** 64 - 1, -2 ** 63]
OPS = ["|", "&", "^", "+", "-", "*", "==", "<", "!="]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
@pytest.mark.parametrize("value", BIG, ids=str)
def test_python_int_wraps_into_dtype(dtype, value):
    data = [0, 1, 5] if dtype == "uint8" else [0, 1, -3]
    ours, theirs = tt.tensor(data, dtype=getattr(tt, dtype)), torch.tensor(data, dtype=getattr(torch, dtype))
    for op in OPS:
        for expr in (f"x {op} value", f"value {op} x"):
            a, b = eval(expr, {"x": ours, "value": value}), eval(expr, {"x": theirs, "value": value})
            assert a.dtype.name == str(b.dtype).removeprefix("torch."), expr
            assert a.tolist() == b.tolist(), (dtype, expr)


def test_or_all_ones_is_minus_one():
    assert (tt.tensor([0], dtype=tt.int32) | 0xFFFFFFFF).tolist() == [-1]


@pytest.mark.parametrize("value", [2 ** 64, -2 ** 63 - 1])
def test_python_int_wider_than_64_bits(value):
    with pytest.raises(OverflowError, match=f"bitwise_or: Python integer {value} is too big"):
        tt.tensor([0], dtype=tt.int32) | value
    with pytest.raises(OverflowError):
        torch.tensor([0], dtype=torch.int32) | value


@pytest.mark.parametrize("value", [128, -129, 2 ** 63])
def test_where_refuses_what_the_dtype_cannot_hold(value):
    """torch wraps operands of arithmetic, but where (like fill and clamp) checks the range."""
    c = [True, False]
    with pytest.raises(RuntimeError):
        torch.where(torch.tensor(c), torch.tensor([1, 2], dtype=torch.int8), value)
    with pytest.raises(RuntimeError, match=f"where: value {value} cannot be converted to int8 without "
                                           r"overflow \(its range is \[-128, 127\]\)"):
        tt.where(tt.tensor(c), tt.tensor([1, 2], dtype=tt.int8), value)
    assert tt.where(tt.tensor(c), 127, tt.tensor([1, 2], dtype=tt.int8)).tolist() == [127, 2]


def test_float_tensor_keeps_the_value():
    assert (tt.tensor([0.0], dtype=tt.float64) + 2 ** 64).tolist() == [float(2 ** 64)]


# ---------------------------------------------------------------- what torch refuses
@pytest.mark.parametrize("dims", [(0, 0), (1, -1), (0, 1, 0)])
def test_flip_repeated_dims(dims):
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).flip(dims)
    with pytest.raises(RuntimeError, match=r"flip: dim \d appears multiple times in the list of dims"):
        tt.zeros(2, 3).flip(dims)


def test_flip_distinct_dims_still_work():
    check(lambda m, x: x.flip((1, 0)) * x.flip(-1), [(2, 3)])


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("exponent", [-1, -2, np.int64(-3)])
def test_integer_to_negative_integer_power(dtype, exponent):
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2], dtype=getattr(torch, dtype)) ** exponent
    x = tt.tensor([1, 2], dtype=getattr(tt, dtype))
    with pytest.raises(RuntimeError, match=rf"pow: integers to negative integer powers are not "
                                           rf"allowed, as in torch: {dtype} tensor \*\* {int(exponent)}"):
        x ** exponent
    with pytest.raises(RuntimeError):
        tt.pow(x, exponent)


def test_integer_powers_torch_allows():
    x = [1, 2, -3]
    for e in (0, 2, -2.0, 0.5):
        ours, theirs = tt.tensor(x) ** e, torch.tensor(x) ** e
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), equal_nan=True)
    exps = [-2, 0, -1]  # a tensor exponent: torch truncates, it does not refuse
    assert (tt.tensor(x) ** tt.tensor(exps)).tolist() == (torch.tensor(x) ** torch.tensor(exps)).tolist()


@pytest.mark.parametrize("op", ["linspace", "arange"])
def test_bool_ranges(op):
    args = (0, 1, 5) if op == "linspace" else (0, 3)
    with pytest.raises(NotImplementedError):
        getattr(torch, op)(*args, dtype=torch.bool)
    with pytest.raises(NotImplementedError, match=f"{op}: dtype bool is not supported"):
        getattr(tt, op)(*args, dtype=tt.bool)
