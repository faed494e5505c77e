"""A max or min over tied zeros of both signs (issue 22, fuzz seed 100141: (p * 0.0).amax(dim=3)).

NumPy's reduction picks one of the tied zeros by where it falls in its SIMD lanes, so its sign
depends on the CPU's vector width and on the row's layout; eager's amax/amin give IEEE
754-2019's maximum/minimum instead (+0.0 wins a max, -0.0 a min), which the C row kernel
reproduces on any machine."""
import numpy as np
import pytest

import tinytensor as tt


def _zero_rows(n, rows=64, seed=0, dtype=np.float32):
    """Rows mixing -0.0, +0.0 and (some rows) negatives, so that most rows' max is a tied zero."""
    rng = np.random.default_rng(seed + n)
    x = np.where(rng.random((rows, n)) < 0.5, -0.0, 0.0).astype(dtype)
    neg = rng.random((rows, n)) < rng.random((rows, 1)) * 0.8
    x[neg] = -rng.random(int(neg.sum())).astype(dtype) - 0.5
    x[0] = -0.0                       # a row of -0.0 only: its max is -0.0
    x[1] = 0.0
    x[1, 0] = -0.0                    # one -0.0 among +0.0: its min is -0.0
    return x


def _ieee(x, is_max):
    out = x.max(axis=-1) if is_max else x.min(axis=-1)
    zero = out == 0
    pick = ((x == 0) & (np.signbit(x) != is_max)).any(axis=-1)
    return np.where(zero, np.where(pick == is_max, 0.0, -0.0).astype(x.dtype), out)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("n", [2, 9, 37, 200])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_amax_and_amin_of_tied_zeros_follow_ieee_maximum_and_minimum(n, dtype):
    x = _zero_rows(n, dtype=dtype)
    for is_max, fn in ((True, tt.amax), (False, tt.amin)):
        got = fn(tt.tensor(x), dim=-1).numpy()
        assert np.array_equal(_bits(got), _bits(_ieee(x, is_max))), (n, is_max)
    # the rule does not depend on the layout NumPy reduces in
    xt = np.ascontiguousarray(x.T).T
    assert np.array_equal(_bits(tt.amax(tt.tensor(xt), dim=-1).numpy()), _bits(_ieee(x, True)))
    # a full reduction (a NumPy scalar before the rule) and keepdim
    assert np.signbit(tt.tensor(x[1]).amax().numpy()) == np.False_
    assert np.signbit(tt.tensor(x[1]).amin().numpy()) == np.True_
    assert tt.tensor(x).amax(dim=1, keepdim=True).shape == (64, 1)


@pytest.mark.parametrize("n", [4, 37])
def test_a_compiled_row_max_gives_eagers_bits_on_tied_zeros(n):
    x = _zero_rows(n, seed=1)
    eager = tt.tensor(x).amax(dim=-1).numpy()
    for dtype in (np.float32, np.float64):
        fn = tt.compile(lambda a: (a * 1.0).amax(dim=-1), backend="c")
        got = fn(tt.tensor(x.astype(dtype))).numpy()
        assert np.array_equal(_bits(got), _bits(eager.astype(dtype))), (n, dtype)


def test_the_fuzz_program_of_seed_100141_is_bitwise():
    # (p0 * s0).amax(dim=3) with s0 = 0.0 on a (4, 1, 1, 4) leaf: rows of -0.0 and +0.0
    p0 = np.random.default_rng(141000).standard_normal((4, 1, 1, 4)).astype(np.float32)
    p = tt.tensor(p0, requires_grad=True)
    fn = tt.compile(lambda s: (p * s).amax(dim=3), backend="c")
    got = fn(0.0).detach().numpy()
    want = (tt.tensor(p0) * 0.0).amax(dim=3).numpy()
    assert np.array_equal(_bits(got), _bits(want))
    assert not np.signbit(want).any()          # every row holds a +0.0 (p0 > 0 somewhere)


def test_a_cuda_row_max_on_the_host_gives_eagers_bits_on_tied_zeros(tmp_path):
    # the CUDA backend's row max (one thread per row, RowKernel's scalar scan) rescans a zero
    # max too; its kernels compiled as C++ for the host, as test_codegen_cuda does
    from tinytensor.compiler.passes import fuse
    from .helpers import captured
    from .test_codegen_cuda import host_runner
    x = _zero_rows(37, rows=16, seed=2)
    program, want, inputs = captured(lambda a: ((a * 1.0).amax(dim=-1),), (tt.tensor(x),))
    got = host_runner(fuse.run(program), tmp_path)(inputs)
    assert np.array_equal(_bits(got[0]), _bits(want[0]))
    assert np.array_equal(_bits(want[0]), _bits(_ieee(x, True)))
