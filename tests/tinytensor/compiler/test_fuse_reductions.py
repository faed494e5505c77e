"""Row reductions fuse with what they read and what reads them: softmax, log_softmax with
the NLL of cross_entropy, layer norm and RMS norm, forward and backward, each come out of
capture (reference ops and their decompositions) as a few row kernels. Sums are NumPy's
pairwise order, so programs of exactly-rounded ops stay bitwise equal to eager; with exp
and log, within twice eager's error against float64."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler.codegen import c, columns, cuda, rows as c_rows
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import columns as column_pass, fuse

from ._programs import bits, fused_instrs, interpreted, program_of
from .helpers import captured
from .test_codegen_cuda import ARCHS, COMPILERS, compile_report, host_runner

LENGTHS = (1, 7, 129, 1000)
DTYPES = (np.float32, np.float64)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def rows(n, dtype, seed=0, lead=(3, 2)):
    return (np.random.default_rng(seed).standard_normal(lead + (n,)) * 3).astype(dtype)


def assert_bitwise(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(bits(g), bits(w))


# ---------------------------------------------------------------- sums and maxima themselves
def sums(x):
    a = x * 1.5 - 0.25
    return (a.sum(-1, keepdim=True) * 0.5, a.sum(-1) + 1.0, (a * a).sum((1, 2)) - 2.0,
            a.amax(-1, keepdim=True) * 2.0, (a - a.amax(-1, keepdim=True)).abs() + 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS + (4097,))
def test_sums_and_maxima_over_rows_are_numpys_bits(n, dtype):
    x = rows(n, dtype)
    x.reshape(-1)[:3] = [-0.0, np.float32(1e30), -1e-30]   # signed zero, large and tiny terms
    program, inputs = program_of(sums, x)
    fused = fuse.run(program).verify()
    # one kernel per row shape: over (3, 2) rows of n, and over 3 rows of 2 * n
    assert len(fused_instrs(fused)) == 2 and all(i.op == "fused" for i in fused.instrs)
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), interpreted(program, inputs))


def test_a_sum_of_the_whole_array_and_a_nan_in_a_max():
    x = rows(33, np.float32)
    x[1, 0, 5] = np.nan

    def f(x):
        return (x * 2.0).sum() + 1.0, (x * 2.0).amax(-1) * 1.0

    program, inputs = program_of(f, x)
    fused = fuse.run(program)
    assert len(fused_instrs(fused)) == 2
    got, want = c.build(pipeline.after_fusion(fused, "c"))(inputs), interpreted(program, inputs)
    assert_bitwise(got, want)
    assert np.isnan(got[1][1, 0]) and np.isnan(got[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rows_max_in_lanes_keeps_the_first_nan_infinities_and_every_length(dtype):
    # the C max scans a row in c_rows.MAX_LANES interleaved lanes, block by block of
    # c_rows.MAX_BLOCK elements: rows shorter than the lanes, tails, several blocks, nans (of two signs: which one NumPy's SIMD reduction returns is its own
    # business, so a nan row is compared as nan), +-inf, all -inf
    lengths = [1, 3, c_rows.MAX_LANES, c_rows.MAX_LANES + 1, 2 * c_rows.MAX_LANES + 5, 100, c_rows.MAX_BLOCK,
               c_rows.MAX_BLOCK + 2, 2 * c_rows.MAX_BLOCK + c_rows.MAX_LANES + 3]
    for n in lengths:
        x = rows(n, dtype, seed=n, lead=(6,))
        x[1, -1] = np.inf
        x[2, :] = -np.inf
        neg_nan = np.copysign(np.array(np.nan, dtype), -1)
        x[3, n // 2] = neg_nan
        if n > 1:
            x[3, -1] = np.nan             # a later nan of the other sign: the first one wins
        x[4, 0] = np.nan
        x[5, -1] = -np.inf
        program, inputs = program_of(lambda x: (x * 1.0).amax(-1) + 0.0, x)
        (got,), (want,) = c.build(pipeline.lower(program, "c"))(inputs), interpreted(program, inputs)
        nan = np.isnan(want)
        assert list(np.nonzero(nan)[0]) == [3, 4] and np.array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(bits(got[~nan]), bits(want[~nan]))


def test_pairwise_leaves_are_numpys_recursion():
    assert c_rows.pairwise_leaves(128) == [(0, 128)]
    assert c_rows.pairwise_leaves(129) == [(0, 64), (64, 65)]
    for n in (129, 1000, 4097, 50257):
        leaves = c_rows.pairwise_leaves(n)
        assert sum(m for _, m in leaves) == n and all(m <= 128 for _, m in leaves)
        assert [a for a, _ in leaves] == list(np.cumsum([0] + [m for _, m in leaves[:-1]]))


# ---------------------------------------------------------------- the composite ops, fwd + bwd
def _weights(n, dtype):
    rng = np.random.default_rng(7)
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(dtype), (0.1 * rng.standard_normal(n)).astype(dtype)


def softmax_step(x, g):
    y = F.softmax(x * 0.5, -1)
    (y * g).sum().backward()
    return y


def log_softmax_step(x, g):
    y = F.log_softmax(x, -1)
    (y * g).sum().backward()
    return y


def cross_entropy_step(x, t):
    loss = F.cross_entropy(x, t)     # log_softmax, then the NLL of the targets
    loss.backward()
    return loss


def layer_norm_step(x, g, w, b):
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    (y * g).sum().backward()
    return y


def rms_norm_step(x, g, w):
    y = F.rms_norm(x, (x.shape[-1],), w)
    (y * g).sum().backward()
    return y


def case(name, n, dtype):
    """(step, input arrays, which of them require grad)."""
    x, g = rows(n, dtype, 1), rows(n, dtype, 2)
    w, b = _weights(n, dtype)
    if name == "cross_entropy":
        x = x.reshape(-1, n)
        return cross_entropy_step, [x, np.arange(x.shape[0]) % n], [True, False]
    return {"softmax": (softmax_step, [x, g], [True, False]),
            "log_softmax": (log_softmax_step, [x, g], [True, False]),
            "layer_norm": (layer_norm_step, [x, g, w, b], [True, False, True, True]),
            "rms_norm": (rms_norm_step, [x, g, w], [True, False, True])}[name]


# kernels each captured step comes out as, for rows longer than one: the forward and the
# backward of one row shape are one kernel; cross_entropy's NLL picks its terms by gather
# and scatter_add, which stay NumPy's between kernels
KERNELS = {"softmax": 1, "log_softmax": 1, "cross_entropy": 4, "layer_norm": 1, "rms_norm": 1}
EXACT = ("layer_norm", "rms_norm")     # no exp or log: the compiled step is eager's bits


def compiled_case(name, n, dtype):
    step, arrays, grad = case(name, n, dtype)
    tensors = tuple(tt.tensor(a, requires_grad=r) for a, r in zip(arrays, grad))
    program, want, inputs = captured(step, tensors)
    fused = fuse.run(program).verify()
    return fused, c.build(pipeline.after_fusion(fused, "c"))(inputs), want, (step, arrays, grad)


def reference(step, arrays, grad):
    """The step run eagerly in float64: its result and the gradients, as arrays."""
    tensors = [tt.tensor(a.astype(np.float64) if a.dtype.kind == "f" else a, requires_grad=r)
               for a, r in zip(arrays, grad)]
    out = step(*tensors)
    return [out.data] + [t.grad.data for t in tensors if t.requires_grad]


# every composite at every length, in alternating dtypes (a Latin square, not the cube):
# each composite meets both dtypes, at two lengths each, and each length both dtypes; the
# dtype only changes the C type and the tolerance branch below, so the 40-case cube (one
# gcc compile each) proved nothing these 20 do not
SQUARE = [(name, n, DTYPES[(i + j) % 2]) for i, name in enumerate(sorted(KERNELS))
          for j, n in enumerate(LENGTHS)]


@pytest.mark.parametrize("name,n,dtype", SQUARE)
def test_composites_forward_and_backward_fuse_into_few_kernels(name, n, dtype):
    fused, got, want, spec = compiled_case(name, n, dtype)
    kernels = fused_instrs(fused)
    if n > 1:
        assert len(kernels) == KERNELS[name], [k.attrs["name"] for k in kernels]
    assert not {"softmax", "log_softmax", "layer_norm", "rms_norm"} & {i.op for i in fused.instrs}
    # every reduction over rows is in a kernel (the loss's sum of everything, alone, is NumPy's)
    assert not [i for i in fused.instrs if fuse.row_reduction(i) and fuse.row_reduction(i)[1] > 0]
    if name in EXACT:
        assert_bitwise(got, want)
        return
    ref = reference(*spec)
    for g, w, r in zip(got, want, ref):
        assert g.shape == w.shape and g.dtype == w.dtype
        if dtype == np.float64:   # the reference is eager itself: a few ulps of the values
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15 * max(1.0, float(np.abs(w).max())))
            continue
        scale = max(float(np.abs(r).max()), 1e-30)
        err_c = float(np.abs(g - r).max()) / scale
        err_e = float(np.abs(w - r).max()) / scale
        assert err_c <= 2 * err_e + 1e-7, f"{name} n={n}: compiled error {err_c:.3g}, eager {err_e:.3g}"


def test_softmax_forward_and_backward_are_one_kernel_with_the_scale_before_it():
    fused, _, _, _ = compiled_case("softmax", 129, np.float32)
    (k,) = fused_instrs(fused)
    ops = [i.op for i in k.attrs["body"].instrs]
    assert ops[:6] == ["mul", "amax", "sub", "exp", "sum", "div"]   # y = softmax(x * 0.5)
    assert ops[6:].count("sum") == 1 and "sub" in ops[6:]            # gy - y * sum(gy)
    assert {v.shape for v in k.outputs} == {(3, 2, 129)}   # y, y * g for the loss, x's gradient


# ---------------------------------------------------------------- the CUDA backend's row kernels
def _cuda_programs():
    return {name: compiled_case(name, 129, np.float32)[0] for name in sorted(KERNELS)}


@pytest.mark.skipif(not COMPILERS, reason="neither nvcc nor NVRTC (cupy + nvidia-cuda-nvrtc) found")
@pytest.mark.parametrize("compiler", COMPILERS or ["none"])
def test_cuda_row_kernels_compile_without_spills(compiler, tmp_path):
    for name, program in _cuda_programs().items():
        source, names = cuda.program_source(program)
        assert "row < " in source, name
        for arch in ARCHS:
            rep = compile_report(source, names.values(), arch, compiler, tmp_path)
            assert sorted(rep) == sorted(names.values())
            assert not [k for k, r in rep.items() if r["spill_stores"] or r["spill_loads"] or r["stack"]]


@pytest.mark.parametrize("name", ["softmax", "layer_norm"])
def test_cuda_row_kernels_on_the_host_match_eager(name, tmp_path):
    # one thread per row over a 3 x 7 grid: 6 rows, so some threads get none, and the
    # compensated sum is within a few ulps of NumPy's pairwise one
    step, arrays, grad = case(name, 129, np.float32)
    tensors = tuple(tt.tensor(a, requires_grad=r) for a, r in zip(arrays, grad))
    program, want, inputs = captured(step, tensors)
    got = host_runner(fuse.run(program), tmp_path)(inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6 * max(1.0, float(np.abs(w).max())))


# ---------------------------------------------------------------- sums over leading dims
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_sums_over_leading_dims_adds_rows_in_order_from_zero(dtype):
    # what the column kernels reproduce (codegen/c.py): not pairwise, one row after another
    for nrows in (1, 2, 7, 8, 9, 127, 129, 1000):
        for ncols in (2, 3, 8, 129):
            a = rows(ncols, dtype, seed=nrows, lead=(nrows,))
            a *= 10.0 ** np.random.default_rng(ncols).integers(-4, 5, a.shape)
            acc = np.zeros(ncols, dtype)
            for row in a:
                acc = acc + row
            np.testing.assert_array_equal(bits(np.add.reduce(a, axis=0)), bits(acc))
            np.testing.assert_array_equal(bits(a.reshape(1, nrows, ncols).sum((0, 1))), bits(acc))


def column_sums(x, b):
    g = (x * b + 1.0) * x                   # a bias-gradient-like chain
    lead = tuple(range(x.ndim - 1))
    return g.sum(lead), g * 2.0, (x - 0.5).sum(lead, keepdim=True), x.sum(0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 8), (1000, 3), (129, 2), (3, 5, 7), (2, 129, 17), (8, 128, 64)])
def test_sums_over_leading_dims_are_column_kernels_with_numpys_bits(shape, dtype):
    x, b = rows(shape[-1], dtype, lead=shape[:-1]), rows(shape[-1], dtype, seed=1, lead=())
    x.reshape(-1)[:4] = [-0.0, 1e30, -1e-30, -0.0]
    program, inputs = program_of(column_sums, x, b)
    compiled = c.build(pipeline.lower(program, "c"))
    assert_bitwise(compiled(inputs), interpreted(program, inputs))
    kernels = [k for k in fused_instrs(column_pass.run(fuse.run(program))) if columns.is_column_kernel(k.attrs["body"])]
    # the chain's kernel sums its own result (g is an output too: g * 2.0 reads it)
    assert any(body_ops(k)[-1] == "sum" and "mul" in body_ops(k) for k in kernels)
    assert sum(body_ops(k).count("sum") for k in kernels) == 3
    assert "void" in compiled.source and "+=" in compiled.source


def body_ops(kernel):
    return [i.op for i in kernel.attrs["body"].instrs]


def test_a_column_of_negative_zeros_sums_to_zero_as_in_numpy():
    x = np.full((5, 3), -0.0, np.float32)
    program, inputs = program_of(lambda x: (x * 1.0).sum(0), x)
    [got] = c.build(pipeline.lower(program, "c"))(inputs)
    assert not np.signbit(got).any()
    assert_bitwise([got], interpreted(program, inputs))


def test_one_column_or_a_strided_operand_stays_numpys():
    # one column is a contiguous run NumPy sums pairwise; x.mT * 2.0 is a transposed
    # array in eager (NumPy keeps its operands' layout), summed in another order
    def f(x, y):
        return (x * 2.0).sum(0), (y.mT * 2.0).sum(0)
    program, inputs = program_of(f, rows(1, np.float32, lead=(300,)), rows(300, np.float32, lead=(7,)))
    fused = column_pass.run(fuse.run(program))
    assert not any(columns.is_column_kernel(k.attrs["body"]) for k in fused_instrs(fused))
    assert_bitwise(c.build(pipeline.lower(program, "c"))(inputs), interpreted(program, inputs))


def test_a_column_sum_joins_a_kernel_whose_body_holds_scalar_constants():
    # the producer's kernel keeps its own scalars (GELU's 0.5, 0.044715, ...) in its body:
    # joined by the column sum, they stay constants of the kernel, not inputs the runner
    # looks for among the program's values (that was a KeyError at the first call)
    import tinytensor.functional as F

    def f(x, w):
        return F.gelu(x * w + 1.0, approximate="tanh"), (x * w).sum(0) + x.amax(0) * 0.0
    program, inputs = program_of(f, rows(8, np.float32, lead=(6,)), rows(8, np.float32, seed=1, lead=()))
    fused = column_pass.run(fuse.run(program))
    for k in fused_instrs(fused):
        assert not set(k.inputs) & set(k.attrs["body"].consts)
    got, want = c.build(pipeline.lower(program, "c"))(inputs), interpreted(program, inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)   # C tanh is not NumPy's
    assert_bitwise(got[1:], want[1:])


def test_the_bias_gradients_of_an_mlp_step_are_column_kernels_with_eagers_bits():
    from .helpers import mlp, mse_step
    rng = np.random.default_rng(0)
    x, y = tt.tensor(rng.standard_normal((64, 16)).astype(np.float32)), tt.tensor(
        rng.standard_normal((64, 4)).astype(np.float32))
    program, outs, arrays = captured(mse_step, (mlp(), x, y))
    fused = column_pass.run(fuse.run(program))
    sums = [k for k in fused_instrs(fused) if columns.is_column_kernel(k.attrs["body"])]
    assert len(sums) == 2 and not any(i.op == "sum_to" for i in fused.instrs)
    assert_bitwise(c.build(pipeline.lower(program, "c"))(arrays), outs)
