"""tt_math.h's erf, erfc and exact GELU, called directly from a small C harness: float
within 1 ulp of the float64 value (torch's own bound), double within a few ulp, the
special values (+-0 with its sign, +-inf, nan, subnormals, large |x|), and its
coefficient tables exactly those of ops/_erf_coeffs.py (one source of truth)."""
import ctypes
import math

import numpy as np
import pytest
import torch

from tinytensor.compiler import cache_disk
from tinytensor.compiler.codegen import toolchain
from tinytensor.tools import erf_coeffs

FUNCS = {  # C function: (element type, reference on a Python float)
    "tt_erff": ("float", math.erf), "tt_erfcf": ("float", math.erfc),
    "tt_erf": ("double", math.erf), "tt_erfc": ("double", math.erfc),
    "tt_gelu_erff": ("float", lambda x: 0.5 * x * math.erfc(-x / math.sqrt(2.0))),
    "tt_gelu_erf_slopef": ("float", lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0))
                           + x * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    # its own cache directory: the harness is compiled once per run of this module
    old = cache_disk.os.environ.get("TINYTENSOR_CACHE_DIR")
    cache_disk.os.environ["TINYTENSOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("tt_erf_cache"))
    try:
        with open(toolchain.HEADER) as f:
            header = f.read()
        source = toolchain.INCLUDE + "\n" + "\n".join(
            f"void run_{name}(const {t} *restrict x, {t} *restrict y, long n) "
            f"{{ for (long i = 0; i < n; i++) y[i] = {name}(x[i]); }}"
            for name, (t, _) in FUNCS.items())
        yield cache_disk.load(source, toolchain.FLAGS, extra=header)
    finally:
        if old is None:
            del cache_disk.os.environ["TINYTENSOR_CACHE_DIR"]
        else:
            cache_disk.os.environ["TINYTENSOR_CACHE_DIR"] = old


def call(lib, name, x):
    x = np.ascontiguousarray(x, dtype=np.float32 if FUNCS[name][0] == "float" else np.float64)
    y = np.empty_like(x)
    getattr(lib, f"run_{name}")(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                                ctypes.c_long(x.size))
    return y


def ulps(got, want, dtype):
    """|got - want| in units of the dtype's spacing at want (subnormal spacing at least)."""
    fi = np.finfo(dtype)
    with np.errstate(over="ignore"):
        sp = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / np.maximum(sp, float(fi.smallest_subnormal))


def sweep32():
    tiny = np.geomspace(1e-45, 13, 20000).astype(np.float32)
    edges = np.array([1.0, 2.0, 4.0, 12.0], np.float32)
    near = np.concatenate([edges, np.nextafter(edges, np.float32(0)), np.nextafter(edges, np.float32(20))])
    x = np.concatenate([np.linspace(-13, 13, 60001, dtype=np.float32), tiny, -tiny, near, -near])
    return x


@pytest.mark.parametrize("name", ["tt_erff", "tt_erfcf"])
def test_float_erf_within_one_ulp_of_the_float64_value(lib, name):
    # tt_erff in float arithmetic (0.83 ulp over every 7th float32: tt_math.h), tt_erfcf in double (0.51)
    x = np.concatenate([sweep32(), stratified32()])
    got = call(lib, name, x)
    t = torch.from_numpy(x.astype(np.float64))
    want = (torch.special.erf(t) if name == "tt_erff" else torch.special.erfc(t)).numpy()
    err = ulps(got, want, np.float32)
    assert err.max() <= 1.0, (name, float(x[err.argmax()]), float(err.max()))


def stratified32(step=1031, top=16.0):
    """Every `step`-th float32 of |x| < top by bit pattern, both signs (~2M values at the
    default step: every binade from the subnormals up, evenly within each), and every float
    within 64 of the ends of the GELU's clamp and 0."""
    n = int(np.float32(top).view(np.int32))
    pos = np.arange(0, n, step, dtype=np.int32).view(np.float32)
    amax = np.float32(14.85).view(np.int32)
    near = np.arange(amax - 64, amax + 64, dtype=np.int32).view(np.float32)
    x = np.concatenate([pos, near, np.arange(0, 64, dtype=np.int32).view(np.float32)])
    return np.concatenate([x, -x])


def _gelu_refs(x):
    """gelu, its slope and the cdf in float64 (torch's erfc, within an ulp of float64)."""
    t = torch.from_numpy(x.astype(np.float64))
    cdf = 0.5 * torch.special.erfc(-t / math.sqrt(2.0))
    pdf = torch.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return {"tt_gelu_erff": (t * cdf).numpy(), "tt_gelu_erf_slopef": (cdf + t * pdf).numpy()}, cdf.numpy()


@pytest.mark.parametrize("name", ["tt_gelu_erff", "tt_gelu_erf_slopef"])
def test_float_exact_gelu_and_its_slope_within_two_ulp(lib, name):
    # float arithmetic (tt_math.h `tt_gelu_cdff`), down to x = -14.85, where gelu is ~1e-45: no
    # cancellation in erfc's form (1 + erf would lose every digit below x ~ -5.5 in float, and
    # ~8 digits at x = -7 in double). Every 7th float32: gelu 1.32 ulp, slope 1.31 (tt_math.h)
    x = np.concatenate([stratified32(), np.linspace(-16, 16, 20001, dtype=np.float32)])
    got = call(lib, name, x)
    refs, cdf = _gelu_refs(x)
    want = refs[name]
    # the slope crosses 0 at x ~ -0.75, where cdf and x pdf cancel: there its error is
    # counted in ulp of cdf, the sum's larger term (its condition), elsewhere of the value
    scale = np.maximum(np.abs(want), cdf) if name.startswith("tt_gelu_erf_slope") else np.abs(want)
    err = ulps(got - want + scale, scale, np.float32)
    assert err.max() <= 2.0, (name, float(x[err.argmax()]), float(err.max()))
    assert err.max() > 0.5   # the sample reaches values that are not exactly rounded: the test can tell


def test_float_exact_gelu_far_out_and_special_values(lib):
    x = np.array([-np.inf, -1e30, -15.0, -14.9, 15.0, 1e30, np.inf, np.nan, 0.0, -0.0], np.float32)
    y, s = call(lib, "tt_gelu_erff", x), call(lib, "tt_gelu_erf_slopef", x)
    np.testing.assert_array_equal(y[1:7], x[1:7] * np.array([0, 0, 0, 1, 1, 1], np.float32))
    # the slope at +-inf is cdf + x pdf = 1 + inf * 0: nan, as torch, NumPy and the double kernel
    np.testing.assert_array_equal(s[:7], [np.nan, 0.0, 0.0, 0.0, 1.0, 1.0, np.nan])
    assert np.isnan(y[7]) and np.isnan(s[7]) and np.isnan(y[0])   # -inf * 0, as eager's x cdf(x)
    np.testing.assert_array_equal(y[8:], [0.0, -0.0])
    np.testing.assert_array_equal(np.signbit(y[8:]), [False, True])


@pytest.mark.parametrize("name, bound", [("tt_erf", 2), ("tt_erfc", 5)])
def test_double_erf_within_a_few_ulp(lib, name, bound):
    # measured against 30-digit mpmath: erf <= 2.2 ulp, erfc <= 5.2 ulp (the same pieces as
    # eager's); math's own error (~1 ulp) is inside the + 1
    tiny = np.geomspace(1e-320, 30, 6000)
    x = np.concatenate([np.linspace(-30, 30, 60001), tiny, -tiny, [0.5, np.nextafter(0.5, 0), 4.0, 26.5, 27.3]])
    got = call(lib, name, x)
    want = np.array([FUNCS[name][1](float(v)) for v in x])
    ok = want != 0
    err = np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))
    assert err.max() <= bound + 1, (name, float(x[ok][err.argmax()]), float(err.max()))
    assert np.all(np.abs(got[~ok]) < 1e-320)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(lib, dtype):
    fi = np.finfo(dtype)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal, -fi.smallest_subnormal,
                  fi.max, -fi.max, 1e4, -1e4], dtype)
    f = "f" if dtype == np.float32 else ""
    e, ec = call(lib, f"tt_erf{f}", x), call(lib, f"tt_erfc{f}", x)
    np.testing.assert_array_equal(e[:5], [0.0, -0.0, 1.0, -1.0, np.nan])
    np.testing.assert_array_equal(np.signbit(e[:2]), [False, True])
    np.testing.assert_array_equal(ec[:5], [1.0, 1.0, 0.0, 2.0, np.nan])
    # erf(d) = 2/sqrt(pi) d rounded: d itself at the smallest subnormal, sign kept
    np.testing.assert_array_equal(e[5:7], x[5:7])
    np.testing.assert_array_equal(ec[5:7], [1.0, 1.0])
    np.testing.assert_array_equal(e[7:], [1.0, -1.0, 1.0, -1.0])
    np.testing.assert_array_equal(ec[7:], [0.0, 2.0, 0.0, 2.0])


def test_c_tables_are_the_python_tables():
    with open(toolchain.HEADER) as f:
        header = f.read()
    assert erf_coeffs.c_block() in header
    # and the block is what the tables say, not a stale copy: a changed coefficient shows
    from tinytensor.ops._erf_coeffs import PIECES
    changed = {d: dict(t) for d, t in PIECES.items()}
    mid, half, coeffs = changed["float32_c"]["large"]
    changed["float32_c"]["large"] = (mid, half, coeffs[:-1] + (coeffs[-1] * 2,))
    assert erf_coeffs.c_block(changed) not in header
