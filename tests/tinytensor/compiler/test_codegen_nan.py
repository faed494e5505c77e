"""The C backend on signs: a negative constant meets a negation and still compiles, and
programs of exactly-rounded ops give NumPy's bits on nans of both signs (negation as a
sign flip, nan constants by their bits, the nan NumPy's max over a row returns)."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler.codegen import c, rows
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import fuse

from ._programs import bits, eager, fused_instrs, interpreted, program_of


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def assert_bits(got, want):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        bad = np.flatnonzero(bits(g) != bits(w))
        assert bad.size == 0, (f"output {k}: bits differ at {bad[:8]}: got {bits(g).reshape(-1)[bad[:4]]}, "
                               f"want {bits(w).reshape(-1)[bad[:4]]}")


def signed_nans(dtype, n=67, seed=0):
    """x and y with nans of both signs, and infinities and signed zeros; 67 elements:
    vector loops and a scalar tail. Never a nan in both at one place: which of two nans
    a + - * / returns is not NumPy's to promise (its own multiply returns x's in its
    vector loop and y's in its scalar tail, NumPy 2.4 on AVX2)."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(n) * 3).astype(dtype), (rng.standard_normal(n) * 3).astype(dtype)
    nan = np.array(np.nan, dtype)
    x[[1, 5, 9, 20, 33, 64, 66]] = [nan, -nan, nan, -nan, -nan, nan, -nan]
    y[[3, 7, 10, 21, 40, 63, 65]] = [-nan, nan, -nan, nan, -nan, nan, nan]
    x[50:54], y[50:54] = [np.inf, -np.inf, 0.0, -0.0], [0.0, np.inf, np.inf, -np.inf]
    return x, y


def negations(x, y):
    # each would let GCC fold a unary minus into its neighbour: same numbers, another nan
    return (-(x / 3.0), y + (-x), y - (-x), x * -1.0, x / -1.0, (-x) * 2.0, -(x * y),
            (-x) / y, tt.maximum(-x, y), -x + 0.0, -1.0 * x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negation_flips_the_sign_of_a_nan_as_numpy_does(dtype):
    x, y = signed_nans(dtype)
    g = tt.compile(negations, backend="c")
    with np.errstate(all="ignore"):
        g(tt.tensor(x), tt.tensor(y))   # the capture: eager's results
        got = g(tt.tensor(x), tt.tensor(y))   # the C program's
        want = eager(negations, x, y)
    assert_bits([g.data for g in got], want)


def test_a_negative_one_element_constant_meeting_a_negation_compiles():
    # gcc rejected `(--0x1p-1f)`: the negation of the literal of a negative constant
    def f(x):
        k = tt.tensor(np.array([-0.5], np.float32))
        return (x * 2.0).exp() + (-k)

    x = np.array([0.25], np.float32)
    g = tt.compile(f, backend="c")
    g(tt.tensor(x))
    got = g(tt.tensor(x))
    assert_bits([got.data], eager(f, x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_constants_keep_their_sign_and_payload(dtype):
    ints = {4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    payload = np.array(np.nan, dtype).view(ints) | ints(5)   # a quiet nan with a payload
    sign = ints(1 << (8 * np.dtype(dtype).itemsize - 1))
    consts = [np.array(-np.nan, dtype), payload.view(dtype), (payload | sign).view(dtype)]

    def f(x):
        ks = [tt.tensor(np.array([k])) for k in consts]
        return (*(x * 1.5 + k for k in ks), *(k - x * 1.5 for k in ks), *(x / k for k in ks),
                *(tt.where(x > 0.0, k, x) for k in ks))

    x = np.array([1.0, -np.nan, np.nan], dtype)
    program, inputs = program_of(f, x)
    fused = fuse.run(program)
    kernels = fused_instrs(fused)
    assert len(kernels) == 1 and len(kernels[0].inputs) == 1   # the constants are literals in it
    assert_bits(c.build(pipeline.after_fusion(fused, "c"))(inputs), eager(f, x))


def test_numpy_max_lanes_is_numpys_rule():
    # the rule is checked against NumPy at import of the rule; here: it found one here
    # (x86-64 and arm64 NumPy builds have SIMD max loops)
    for dtype in (np.float32, np.float64):
        assert rows.numpy_max_lanes(dtype) in (2, 4, 8, 16)


def nan_rows(n, dtype):
    """2n + 1 rows of n: one nan per row, of either sign, at every place of the row, and a
    row with two."""
    x = np.random.default_rng(n).standard_normal((2 * n + 1, n)).astype(dtype)
    for r in range(2 * n):
        x[r, r % n] = np.nan if r < n else -np.nan
    x[2 * n, [0, n - 1]] = [-np.nan, np.nan]
    return x


def check_row_maxima(dtype, lengths, softmax_like):
    xs = [nan_rows(n, dtype) for n in lengths]

    def f(*xs):   # a row kernel per length, one translation unit: one compile
        outs = []
        for x in xs:
            a = x * 1.0
            outs.append(a.amax(-1) * 2.0)
            if softmax_like:   # the max read back over its row: a second loop of the kernel
                outs.append((a - a.amax(-1, keepdim=True)).abs())
        return tuple(outs)

    program, inputs = program_of(f, *xs)
    fused = fuse.run(program)
    assert len(fused_instrs(fused)) >= len(lengths)
    got = c.build(pipeline.after_fusion(fused, "c"))(inputs)
    assert_bits(got, interpreted(program, inputs))
    assert_bits(got, eager(f, *xs))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_rows_max_returns_the_nan_numpy_returns(dtype):
    # a row shorter than one vector, one vector and a nan in the tail, many vectors
    check_row_maxima(dtype, (2, 9, 131), softmax_like=False)


@pytest.mark.slow   # gcc: ~1 s per row kernel of a max
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_of_every_length_around_numpys_lanes_return_its_nan(dtype):
    check_row_maxima(dtype, (1, 2, 5, 8, 9, 17, 33, 131), softmax_like=True)   # 4, 8 and 16 lanes
