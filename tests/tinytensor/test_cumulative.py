"""cumprod, cummax, cummin, logcumsumexp (ops/cumulative.py) against PyTorch: values,
gradients and double backward in float64 (oracle.check), zeros in cumprod, ties and NaN in
cummax/cummin, -inf in logcumsumexp, dtypes and a float32 pass."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch

from .cases import array as a, case
from .oracle import check, with_squares

INF, NAN = math.inf, math.nan


def first_order(fn, inputs, **kw):
    """Values and first-order gradients: with no graph of the gradient built, the engine
    runs the ops' backward_arrays."""
    return compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), inputs, **kw)


ZEROS = a([2.0, 0.0, 3.0, 0.0, 4.0], [1.0, 2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 0.0, 1.0, 2.0],
          [1.0, 2.0, 3.0, 4.0, 0.0], [0.0, 1.5, -2.0, 0.5, 3.0], [1.5, -1.0, 2.0, 0.5, 3.0])
TIES = a([1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0], [-5.0, 0.5, 4.0, 4.0, -INF], [1.0, 0.0, 0.0, 2.0, 0.0])
LSE = a([1000.0, 1000.0, -1000.0, 0.0], [-INF, -INF, 0.0, 1.0], [-INF, 2.0, 0.0, -INF], [-800.0, 5.0, -INF, 800.0])
CASES = [
    case("cumprod", lambda m, x: m.cumprod(x, 1), [(3, 5)], low=0.5, high=1.5),
    case("cumprod_negative_dim", lambda m, x: m.cumprod(x, -3), [(4, 2, 3)]),
    case("cumprod_zeros", lambda m, x: m.cumprod(x, 1), [ZEROS]),
    case("cumprod_zeros_dim0", lambda m, x: m.cumprod(x, 0), [ZEROS.T.copy()]),
    case("cumprod_all_zeros", lambda m, x: m.cumprod(x, 0), [a(0.0, 0.0, 0.0)]),
    case("cumprod_size_1_0d_empty", lambda m, x, y, z: (m.cumprod(x, 0), m.cumprod(y, 0), m.cumprod(z, 1)), [(1, 3), (), (2, 0)]),
    case("cummax", lambda m, x: m.cummax(x, 1), [(3, 5)]),
    case("cummin", lambda m, x: m.cummin(x, -1), [(3, 5)]),
    case("cummax_dim0", lambda m, x: m.cummax(x, 0), [(4, 2, 3)]),
    case("cummax_ties", lambda m, x: m.cummax(x, 1), [TIES]),
    case("cummin_ties", lambda m, x: m.cummin(x, 1), [TIES]),
    case("cummax_0d_empty", lambda m, x, y: (*m.cummax(x, 0), *m.cummin(y, 1)), [(), (3, 0)]),
    case("cummax_fields", lambda m, x: (m.cummax(x, 1).values, m.cummin(x, 1).indices), [(2, 4)]),
    case("logcumsumexp", lambda m, x: m.logcumsumexp(x, 1), [(3, 5)], low=-5, high=5),
    case("logcumsumexp_dim0", lambda m, x: m.logcumsumexp(x, 0), [(4, 2, 3)]),
    case("logcumsumexp_large", lambda m, x: m.logcumsumexp(x, 1), [LSE[:1]]),
    case("logcumsumexp_0d_empty", lambda m, x, y: (m.logcumsumexp(x, 0), m.logcumsumexp(y, 0)), [(), (0, 2)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_op(fn, inputs, kw):
    check(fn, inputs, **kw)


FIRST_ORDER = [
    case("cumprod_zeros", lambda m, x: m.cumprod(x, 1), [ZEROS]),
    case("cumprod_no_zeros", lambda m, x: m.cumprod(x, 0), [(5, 3)], low=0.5, high=1.5),
    case("logcumsumexp", lambda m, x: m.logcumsumexp(x, 1), [(3, 6)], low=-5, high=5),
    # -inf entries: torch's log-space gradient, nan where a prefix is all -inf
    case("logcumsumexp_infinities", lambda m, x: m.logcumsumexp(x, 1), [LSE]),
]


@pytest.mark.parametrize("fn,inputs,kw", FIRST_ORDER)
def test_first_order(fn, inputs, kw):
    first_order(fn, inputs, **kw)


def test_double_backward_with_infinities():
    check(lambda m, x: m.logcumsumexp(x, 0), [LSE[1]])  # squares off: inf - inf soup otherwise


def test_nan_in_cummax_cummin_like_torch():
    x = a([1.0, NAN, 3.0, NAN, 5.0], [NAN, -1.0, -2.0, -3.0, NAN])
    check(lambda m, x: (*m.cummax(x, 1), *m.cummin(x, 1)), [x], grad=False)


F32_CASES = [
    case("all", lambda m, x: (m.cumprod(x, 1), *m.cummax(x, 1), *m.cummin(x, 0), m.logcumsumexp(x, 1)), [(3, 5)]),
    case("cumprod_zeros", lambda m, x: m.cumprod(x, 1), [ZEROS]),
]


@pytest.mark.parametrize("fn,inputs,kw", F32_CASES)
def test_float32(fn, inputs, kw):
    outs = first_order(fn, inputs, dtype="float32", **kw)
    assert all(o.dtype in (tt.float32, tt.int64) for o in outs)


# ------------------------------------------------------------------ dtypes and arguments
INTS = a([3, -1, 2, 2], [0, 5, -4, 1], dtype=np.int32)
DTYPE_CASES = [
    case("cumprod_int32_gives_int64", lambda m, x: m.cumprod(x, 1), [INTS]),
    case("cumprod_bool", lambda m, x: m.cumprod(x, 0), [a(True, True, False, True)]),
    case("cumprod_dtype", lambda m, x: (m.cumprod(x, 1, dtype=m.float64), m.cumprod(x, 0, dtype=m.int32)), [INTS]),
    case("cummax_int", lambda m, x: (*m.cummax(x, 1), *m.cummin(x, 0)), [INTS]),
    case("cummax_bool", lambda m, x: (*m.cummax(x, 0), *m.cummin(x, 0)), [a(True, False, True, False)]),
    case("logcumsumexp_float32", lambda m, x: m.logcumsumexp(x, 0), [a(1.0, 80.0, 100.0, dtype=np.float32)]),
]


@pytest.mark.parametrize("fn,inputs,kw", DTYPE_CASES)
def test_dtypes(fn, inputs, kw):
    check(fn, inputs, grad=False, **kw)


def test_logcumsumexp_of_ints_computes_in_float32():
    out = tt.logcumsumexp(tt.tensor([0, 1, 2]), 0)  # torch has no integer kernel here
    assert out.dtype is tt.float32
    np.testing.assert_allclose(out.numpy(), torch.logcumsumexp(torch.tensor([0.0, 1, 2]), 0).numpy(), rtol=1e-6)


def test_dim_is_checked():
    x = tt.tensor([[1.0, 2.0]])
    for fn in (tt.cumprod, tt.cummax, tt.cummin, tt.logcumsumexp):
        with pytest.raises(IndexError, match=fn.__name__):
            fn(x, 2)


def test_long_dim_is_exact():
    # the doubling scan against NumPy's sequential one, over a dim that needs 12 steps
    x = np.random.default_rng(0).standard_normal((3, 3000)) * 30
    np.testing.assert_allclose(tt.logcumsumexp(tt.tensor(x), 1).numpy(),
                               np.logaddexp.accumulate(x, axis=1), rtol=1e-13)
    values, indices = tt.cummax(tt.tensor(x), 1)
    np.testing.assert_array_equal(values.numpy(), np.maximum.accumulate(x, axis=1))
    np.testing.assert_array_equal(x[np.arange(3)[:, None], indices.numpy()], values.numpy())


def test_first_order_backward_records_no_ops():
    for fn in (tt.cumprod, tt.logcumsumexp):
        y = fn(tt.tensor(ZEROS, requires_grad=True), 1)
        with tt.record() as tape:
            y.backward(tt.ones_like(y))
        assert len(tape) == 0, tape
