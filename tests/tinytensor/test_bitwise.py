"""Bitwise ops on integer and bool tensors against PyTorch: tt.bitwise_* functions, the
Tensor methods, the operators & | ^ ~ << >> (reflected forms with Python ints included),
and the refusal of float operands by name."""
import numpy as np
import pytest
import torch

import tinytensor as tt

A = np.array([[0, 1, -7, 255], [12, -1, 3, 2 ** 40]], dtype=np.int64)
B = np.array([5, -3, 2, 64], dtype=np.int64)
SHIFT = np.array([0, 1, 63, 64], dtype=np.int64)      # 64 and more: torch gives 0 / the sign
P = np.array([[True, False, True, False]])
Q = np.array([True, True, False, False])

CASES = {
    "and": lambda m, a, b: m.bitwise_and(a, b),
    "or": lambda m, a, b: m.bitwise_or(a, b),
    "xor": lambda m, a, b: m.bitwise_xor(a, b),
    "not": lambda m, a, b: m.bitwise_not(a),
    "and_op": lambda m, a, b: a & b,
    "or_op": lambda m, a, b: a | b,
    "xor_op": lambda m, a, b: a ^ b,
    "invert_op": lambda m, a, b: ~a,
    "method_and": lambda m, a, b: a.bitwise_and(b),
    "method_not": lambda m, a, b: b.bitwise_not(),
    "int_scalar": lambda m, a, b: (a & 6) | (3 ^ a),
    "reflected": lambda m, a, b: (12 & b) | (5 | b) ^ (7 ^ b),
}
SHIFTS = {
    "lshift": lambda m, a, s: m.bitwise_left_shift(a, s),
    "rshift": lambda m, a, s: m.bitwise_right_shift(a, s),
    "lshift_op": lambda m, a, s: a << s,
    "rshift_op": lambda m, a, s: a >> s,
    "lshift_scalar": lambda m, a, s: a << 3,
    "rshift_reflected": lambda m, a, s: 1024 >> s,
    "lshift_reflected": lambda m, a, s: 1 << s,
    "method": lambda m, a, s: a.bitwise_right_shift(2),
}


def _same(fn, *arrays):
    out = fn(tt, *(tt.tensor(x) for x in arrays))
    ref = fn(torch, *(torch.tensor(x) for x in arrays))
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (out.dtype, ref.dtype)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint8])
def test_bitwise_integers(name, dtype):
    _same(CASES[name], A.astype(dtype), B.astype(dtype))


@pytest.mark.parametrize("name", list(CASES))
def test_bitwise_bools(name):
    _same(CASES[name], P, Q)


def test_mixed_dtypes_promote_as_torch():
    _same(lambda m, a, b: a & b, A.astype(np.int32), B.astype(np.uint8))
    _same(lambda m, a, b: a ^ b, P, B)
    _same(lambda m, a, b: True | a, A.astype(np.int16), B)


@pytest.mark.parametrize("name", list(SHIFTS))
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_shifts(name, dtype):
    _same(SHIFTS[name], A[:, :4].astype(dtype), SHIFT.astype(dtype))


@pytest.mark.parametrize("call, match", [
    (lambda x, f: f & x, r"bitwise_and: only integer and bool tensors are supported, got float32"),
    (lambda x, f: x | f, r"bitwise_or: only integer and bool tensors are supported, got float32"),
    (lambda x, f: tt.bitwise_xor(f, 1), r"bitwise_xor: only integer and bool tensors"),
    (lambda x, f: ~f, r"bitwise_not: only integer and bool tensors are supported, got float32"),
    (lambda x, f: f << 1, r"bitwise_left_shift: only integer tensors are supported, got float32"),
    (lambda x, f: x >> f, r"bitwise_right_shift: only integer tensors are supported"),
    # a float Python number would make the operands float: torch refuses it too
    (lambda x, f: x & 1.5, r"bitwise_and: only integer and bool operands are supported, got int64 and float"),
    (lambda x, f: 2.0 | x, r"bitwise_or: only integer and bool operands are supported, got float and int64"),
    (lambda x, f: x << 1.0, r"bitwise_left_shift: only integer and bool operands are supported"),
    (lambda x, f: tt.bitwise_left_shift(tt.tensor([True]), tt.tensor([True])),
     r"bitwise_left_shift: bool operands are not supported"),
])
def test_float_operands_are_refused_by_name(call, match):
    x, f = tt.tensor([1, 2, 3]), tt.tensor([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=match):
        call(x, f)
