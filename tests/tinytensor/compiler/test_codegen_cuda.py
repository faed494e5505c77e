"""The CUDA backend.

Without a GPU: every kernel generated for the test programs compiles for sm_80 and sm_90
(nvcc and/or NVRTC, whichever is present, with the backend's own options) without a
warning or a spill; the exactly-rounded program's PTX has no fused multiply-add, no
approximate and no flush-to-zero instruction; and the generated kernels themselves,
compiled for the host by a C++ compiler under a small shim (a grid of a few blocks, run
in a loop), give eager's bits: that checks the indexing, the broadcasting and the
grid-stride loop, which no GPU-less compile can.

With a GPU (`gpu` marker): the backend against eager on CuPy, bitwise on exactly-rounded
ops, within twice eager's error on exp/log/tanh and what is built from them.
"""
import ctypes
import math
import shutil
import subprocess

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import symbolic
from tinytensor.compiler import instantiate
from tinytensor.compiler.codegen import cuda, runner as c_runner
from tinytensor.compiler.ir import Instr, Program, Value
from tinytensor.compiler.passes import fuse, plan
from tinytensor.kernels import _cuda
from tinytensor.ops import elementwise as E

from ._programs import bits, eager, fused_instrs, program_of
from .helpers import captured, gpt, lm_step, mlp, mse_step
from .test_codegen_c import MATH, exact_inputs, exact_ops, math_case, ulp_error, wide

ARCHS = ("sm_80", "sm_90")
COMPILERS = (["nvcc"] if _cuda.find_nvcc() else []) + (["nvrtc"] if _cuda.nvrtc_version() is not None else [])
MAX_REGISTERS = 64   # 256-thread blocks: 4 per SM at least, half of an H100's threads


def broadcasts(x, row, col):
    return (x * 3.0 + row) * col - x.expand(3, 4, 5), (x.transpose(0, 2) * 2.0).exp() * 0.5


def broadcast_inputs():
    rng = np.random.default_rng(2)
    return (rng.standard_normal((3, 1, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32),
            rng.standard_normal((4, 1)).astype(np.float32))


def all_math(x):
    return tuple(op(x) * 1.0 for op, _ in MATH.values())


def int_ops(a, b):
    """int64 labels compared and selected (cross-entropy's ignore_index), the minimum as a literal."""
    keep = (a != -100) & (a < b) | (a == -2**63)
    return tt.where(keep, a, -2**63), tt.where(a > b, b, a) <= 1


def huge():
    """A fused add-mul over 2^32 elements (built as IR: nothing is allocated), so the
    kernel needs 64-bit indices."""
    f32 = tt.float32
    a, b = Value((2**16, 2**16), f32, "input", "a"), Value((2**16,), f32, "input", "b")
    s, m = Value(a.shape, f32), Value(a.shape, f32)
    return fuse.run(Program([a, b], [Instr("add", E.Add, [a, b], [s]), Instr("mul", E.Mul, [s, s], [m])], [m]))


def _captured_program(step, model_fn, *arrays):
    program, _, _ = captured(step, (model_fn(),) + tuple(tt.tensor(a) for a in arrays))
    return fuse.run(program)


def _dynamic_program(step, model_fn, *arrays):
    """The fused program of a dynamic=True capture: kernels whose sizes are arguments."""
    from tinytensor.compiler.capture import capture
    from tinytensor.compiler import pipeline
    program, _, _ = capture(step, (model_fn(),) + tuple(tt.tensor(a) for a in arrays), dynamic=True)
    with symbolic.formulas():   # the passes compare formulas, as tt.compile runs them
        return fuse.run(pipeline.run(program)[0])


PROGRAMS = {  # name -> () -> fused program
    "exact_f32": lambda: fuse.run(program_of(exact_ops, *exact_inputs(np.float32))[0]),
    "exact_f64": lambda: fuse.run(program_of(exact_ops, *exact_inputs(np.float64))[0]),
    "broadcasts": lambda: fuse.run(program_of(broadcasts, *broadcast_inputs())[0]),
    "math_f32": lambda: fuse.run(program_of(all_math, wide(np.float32, 64))[0]),
    "math_f64": lambda: fuse.run(program_of(all_math, wide(np.float64, 64))[0]),
    "huge": huge,
    "ints": lambda: fuse.run(program_of(int_ops, np.array([-2**63, -100, 0, 5, 2**63 - 1]),
                                        np.array([0, -100, 1, 5, -2**63]))[0]),
    "mlp_step": lambda: _captured_program(mse_step, mlp, np.ones((8, 16), np.float32),
                                          np.ones((8, 4), np.float32)),
    "gpt_step": lambda: _captured_program(lm_step, gpt, np.arange(16).reshape(2, 8) % 32),
    "gpt_step_dynamic": lambda: _dynamic_program(lm_step, gpt, np.arange(16).reshape(2, 8) % 32),
}


# ---------------------------------------------------------------- compiling without a GPU
def compile_report(source, names, arch, compiler, tmp_path):
    """{kernel name: ptxas info} of `source` compiled for `arch` with cuda.OPTIONS.
    Fails on a compile error or any warning."""
    if compiler == "nvcc":
        path = tmp_path / "program.cu"
        path.write_text(source)
        proc = subprocess.run([_cuda.find_nvcc(), "-cubin", f"-arch={arch}", *cuda.OPTIONS,
                               "--ptxas-options=-v", "-o", str(tmp_path / "program.cubin"), str(path)],
                              capture_output=True, text=True, timeout=120)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"nvcc failed for {arch}:\n{log}"
    else:
        from cupy_backends.cuda.libs import nvrtc
        prog = nvrtc.createProgram(source, "program.cu", [], [])
        try:
            try:
                nvrtc.compileProgram(prog, [f"-arch={arch}", *cuda.OPTIONS, "-Xptxas", "-v"])
            except Exception as err:
                pytest.fail(f"NVRTC failed for {arch}: {err}\n{nvrtc.getProgramLog(prog)}")
            log = nvrtc.getProgramLog(prog)
        finally:
            nvrtc.destroyProgram(prog)
    assert "warning" not in log.lower(), log
    rep = _cuda._parse_ptxas(log, list(names), arch, _cuda.find_nvcc() or "")
    return {expr: info for (expr, _), info in rep.items()}


@pytest.mark.skipif(not COMPILERS, reason="neither nvcc nor NVRTC (cupy + nvidia-cuda-nvrtc) found")
@pytest.mark.parametrize("compiler", COMPILERS or ["none"])
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_generated_kernel_compiles_without_spills(name, arch, compiler, tmp_path):
    program = PROGRAMS[name]()
    source, names = cuda.program_source(program)
    assert names, f"{name}: nothing was fused, the test would compile no kernel"
    rep = compile_report(source, names.values(), arch, compiler, tmp_path)
    assert sorted(rep) == sorted(names.values())
    spills = {k: (r["spill_stores"], r["spill_loads"]) for k, r in rep.items()
              if r["spill_stores"] or r["spill_loads"] or r["stack"]}
    assert not spills, f"{name} {arch}: kernels with spills or a stack frame: {spills}"
    heavy = {k: r["registers"] for k, r in rep.items() if r["registers"] > MAX_REGISTERS}
    assert not heavy, f"{name} {arch}: kernels over {MAX_REGISTERS} registers: {heavy}"


@pytest.mark.skipif(_cuda.find_nvcc() is None, reason="nvcc not found")
def test_exactly_rounded_kernels_have_no_fma_approximate_or_flush_to_zero_instruction(tmp_path):
    source, _ = cuda.program_source(PROGRAMS["exact_f32"]())
    (tmp_path / "p.cu").write_text(source)

    def ptx(options):
        out = tmp_path / "p.ptx"
        subprocess.run([_cuda.find_nvcc(), "-ptx", "-arch=sm_90", *options, "-o", str(out),
                        str(tmp_path / "p.cu")], check=True, capture_output=True, timeout=60)
        return out.read_text()

    text = ptx(cuda.OPTIONS)
    assert "div.rn.f32" in text and "sqrt.rn.f32" in text
    for bad in ("fma.", ".approx", ".ftz"):
        assert bad not in text, f"{bad} in the PTX of the exactly-rounded program"
    # the check bites: nvcc's defaults contract x * y + z
    assert "fma." in ptx([o for o in cuda.OPTIONS if o != "--fmad=false"])


# ---------------------------------------------------------------- the kernels, run on the host
SHIM = r"""
#include <cmath>
#include <cstring>
struct tt_dim3 { unsigned x; };
static tt_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; std::memcpy(&i, &f, 8); return i; }
"""
GRID, BLOCK = 3, 7   # 21 threads: every kernel of the test programs loops more than once


def host_runner(program, tmp_path, env=None):
    """c_runner.Runner over the CUDA kernels compiled for the host, each launched on a
    GRID x BLOCK grid by a loop over blocks and threads. env ({symbol: size}): `program`
    has symbolic sizes; its kernels are launched with those."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++ or clang++)")
    source, names = cuda.program_source(program)
    launchers = []
    for k, name in names.items():
        body = program.instrs[k].attrs["body"]
        operands = list(body.outputs) + list(body.inputs)
        args = ", ".join(f"({'const ' if j >= len(body.outputs) else ''}{cuda.CTYPE[v.dtype.name]} *)b[{j}]"
                         for j, v in enumerate(operands))
        args = ", ".join([args] + [f"n[{int(s[1:])}]" for s in symbolic.program_symbols(body)])
        launchers.append(
            f'extern "C" void host_{name}(void *const *b, const long long *n) {{\n'
            f"    gridDim.x = {GRID}; blockDim.x = {BLOCK};\n"
            f"    for (blockIdx.x = 0; blockIdx.x < {GRID}; blockIdx.x++)\n"
            f"        for (threadIdx.x = 0; threadIdx.x < {BLOCK}; threadIdx.x++) {name}({args});\n}}")
    path = tmp_path / "host.cpp"
    path.write_text(SHIM + source + "\n" + "\n".join(launchers) + "\n")
    lib_path = tmp_path / "host.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-o", str(lib_path),
                    str(path)], check=True, capture_output=True, timeout=60)
    lib = ctypes.CDLL(str(lib_path))
    kernels = {k: getattr(lib, f"host_{name}") for k, name in names.items()}
    program = plan.run(program)   # the C runner's arena: the pipeline's last stage
    if env is None:   # the launchers' size argument is unused: point it at a zero
        return c_runner.Runner(program, kernels, source, sizes=[0])
    sizes = [env[f"s{k}"] for k in range(len(env))]
    return c_runner.Runner(instantiate.at(program, env), kernels, source, sizes=sizes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_on_the_host_give_eagers_bits_for_exactly_rounded_ops(dtype, tmp_path):
    arrays = exact_inputs(dtype)
    program, inputs = program_of(exact_ops, *arrays)
    fused = fuse.run(program)
    assert len(fused_instrs(fused)) == 1
    with np.errstate(all="ignore"):
        got = host_runner(fused, tmp_path)(inputs)
        want = eager(exact_ops, *arrays)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(bits(g), bits(w))


def test_kernels_on_the_host_broadcast_and_read_non_contiguous_inputs(tmp_path):
    arrays = broadcast_inputs()
    program, inputs = program_of(broadcasts, *arrays)
    fused = fuse.run(program)
    assert len(fused_instrs(fused)) >= 2
    got = host_runner(fused, tmp_path)(inputs)
    want = eager(broadcasts, *arrays)
    np.testing.assert_array_equal(bits(got[0]), bits(want[0]))
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)   # exp: the host's libm


@pytest.mark.slow   # g++ over the kernel: ~4-7 s on 2 loaded cores
def test_the_exact_gelu_and_its_slope_on_the_host_share_a_cdf_within_rounding(tmp_path):
    # the exact GELU forward and backward: one kernel, gelu_cdf once (PRELUDE's erfc)
    from tinytensor.compiler import pipeline
    from .test_gelu_erf import _inputs, _reference_grad, _step
    x, w = _inputs(np.float32, 512)
    program, want, inputs = captured(_step, (x, w))
    fused = fuse.run(pipeline.run(program)[0])
    assert [i.op for k in fused_instrs(fused) for i in k.attrs["body"].instrs].count("gelu_cdf") == 1
    got = host_runner(fused, tmp_path)(inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    # the capture's own gradient is the decomposed float32 slope (1 + erf loses digits for
    # x << 0): against float64 instead, to float32's rounding of the slope's larger term
    # (the cdf, rounded to float as eager keeps it: where the slope crosses 0, x ~ -0.75,
    # that rounding is the error)
    xd = x.data.astype(np.float64)
    ref = _reference_grad(xd)
    cdf_term = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in xd]) * xd * xd
    assert np.all(np.abs(got[-1] - ref) <= 3e-7 * (np.abs(ref) + cdf_term) + 1e-37)


@pytest.mark.parametrize("name", ["mlp_step", "gpt_step"])
def test_kernels_on_the_host_replay_a_training_step(name, tmp_path):
    model_fn, step, arrays = {
        "mlp_step": (mlp, mse_step, (np.random.default_rng(4).standard_normal((8, 16)).astype(np.float32),
                                     np.random.default_rng(5).standard_normal((8, 4)).astype(np.float32))),
        "gpt_step": (gpt, lm_step, (np.arange(16).reshape(2, 8) % 32,)),
    }[name]
    program, want, inputs = captured(step, (model_fn(),) + tuple(tt.tensor(a) for a in arrays))
    fused = fuse.run(program)
    got = host_runner(fused, tmp_path)(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if name == "mlp_step":   # relu, mse and their gradients: exactly rounded
            np.testing.assert_array_equal(bits(g), bits(w))
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_kernels_taking_their_sizes_replay_a_dynamic_training_step_on_the_host(tmp_path):
    # the dynamic program of a GPT step, its CUDA kernels run on the host at a size other
    # than the captured one, against the same program interpreted at that size
    from tinytensor.compiler import interpret
    from tinytensor.compiler.capture import capture
    from tinytensor.compiler import pipeline
    from tinytensor import nn
    m = gpt()
    o = nn.optim.SGD(m.parameters(), lr=0.1)
    step = lambda m, o, ids: lm_step(m, ids)
    program, _, meta = capture(step, (m, o, tt.tensor(np.arange(16).reshape(2, 8) % 32)), dynamic=True)
    with symbolic.formulas():
        program = pipeline.run(program)[0]
        fused = fuse.run(program)
    ids = (np.arange(15).reshape(3, 5) * 7) % 32
    env = {"s0": 3, "s1": 5}
    inputs = [ids if kind == "arg" else x.data if kind == "param" else
              np.asarray(symbolic.evaluate(x[0], env), dtype=x[1]) for kind, x in meta.bindings]
    want = interpret.run(instantiate.at(program, env), inputs)
    with symbolic.formulas():
        runner = host_runner(fused, tmp_path, env)
    got = runner(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_source_is_inspectable_and_64_bit_indexed_only_when_needed():
    runner = cuda.build(PROGRAMS["broadcasts"]())   # needs no GPU until it is called
    n_kernels = len(fused_instrs(runner.program))
    assert runner.source.count('extern "C" __global__ void') == n_kernels == len(runner.names)
    assert "long long" not in runner.source and "i += step" in runner.source
    big = cuda.program_source(huge())[0]
    assert "long long i" in big and f"i < {2**32}" in big


def test_cuda_runner_without_cupy_or_a_gpu_is_a_clear_error():
    if tt.cuda_is_available():
        pytest.skip("a GPU is available")
    runner = cuda.build(PROGRAMS["broadcasts"]())
    with pytest.raises(RuntimeError, match="device 'cuda' is not available.*(cupy|CuPy)"):
        runner([np.ones(3)])


def test_tt_compile_takes_backend_cuda():
    step = tt.compile(mse_step, backend="cuda")
    m, x, y = mlp(), tt.randn(8, 16), tt.randn(8, 4)
    first = step(m, x, y)          # the capture runs eagerly, on the CPU here
    assert float(first.item()) == pytest.approx(float(mse_step(mlp(), x, y).item()))
    for p in m.parameters():
        p.grad = None   # the same signature as the first call: a replay, not a new capture
    if not tt.cuda_is_available():
        with pytest.raises(RuntimeError, match="device 'cuda' is not available"):
            step(m, x, y)
    else:
        with pytest.raises(TypeError, match="input 0 .* not a CuPy array.*to\\('cuda'\\)"):
            step(m, x, y)


# ---------------------------------------------------------------- on a GPU
def _gpu(arrays):
    return [tt.tensor(a, device="cuda") for a in arrays]


def _on_gpu(fn, *arrays):
    """(fused program captured on the GPU, its CuPy inputs, eager's outputs as NumPy)."""
    from tinytensor.compiler.capture import capture
    tensors = _gpu(arrays)
    program, _, _ = capture(fn, tuple(tensors))
    out = fn(*_gpu(arrays))
    want = [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
    return fuse.run(program.verify()), [t.data for t in tensors], want


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_exactly_rounded_ops_are_bitwise_equal_to_eager(dtype):
    program, inputs, want = _on_gpu(exact_ops, *exact_inputs(dtype))
    assert len(fused_instrs(program)) == 1
    got = [a.get() for a in cuda.build(program)(inputs)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(bits(g), bits(w))


@pytest.mark.gpu
def test_gpu_broadcasts_and_non_contiguous_inputs():
    program, inputs, want = _on_gpu(broadcasts, *broadcast_inputs())
    got = [a.get() for a in cuda.build(program)(inputs)]
    np.testing.assert_array_equal(bits(got[0]), bits(want[0]))
    np.testing.assert_array_equal(bits(got[1]), bits(want[1]))   # the same expf as CuPy's


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(MATH))
def test_gpu_math_functions_are_within_twice_eagers_error(name, dtype):
    f, x, ref_fn = math_case(name, dtype)
    program, inputs, (want,) = _on_gpu(f, x)
    (got,) = [a.get() for a in cuda.build(program)(inputs)]
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64 if dtype == np.float32 else np.longdouble))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    err_g, err_e = ulp_error(got[ok], ref[ok], dtype), ulp_error(want[ok], ref[ok], dtype).max()
    assert err_g.max() <= 2 * err_e + 1.0, (
        f"{name} {np.dtype(dtype).name}: compiled error {float(err_g.max()):.3g} ulp, eager "
        f"{float(err_e):.3g} ulp (worst at x = {float(x[ok][np.argmax(err_g)])!r})")


@pytest.mark.gpu
def test_gpu_compiled_training_step_replays_eagers_bits():
    m, step = mlp().to("cuda"), tt.compile(mse_step, backend="cuda")
    x, y = tt.randn(8, 16, device="cuda"), tt.randn(8, 4, device="cuda")
    first = step(m, x, y)
    want = [p.grad.numpy().copy() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    again = step(m, x, y)
    assert first.numpy().tobytes() == again.numpy().tobytes()
    for w, p in zip(want, m.parameters()):
        assert w.tobytes() == p.grad.numpy().tobytes()


@pytest.mark.gpu
def test_gpu_a_grid_stride_loop_covers_more_elements_than_the_grid():
    n = cuda.BLOCK * cuda.MAX_BLOCKS * 2 + 3
    x = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    f = lambda t: t * 2.0 + 1.0
    program, inputs, (want,) = _on_gpu(f, x)
    (got,) = cuda.build(program)(inputs)
    np.testing.assert_array_equal(bits(got.get()), bits(want))
    assert math.prod(got.shape) == n


@pytest.mark.gpu
def test_gpu_dynamic_step_is_one_program_for_every_size_and_matches_the_cpu():
    from tinytensor import nn
    from .helpers import training_step
    loss = lambda m, ids: m(ids, labels=ids).loss
    mg, mc = gpt().to("cuda"), gpt()
    og, oc = nn.optim.SGD(mg.parameters(), lr=0.1), nn.optim.SGD(mc.parameters(), lr=0.1)
    on_gpu = tt.compile(training_step(loss), backend="cuda", dynamic=True)
    on_cpu = tt.compile(training_step(loss), backend="numpy", dynamic=True)
    rng = np.random.default_rng(7)
    for shape in [(2, 8), (3, 5), (2, 16), (3, 5)]:
        ids = rng.integers(0, 32, shape)
        lg = on_gpu(mg, og, tt.tensor(ids, device="cuda"))
        lc = on_cpu(mc, oc, tt.tensor(ids))
        np.testing.assert_allclose(float(lg), float(lc), rtol=1e-5)
    for p, q in zip(mg.parameters(), mc.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=0, atol=1e-5)
    assert len(on_gpu.programs) == 1
