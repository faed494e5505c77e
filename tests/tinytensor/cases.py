"""What the one-line-per-case test files share: the case helpers of the float64 tables
(test_elementwise, test_reduce) and the three tests of a table checked with
`oracle.check` (test_indexing, test_linalg, test_movement)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch


def check_double(fn, inputs, **kw):
    """Compare fn(tinytensor, *xs) with fn(torch, *xs); double backward unless told otherwise."""
    kw.setdefault("double_backward", True)
    return compare_with_torch(lambda *xs: fn(tt, *xs), lambda *xs: fn(torch, *xs), inputs, **kw)


def array(*values, dtype=np.float64):
    return np.array(values, dtype=dtype)


def case(name, fn, inputs, **kw):
    return pytest.param(fn, inputs, kw, id=name)


def table_tests(cases, float32, check):
    """Every case in float64 (with double backward), the `float32` ones in float32 too, and
    those again on CUDA: `test_x, test_x_float32, test_x_cuda = table_tests(...)`."""
    @pytest.mark.parametrize("name", list(cases))
    def test_float64(name):
        fn, inputs = cases[name]
        check(fn, inputs)

    @pytest.mark.parametrize("name", float32)
    def test_float32(name):
        fn, inputs = cases[name]
        check(fn, inputs, dtype="float32")

    @pytest.mark.gpu
    @pytest.mark.parametrize("name", float32)
    def test_cuda(name):
        fn, inputs = cases[name]
        check(fn, inputs, device="cuda")

    return test_float64, test_float32, test_cuda


def error_tests(cases, error=ValueError):
    """One test per (call, pattern) case: call() raises `error` with a message matching the
    pattern (errors name the op): `test_errors = error_tests([...])`."""
    @pytest.mark.parametrize("call, match", cases)
    def test_errors(call, match):
        with pytest.raises(error, match=match):
            call()

    return test_errors
