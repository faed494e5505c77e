"""The C backend: fused kernels are bitwise equal to eager on exactly-rounded ops, within
twice eager's error on exp/log/tanh and what is built from them, and a missing C
compiler is a clear error."""
import math

import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler import cache_disk
from tinytensor.compiler.codegen import c, toolchain
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import fuse

from ._programs import bits, eager, fused_instrs, interpreted, program_of


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def compiled(fn, *arrays):
    program, inputs = program_of(fn, *arrays)
    fused = fuse.run(program).verify()
    assert fused_instrs(fused), "nothing was fused: the test would not exercise the C backend"
    return c.build(pipeline.after_fusion(fused, "c"))(inputs), program, inputs


def specials(dtype):
    fi = np.finfo(dtype)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal, -fi.smallest_subnormal,
         fi.tiny, -fi.tiny, fi.tiny / 3, fi.max, -fi.max, 1.0, -1.0, 0.5, 1e-30, -1e-30,
         88.72, 89.0, -87.3, -103.9, -104.0, 709.7, 710.0, -745.0, -746.0, 20.0, -20.0, 9.0, 40.0]
    return np.array(v, dtype)


def wide(dtype, n=4096, seed=0):
    """Specials, log-uniform magnitudes over the whole range (both signs), and N(0, 3)."""
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    mags = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), n))
    signs = rng.choice([-1.0, 1.0], n)
    return np.concatenate([specials(dtype), (mags * signs).astype(dtype),
                           (rng.standard_normal(n) * 3).astype(dtype)])


def exact_ops(x, y, col):
    a = x * y + x / y - (-x)
    m = tt.maximum(a, y) - tt.minimum(x, col)
    w = tt.where(x > y, m, tt.relu(a))
    d = (w.abs().sqrt() + x ** 2 - y ** -1) * (x <= col).to(x.dtype) + tt.rsqrt(x.abs())
    e = tt.where((x == y) | (x != col), d, x * 0.75) - 2.5
    keep = tt.logical_or(tt.logical_not(x < 0.0), (e > 1.0) ^ ~(x > y)) & (e != 0.0)
    return e, keep, (e < 0.0).to(tt.float64).to(x.dtype)


def exact_inputs(dtype):
    """x (4, 24) with the special values, y (24,), col (4, 1): exact_ops' inputs, here and
    in test_codegen_cuda.py."""
    rng = np.random.default_rng(1)
    s = specials(dtype)
    x = np.concatenate([s, np.roll(s, 3), rng.standard_normal(36)]).astype(dtype).reshape(4, 24)
    x[0, :4] = [0.0, -0.0, 0.0, -0.0]
    y = rng.standard_normal(24).astype(dtype)
    y[:4] = [0.0, 0.0, -0.0, -0.0]  # maximum/minimum/where on signed zeros and ties
    y[5] = x[1, 5]
    return x, y, rng.standard_normal((4, 1)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exactly_rounded_ops_are_bitwise_equal_to_eager(dtype):
    x, y, col = exact_inputs(dtype)
    with np.errstate(all="ignore"):
        got, program, inputs = compiled(exact_ops, x, y, col)
        want = eager(exact_ops, x, y, col)
    assert len(fused_instrs(fuse.run(program))) == 1
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(bits(g), bits(w))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integers_are_compared_and_selected_in_a_kernel_with_numpys_results(dtype):
    # cross-entropy's ignore_index: labels != -100, where(valid, labels, 0), on int64 labels
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min + 1, -100, -1, 0, 1, 7, info.max - 1, info.max], dtype)
    b = np.array([0, info.min, -100, info.max, 0, 2, 7, info.max, info.min], dtype)

    def f(a, b):
        keep = (a != -100) & (a < b) | (a == info.min) | (b >= info.max)
        return tt.where(keep, a, info.min), tt.where(a > b, b, a) <= 1, a.expand(2, 9) == b
    got, program, _ = compiled(f, a, b)
    assert {ins.op for ins in fuse.run(program).instrs} == {"fused"}   # no op left to NumPy
    for g, w in zip(got, eager(f, a, b)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_broadcasts_a_row_a_column_a_scalar_and_an_expand():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 1, 5)).astype(np.float32)
    row = rng.standard_normal(5).astype(np.float32)
    col = rng.standard_normal((4, 1)).astype(np.float32)

    def f(x, row, col):
        return (x * 3.0 + row) * col - x.expand(3, 4, 5)

    got, program, inputs = compiled(f, x, row, col)
    np.testing.assert_array_equal(bits(got[0]), bits(eager(f, x, row, col)[0]))
    np.testing.assert_array_equal(bits(got[0]), bits(interpreted(program, inputs)[0]))


def test_non_fused_ops_run_between_kernels_and_inputs_need_not_be_contiguous():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 6)).astype(np.float64)
    w = rng.standard_normal((6, 8)).astype(np.float64)

    def f(x, w):
        h = (x * 2.0 - 1.0) @ w          # matmul stays NumPy, between two kernels
        return (h.transpose(0, 1) * 0.5 + 1.0).relu(), h.sum()

    got, program, inputs = compiled(f, x, w)
    for g, e in zip(got, eager(f, x, w)):
        np.testing.assert_array_equal(bits(g), bits(e))


def ulp_error(y, ref, dtype):
    """Per-element error in units of the dtype's spacing at the reference value."""
    ref = np.asarray(ref)
    finite = np.isfinite(ref)
    r = ref[finite]
    with np.errstate(over="ignore"):
        spacing = np.spacing(np.abs(r).astype(dtype)).astype(ref.dtype)
    spacing = np.maximum(spacing, np.finfo(dtype).smallest_subnormal)
    return np.abs(y[finite].astype(ref.dtype) - r) / spacing


def _gelu_ref(np_):
    return lambda x: 0.5 * x * (1.0 + np_.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _erf_ref(f, far):
    """An elementwise reference for erf-based f (NumPy has none): math's float64 one for
    float32 inputs (handed over as float64), 30-digit mpmath for float64 ones (handed over
    as long double), on |x| <= 40, `far(x)` (the limit it has reached) past that."""
    import mpmath
    mpmath.mp.dps = 30

    def ref(x):
        precise = x.dtype != np.float64
        out = np.array(far(x.astype(np.float64)), dtype=np.float64)
        near = np.abs(x) <= 40
        out[near] = [float(f(mpmath, mpmath.mpf(float(v)))) if precise else f(math, float(v)) for v in x[near]]
        return out
    return ref


MATH = {  # name: (tinytensor function, reference on the wider dtype)
    "exp": (tt.exp, np.exp),
    "log": (tt.log, np.log),
    "tanh": (tt.tanh, np.tanh),
    "sigmoid": (tt.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x))),
    "silu": (F.silu, lambda x: x / (1.0 + np.exp(-x))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), _gelu_ref(np)),
    "erf": (tt.erf, _erf_ref(lambda m, v: m.erf(v), np.sign)),
    "gelu": (F.gelu, _erf_ref(lambda m, v: v * m.erfc(-v / m.sqrt(2)) / 2, lambda x: np.where(x > 0, x, 0.0))),
}


def math_case(name, dtype):
    """(f, x, ref_fn): the function under test with a second op, so that it gets a kernel of
    its own, its wide-range inputs (log's made non-negative plus its edge values), and the
    reference to measure errors against."""
    op, ref_fn = MATH[name]
    x = wide(dtype)
    if name == "log":
        x = np.abs(x)
        x[:3] = [-1.0, -0.0, -np.inf]
    return (lambda t: op(t) * 1.0), x, ref_fn


# gcc takes ~3 s over a kernel of the double erf (5 pieces): those two are slow tests, and
# test_tt_erf.py measures the double erf and erfc directly
_SLOW = {("erf", np.float64), ("gelu", np.float64)}


@pytest.mark.parametrize("name, dtype", [
    pytest.param(n, d, marks=[pytest.mark.slow] if (n, d) in _SLOW else [], id=f"{n}-{np.dtype(d).name}")
    for n in sorted(MATH) for d in (np.float32, np.float64)])
def test_math_functions_are_within_twice_eagers_error(name, dtype):
    f, x, ref_fn = math_case(name, dtype)
    with np.errstate(all="ignore"):
        (got,), _, _ = compiled(f, x)
        (want,) = eager(f, x)
        wider = np.float64 if dtype == np.float32 else np.longdouble
        ref = ref_fn(x.astype(wider))
    if name == "gelu":
        # eager's float64 x (1 + erf) overflows at |x| ~ max (2x does), the kernel's x cdf(x)
        # does not: compared where eager's form stays finite
        keep = np.abs(x) < 1e300
        got, want, ref, x = got[keep], want[keep], ref[keep], x[keep]
    # inf and nan exactly where eager has them
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    # over the whole range, and where |x| <= 2 on its own: there gelu and silu are well
    # conditioned, so the bound is not loosened by the cancellation both make for x << 0
    for ok in (np.isfinite(want), np.isfinite(want) & (np.abs(x) <= 2)):
        err_c = ulp_error(got[ok], ref[ok], dtype)
        err_e = ulp_error(want[ok], ref[ok], dtype).max()
        assert err_c.max() <= 2 * err_e + 1.0, (
            f"{name} {np.dtype(dtype).name}: compiled error {float(err_c.max()):.3g} ulp, eager "
            f"{float(err_e):.3g} ulp (worst at x = {float(x[ok][np.argmax(err_c)])!r})")


def test_a_missing_c_compiler_names_the_package_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    program, _ = program_of(lambda x: (x * 2.0).exp() + 1.0, np.ones(3, np.float32))
    with pytest.raises(cache_disk.CompilerNotFound, match=r"apt-get install gcc.*build-essential"):
        c.build(pipeline.lower(program, "c"))


def test_generated_source_keeps_ieee_flags_and_one_function_per_kernel():
    assert "-ffp-contract=off" in toolchain.FLAGS and not any("fast-math" in f for f in toolchain.FLAGS)
    x = np.ones((2, 3), np.float32)
    program, _ = program_of(lambda x: ((x * 2.0).exp() @ x.transpose(0, 1)).tanh() * 3.0, x)
    fused = fuse.run(program)
    source, names = c.program_source(fused)
    assert len(names) == len(fused_instrs(fused)) == 2
    for name in names.values():
        assert f"void {name}(void *const *b)" in source
        assert f"void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts)" in source


def test_the_real_clones_compile_and_give_the_one_clone_builds_bits(monkeypatch):
    # the suite compiles only this CPU's clone (tests/clones.py); here the kernels carry the
    # shipped target_clones attribute, all three clones are compiled, and the one the loader
    # picks gives exactly the bits the rest of the suite checked
    from ... import clones
    if not clones.REAL:
        pytest.skip("no target_clones on this platform: the suite builds what ships")
    x = wide(np.float32, n=300).reshape(-1, 10)
    y = wide(np.float64, n=300).reshape(-1, 10)

    def step(x, y):
        return (x * 1.5).exp().tanh() + x.sqrt(), (y * y).sum(-1), tt.where(y > 0.0, y.log(), y)
    fused = fuse.run(program_of(step, x, y)[0])
    assert "target_clones(" not in c.program_source(fused)[0]   # the suite's one clone
    with np.errstate(all="ignore"):
        one, _, _ = compiled(step, x, y)
        monkeypatch.setattr(toolchain, "CLONES", clones.REAL)
        assert "target_clones(" in c.program_source(fused)[0]
        real, _, _ = compiled(step, x, y)
    assert len(one) == len(real) == 3
    for a, b in zip(one, real):
        np.testing.assert_array_equal(bits(a), bits(b))
