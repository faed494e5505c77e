"""Issue 15 and two defects of issue 9 in the fused ops (tinytensor/ops) and their CUDA launchers
(tinytensor.kernels).

Without a GPU: the online-statistics arithmetic of common.cuh built for the host; every
Python-side decision before a kernel launch (contiguous arrays, 64-bit counts, scalars in
the accumulator type, routing by compute capability, no bfloat16) with the launch captured
instead of run; attention at large scores on the CPU against torch and the reference.
With a GPU (the gpu marker, run by tools/gpu_check.sh): the same cases on the kernels."""
import os
import re
import shutil
import subprocess
import sys
import types

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.kernels import _common, _cuda, cuda_attention, cuda_cross_entropy, cuda_norm, cuda_softmax

# the op families (tinytensor.ops.softmax and .cross_entropy are also the names of functions)
k_softmax, k_norm, k_ce, k_attention = (importlib.import_module(f"tinytensor.ops.{m}")
                                        for m in ("softmax", "norms", "cross_entropy", "attention"))

# ------------------------------------------------------------------ online statistics, on the host
# The long-row softmax / log_softmax and cross-entropy kernels fold each thread's strided
# VEC-chunks into a running (max, sum) with `online_add` / `online_merge` from common.cuh.
# Those are plain arithmetic, so the real source is compiled for the host with g++ (CUDA
# qualifiers and intrinsics shimmed) and run on the chunks each thread of a block sees.
HOST_SHIM = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__
#define __align__(n) alignas(n)
#define asm(...)
struct Dim3 { unsigned x, y, z; };
static Dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
static inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
static inline double rsqrt(double v) { return 1.0 / std::sqrt(v); }
template <class A> A __shfl_xor_sync(unsigned, A v, int) { return v; }
static inline void __syncthreads() {}
#include "common.cuh"

// per thread of a block: its (m, s) over the chunks c = tid * VEC, c += threads * VEC
template <class A, int VEC> void thread_stats(const std::vector<A>& x, int threads) {
  for (int t = 0; t < threads; ++t) {
    A m = neg_inf<A>(), s = 0;
    for (size_t c = (size_t)t * VEC; c < x.size(); c += (size_t)threads * VEC) online_add<A, VEC>(m, s, &x[c]);
    std::printf("%a %a\n", (double)m, (double)s);
  }
}

template <class A> void run(int vec, int threads, long n) {
  std::vector<A> x(n);
  for (long i = 0; i < n; ++i) { double v; std::scanf("%la", &v); x[i] = (A)v; }
  switch (vec) {
    case 1: thread_stats<A, 1>(x, threads); break;
    case 2: thread_stats<A, 2>(x, threads); break;
    case 4: thread_stats<A, 4>(x, threads); break;
    case 8: thread_stats<A, 8>(x, threads); break;
  }
}

int main() {
  char kind[8];
  int vec, threads;
  long n;
  while (std::scanf("%7s %d %d %ld", kind, &vec, &threads, &n) == 4) {
    if (kind[0] == 'd') run<double>(vec, threads, n); else run<float>(vec, threads, n);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def host_stats(tmp_path_factory):
    """A function running the host build on cases [(dtype, vec, threads, row)] and returning
    per case the (m, s) of every thread."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("host_merge")
    shutil.copy(os.path.join(_cuda._DIR, "common.cuh"), tmp / "common.cuh")
    (tmp / "harness.cpp").write_text(HOST_SHIM)
    exe = tmp / "harness"
    proc = subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(tmp / "harness.cpp")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"common.cuh does not build for the host:\n{proc.stderr}"

    def run(cases):
        text = "".join(f"{'d' if dt == np.float64 else 'f'} {vec} {threads} {row.size}\n"
                       + " ".join(float(v).hex() for v in row) + "\n" for dt, vec, threads, row in cases)
        out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        vals = [tuple(float.fromhex(w) if "x" in w else float(w) for w in line.split())
                for line in out.stdout.splitlines()]
        res, i = [], 0
        for _, _, threads, _ in cases:
            res.append(vals[i:i + threads])
            i += threads
        return res
    return run


def _masked_rows(n, dtype, rng):
    """Rows with -inf runs that cover whole chunks of some threads and not of others."""
    base = rng.standard_normal(n) * 3
    rows = {}
    r = base.copy(); r[: n // 2] = -np.inf; rows["first half -inf"] = r
    r = np.full(n, -np.inf); r[-1] = 1.5; rows["all but the last -inf"] = r
    r = np.full(n, -np.inf); r[0] = -2.0; rows["all but the first -inf"] = r
    r = base.copy(); r[np.arange(n) % 100 < 37] = -np.inf; rows["runs of 37"] = r
    r = base.copy(); r[n // 3] = -np.inf; rows["one -inf"] = r
    r = base.copy(); r[::2] = -np.inf; rows["every other -inf"] = r
    rows["all -inf"] = np.full(n, -np.inf)
    return {k: v.astype(dtype) for k, v in rows.items()}


def _kernel_layouts(n, dtype):
    """(vec, threads) of the long-row softmax and the cross-entropy kernels for a row of n."""
    itemsize = np.dtype(dtype).itemsize
    return sorted((vec, _common.block_threads(n, vec, np.dtype(dtype)))  # one rule for both
                  for vec in {1, 16 // itemsize} if n % vec == 0)


@pytest.mark.parametrize("n", [1023, 1024, 1025, 4096, 64 * 8 + 1])
def test_online_statistics_skip_all_neg_inf_chunks(host_stats, n):
    """Issue 15.1: a thread whose chunks are all -inf has partial max -inf and partial sum
    exp(-inf - -inf) = nan; the merge spread it over the row. Every thread's (max, sum) must
    be the max and the sum of exp(x - max) of its own elements ((-inf, 0) when none is finite)."""
    rng = np.random.default_rng(n)
    cases, want = [], []
    for dtype in (np.float32, np.float16, np.float64):
        acc = np.float64 if dtype == np.float64 else np.float32
        for name, row in _masked_rows(n, dtype, rng).items():
            for vec, threads in _kernel_layouts(n, dtype):
                cases.append((np.float64 if dtype == np.float64 else np.float32, vec, threads, row.astype(acc)))
                want.append((np.dtype(dtype).name, name, vec, threads))
    for (dt, name, vec, threads), (_, _, _, row), got in zip(want, cases, host_stats(cases)):
        for t, (m, s) in enumerate(got):
            mine = np.concatenate([row[c:c + vec] for c in range(t * vec, row.size, threads * vec)])
            if mine.size == 0 or not np.isfinite(mine).any():
                wm, ws = -np.inf, 0.0
            else:
                wm = float(mine.max())
                ws = float(np.exp(mine.astype(np.float64) - wm).sum())
            tol = 1e-12 if dt == "float64" else 1e-5
            assert m == wm and abs(s - ws) <= tol * max(ws, 1.0), (
                f"online_add {dt} n={n} vec={vec} threads={threads} row {name!r}: thread {t} has "
                f"(max, sum) = ({m}, {s}), want ({wm}, {ws})")


# ------------------------------------------------------------------ launches, captured on the CPU
# The CUDA dispatchers run on NumPy arrays posing as CuPy ones (`DevArray`, `.data.ptr` as
# CuPy has it) with `_cuda.function` replaced by a recorder, so every launch they make can
# be checked against the kernel's C++ signature, read from the .cu source: the number of
# arguments, every array C-contiguous with the element type the kernel reads, every scalar
# exactly the C type (a long long row count as np.int64, a double eps as np.float64: CuPy
# passes the bytes of what it is given), the grid and block within CUDA's limits and the
# kernel's launch bounds, shared memory within the device's, and the kernel in the list
# compiled for that compute capability.
LAUNCHERS = {"softmax": cuda_softmax, "layer_norm": cuda_norm, "cross_entropy": cuda_cross_entropy,
             "attention": cuda_attention}  # by CUDA source
OP_MODULES = (k_softmax, k_norm, k_ce, k_attention)  # where the fused ops pick their device
SMEM_OPTIN = {75: 64 * 1024, 80: 163 * 1024, 90: 227 * 1024}  # per block, T4 / A100 / H100
NP_OF_CTYPE = {"float": np.float32, "double": np.float64, "half16": np.float16, "int": np.int32,
               "long long": np.int64, "float2": np.float32}


class DevArray(np.ndarray):
    """A NumPy array standing in for a CuPy array."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


def dev(a):
    return a.view(DevArray)


class FakeCupy(types.ModuleType):
    """`cupy` as the dispatchers use it: NumPy, returning DevArrays."""

    def __getattr__(self, name):
        fn = getattr(np, name)
        if not callable(fn) or isinstance(fn, type):
            return fn

        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            return out.view(DevArray) if isinstance(out, np.ndarray) else out
        return wrapped


_KERNEL = re.compile(r"template\s*<([^>]*)>\s*__global__\s+void\s+(?:__launch_bounds__\(((?:[^()]|\([^()]*\))*)\)\s+)?"
                     r"(\w+)\s*\(([^)]*)\)")


# an object-like macro, its body over any continued lines: a parameter list shared by kernels
_DEFINE = re.compile(r"^#define[ \t]+(\w+)[ \t]+((?:.*\\\n)*.*)$", re.M)


def kernel_signature(source, kernel):
    """(template parameter names, launch-bound expression, [(C type, name)]) of a kernel; a
    parameter list written as one macro (attention.cu's FLASH_FWD_PARAMS) is read from its #define."""
    src = _cuda.source(source)
    macros = {name: body.replace("\\\n", " ") for name, body in _DEFINE.findall(src)}
    for tmpl, bound, name, params in _KERNEL.findall(src):
        if name == kernel:
            params = macros.get(params.strip(), params)
            names = [t.split()[-1] for t in tmpl.split(",")]
            out = []
            for p in params.split(","):
                words = [w for w in p.replace("*", " * ").split() if w not in ("const", "__restrict__")]
                out.append((" ".join(words[:-1]).replace(" *", "*"), words[-1]))
            return names, bound, out
    raise AssertionError(f"kernel {kernel} not found in {source}.cu")


class Launch:
    def __init__(self, source, expr, grid, block, args, shared_mem):
        self.source, self.expr, self.grid, self.block = source, expr, grid, block
        self.args, self.smem = args, shared_mem
        self.kernel = expr.split("<")[0]
        names, self.bound, self.params = kernel_signature(source, self.kernel)
        targs = [a.strip() for a in expr[expr.index("<") + 1:-1].split(",")]
        self.tmpl = dict(zip(names, targs))

    def __getitem__(self, name):
        """The argument passed for the kernel parameter `name`."""
        return self.args[[n for _, n in self.params].index(name)]

    def check(self, cc):
        where = f"{self.expr} (grid {self.grid}, block {self.block})"
        assert len(self.args) == len(self.params), (
            f"{where}: {len(self.args)} arguments for {len(self.params)} parameters {self.params}")
        t = NP_OF_CTYPE[self.tmpl["T"]]
        acc = np.float64 if t == np.float64 else np.float32
        for (ctype, name), a in zip(self.params, self.args):
            base = ctype.rstrip("*")
            want = t if base == "T" else acc if base == "typename Acc<T>::type" else NP_OF_CTYPE[base]
            if ctype.endswith("*"):
                assert isinstance(a, np.ndarray), f"{where}: {name} is a {type(a).__name__}, not an array"
                assert a.flags.c_contiguous, (
                    f"{where}: {name} {a.shape} is strided {a.strides}, the kernel reads it flat")
                assert a.dtype == want, f"{where}: {name} is {a.dtype}, the kernel reads {ctype}"
                if base == "float2":
                    assert a.shape[-1] == 2, f"{where}: {name} {a.shape} is not pairs"
            else:
                assert type(a) is want, f"{where}: {name} passed as {type(a).__name__}, the kernel takes {ctype}"
        size = np.dtype(t).itemsize
        bound = eval(re.sub(r"(.+)\?(.+):(.+)", r"(\2) if (\1) else (\3)", self.bound.replace("sizeof(T)", str(size))))
        assert np.prod(self.block) <= bound, f"{where}: more threads than the launch bounds ({bound})"
        assert 1 <= self.grid[0] <= _cuda.MAX_GRID and all(1 <= g <= 65535 for g in self.grid[1:]), where
        assert self.smem <= SMEM_OPTIN[cc], (
            f"{where}: {self.smem} bytes of shared memory, sm_{cc} allows {SMEM_OPTIN[cc]}")
        mod = LAUNCHERS[self.source]
        assert self.expr in mod.cuda_instantiations(full=True, arch=cc), (
            f"{where}: not in the kernels compiled for sm_{cc}")


@pytest.fixture
def gpu(monkeypatch):
    """A pretend GPU: the CUDA dispatchers take DevArrays, launches are recorded, not run.
    `gpu.cc` is its compute capability (90 unless a test sets it)."""
    state = types.SimpleNamespace(cc=90, launches=[])

    class Fn:
        def __init__(self, name, expr):
            self.name, self.expr = name, expr

        def __call__(self, grid, block, args, shared_mem=0):
            state.launches.append(Launch(self.name, self.expr, grid, block, args, shared_mem))

    monkeypatch.setitem(sys.modules, "cupy", FakeCupy("cupy"))
    monkeypatch.setattr(_cuda, "function", Fn)
    monkeypatch.setattr(_cuda, "compute_capability", lambda: state.cc)
    monkeypatch.setattr(_cuda, "max_shared_memory", lambda: SMEM_OPTIN[state.cc])
    on_device = lambda a: isinstance(a, np.ndarray) and not isinstance(a, DevArray)  # noqa: E731
    for mod in OP_MODULES:
        monkeypatch.setattr(mod, "is_cpu", on_device)
        if hasattr(mod, "xp_of"):
            monkeypatch.setattr(mod, "xp_of", lambda a: sys.modules["cupy"] if isinstance(a, DevArray) else np)

    def checked(kernel=None):
        """The launches so far (of `kernel`), each checked against its signature."""
        for launch in state.launches:
            launch.check(state.cc)
        return [x for x in state.launches if kernel is None or x.kernel == kernel]
    state.checked = checked
    return state


class Ctx:
    """What forward and backward read of a tape node."""

    def __init__(self, needs=(True, True, True), **attrs):
        self.attrs, self.needs_input_grad, self.saved_arrays = attrs, needs, ()

    def save_for_backward(self, *arrays):
        self.saved_arrays = arrays

    def saved_array(self, k):
        return self.saved_arrays[k]


def run_softmax(dtype, n, log, rows=5):
    x = dev(np.random.standard_normal((rows, n)).astype(dtype))
    y = cuda_softmax.forward(x, log)
    cuda_softmax.backward(dev(np.ones_like(y)), y, log)


def run_norm(dtype, rms, w=None, b=None, rows=6, n=None):
    n = n if n is not None else (w.size if w is not None else 8)
    x = dev(np.random.standard_normal((rows, n)).astype(dtype))
    params = [dev(p) for p in (w, b) if p is not None]
    attrs = dict(nd=1, eps=1e-5, rms=rms, has_weight=w is not None, has_bias=b is not None)
    cls = k_norm.FusedRMSNorm if rms else k_norm.FusedNorm
    ctx = Ctx(**attrs)
    y = cls.forward(ctx, x, *params, **attrs)
    cls.backward_arrays(ctx, dev(np.ones(y.shape, dtype)))


def run_cross_entropy(dtype, x, weight=None, smoothing=0.0, reduction="mean"):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    t = np.arange(1 if x.ndim == 1 else x.shape[0]).reshape(() if x.ndim == 1 else (-1,)) % c
    attrs = dict(ignore_index=-100, reduction=reduction, label_smoothing=smoothing)
    extra = (dev(weight.astype(dtype)),) if weight is not None else ()
    ctx = Ctx(**attrs)
    out = k_ce.FusedCrossEntropy.forward(ctx, dev(x.astype(dtype, copy=False)), dev(np.asarray(t)), *extra, **attrs)
    k_ce.FusedCrossEntropy.backward_arrays(ctx, dev(np.ones(np.shape(out), dtype)))


def run_attention(dtype, e, causal=False, pad=False, L=40, S=33):
    q, k, v = (dev(np.random.standard_normal((2, 3, n, e)).astype(dtype)) for n in (L, S, S))
    mask = (dev(np.arange(S)[None, None, None, :] < np.array([S, 7])[:, None, None, None]),) if pad else ()
    attrs = dict(scale=0.125, is_causal=causal, groups=1)
    ctx = Ctx(**attrs)
    out = k_attention.FlashAttention.forward(ctx, q, k, v, *mask, **attrs)
    k_attention.FlashAttention.backward_arrays(ctx, dev(np.ones(out.shape, dtype)))


DTYPES = [np.float32, np.float16, np.float64]


@pytest.mark.parametrize("cc", [90, 80, 75])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_launch_matches_its_kernel(gpu, dtype, cc):
    """Every op the dispatchers route to CUDA, forward and backward, short and long rows,
    aligned and not: each launch fits its kernel's signature, limits and instantiation list."""
    gpu.cc = cc
    for n in (7, 256, 1000, 1024, 1025, 4096):
        for log in (False, True):
            run_softmax(dtype, n, log)
    for rms in (False, True):
        run_norm(dtype, rms, np.ones(64, dtype), None if rms else np.zeros(64, dtype))
        run_norm(dtype, rms, n=30)
    run_cross_entropy(dtype, np.random.standard_normal((4, 37)))
    run_cross_entropy(dtype, np.random.standard_normal((4, 64)), weight=np.linspace(0.5, 2, 64), smoothing=0.1)
    if dtype != np.float64:  # float64 attention takes the reference path on CUDA
        for e in (40, 64, 128):
            for causal, pad in ((False, False), (True, False), (False, True)):
                q = dev(np.zeros((2, 3, 40, e), dtype))
                if cuda_attention.why_not(q, q, q, None) is None:
                    run_attention(dtype, e, causal, pad)
    kernels = {x.kernel for x in gpu.checked()}
    assert {"softmax_fwd_block", "softmax_bwd_block", "norm_fwd", "norm_bwd_dx", "norm_bwd_wb", "ce_fwd",
            "ce_bwd"} <= kernels
    if dtype != np.float64:  # float64 rows always take a block, and its attention the reference
        assert {"softmax_fwd_warp", "softmax_bwd_warp", "flash_fwd_simt", "flash_bwd_simt", "flash_bwd_dot"} <= kernels
    assert ({"flash_fwd_mma", "flash_bwd_mma"} <= kernels) == (dtype == np.float16 and cc >= 80)


@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("view", ["W[:, 0]", "w[::2]"])
def test_norm_strided_weight_and_bias_reach_the_kernels_contiguous(gpu, view, rms):
    """Issue 15.2: getitem returns views; a strided weight reshaped to (n,) stays strided, and
    the kernels index w + c. Forward and backward must hand over the values, contiguous."""
    n = 16
    base = np.random.standard_normal((n, 3) if view == "W[:, 0]" else (2 * n,))
    w = base[:, 0] if view == "W[:, 0]" else base[::2]
    b = None if rms else (base[:, 1] if view == "W[:, 0]" else base[1::2])
    assert not w.flags.c_contiguous
    run_norm(np.float64, rms, w, b)
    fwd, = gpu.checked("norm_fwd")
    dx, = gpu.checked("norm_bwd_dx")
    np.testing.assert_array_equal(fwd["w"], w)
    np.testing.assert_array_equal(dx["w"], w)
    if b is not None:
        np.testing.assert_array_equal(fwd["b"], b)


def test_cross_entropy_1d_strided_logits_reach_the_kernels_contiguous(gpu):
    """Issue 15.3: (C,) logits were reshaped to (1, C) without a copy; a strided view stayed
    strided and the kernels read the wrong classes."""
    base = np.random.standard_normal(2 * 37)
    x = base[::2]
    assert not x.flags.c_contiguous
    run_cross_entropy(np.float64, x)
    for kernel in ("ce_fwd", "ce_bwd"):
        (launch,) = gpu.checked(kernel)
        np.testing.assert_array_equal(launch["x"], x[None], err_msg=kernel)
    assert k_ce._rows(x).flags.c_contiguous and k_ce._rows(x).shape == (1, 37)


def test_grid_holds_row_counts_past_2_31():
    """Issue 15.6: a grid holds 2^31 - 1 blocks along x; more rows spill into y, and the
    blocks past the last row (fewer than y) are the only waste."""
    top = _cuda.MAX_GRID
    assert _cuda.grid(0) == (1, 1) and _cuda.grid(5) == (5, 1) and _cuda.grid(top) == (top, 1)
    for blocks in (top + 1, 2 * top, 2**33 + 7, 2**31 * 40000):
        x, y = _cuda.grid(blocks)
        assert x <= top and y <= 65535 and 0 <= x * y - blocks < y, (blocks, x, y)
    with pytest.raises(ValueError, match=r"do not fit one CUDA grid"):
        _cuda.grid(top * 65535 + 1)


def test_row_counts_are_64_bit_and_grids_two_dimensional(gpu, monkeypatch):
    """Issue 15.6: with a grid of at most 7 blocks along x (as 2^31 - 1 is for 2^31 rows and
    more) every row kernel gets the full row count as a long long and a grid that covers it."""
    monkeypatch.setattr(_cuda, "MAX_GRID", 7)
    rows = 1000
    run_softmax(np.float32, 100, True, rows=rows)
    run_softmax(np.float32, 3000, False, rows=rows)
    run_norm(np.float32, False, np.ones(64, np.float32), np.zeros(64, np.float32), rows=rows)
    run_cross_entropy(np.float32, np.random.standard_normal((rows, 10)))
    run_attention(np.float32, 64, L=rows // 6 + 1)  # flash_bwd_dot: 2 * 3 * L rows
    seen = set()
    for launch in gpu.checked():
        names = [n for _, n in launch.params]
        if "rows" not in names or launch.kernel == "norm_bwd_wb":  # that one: (columns, row chunks)
            continue
        per_block = launch.block[1] if len(launch.block) > 1 else 1
        assert [c for c, n in launch.params if n == "rows"] == ["long long"], launch.expr
        assert launch["rows"] >= rows and launch.grid[0] <= 7
        assert launch.grid[0] * launch.grid[1] * per_block >= launch["rows"], (launch.expr, launch.grid)
        seen.add(launch.kernel)
    assert {"softmax_fwd_warp", "softmax_bwd_block", "norm_fwd", "norm_bwd_dx", "ce_fwd", "ce_bwd",
            "flash_bwd_dot"} <= seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_scalars_come_in_the_accumulator_type(gpu, dtype):
    """Issue 15.7: eps, label smoothing and sum(weight) reached the float64 kernels as float32
    (0.1 became 0.10000000149011612)."""
    acc = np.float64 if dtype == np.float64 else np.float32
    x = dev(np.random.standard_normal((4, 8)).astype(dtype))
    cuda_norm.forward(x, None, None, 0.1, False)
    w = np.array([0.1, 0.7, 1.3, 0.3, 0.2, 0.9, 1.1, 0.4])
    run_cross_entropy(dtype, np.random.standard_normal((4, 8)), weight=w, smoothing=0.1)
    (ln,) = gpu.checked("norm_fwd")
    (fwd,) = gpu.checked("ce_fwd")
    (bwd,) = gpu.checked("ce_bwd")
    assert type(ln["eps"]) is acc and ln["eps"] == acc(0.1)
    for launch in (fwd, bwd):
        assert type(launch["smoothing"]) is acc and launch["smoothing"] == acc(0.1)
        assert type(launch["wsum"]) is acc and launch["wsum"] == acc(w.astype(dtype).astype(acc).sum())


@pytest.mark.parametrize("cc", [75, 80, 90])
def test_float16_attention_uses_tensor_cores_only_from_sm80(gpu, cc):
    """Issue 15.5: mma.m16n8k16 and cvt to f16x2 need sm_80; below it float16 attention runs
    the SIMT kernels (and a head dim above 64 the reference: their 73 KiB of shared memory
    exceed a T4 block's 64 KiB)."""
    gpu.cc = cc
    run_attention(np.float16, 64, causal=True)
    kinds = sorted({x.kernel for x in gpu.checked()})
    want = ["flash_bwd_dot", "flash_bwd_mma", "flash_fwd_mma"] if cc >= 80 else \
        ["flash_bwd_dot", "flash_bwd_simt", "flash_fwd_simt"]
    assert kinds == want
    q = dev(np.zeros((1, 1, 8, 128), np.float16))
    assert (cuda_attention.why_not(q, q, q, None) is None) == (cc >= 80)
    assert cuda_attention.why_not(q[..., :64], q[..., :64], q[..., :64], None) is None


def test_instantiations_per_compute_capability():
    """Issue 15.5: what is compiled for a device leaves out what it cannot run, and a kernel
    it cannot run is refused with the requirement named, not an NVRTC error."""
    for mod in LAUNCHERS.values():
        for cc in (75, 80, 90):
            exprs = mod.cuda_instantiations(full=True, arch=cc)
            assert exprs and all(("_mma<" in e) <= (cc >= 80) for e in exprs), (mod.CUDA_SOURCE, cc)
    assert any("_mma<" in e for e in cuda_attention.cuda_instantiations(full=True, arch=80))
    assert "flash_fwd_simt<half16, 64>" in cuda_attention.cuda_instantiations(arch=75)  # what fp16 runs there
    assert _cuda.module_exprs("attention", "flash_fwd_simt<float, 64>", 75) == \
        cuda_attention.cuda_instantiations(full=True, arch=75)
    with pytest.raises(RuntimeError, match=r"flash_fwd_mma<half16, 64> needs a GPU of compute capability "
                                           r"8\.0 \(sm_80\) or newer; this one is 7\.5 \(sm_75\)"):
        _cuda.module_exprs("attention", "flash_fwd_mma<half16, 64>", 75)
    assert _cuda.module_exprs("softmax", "softmax_fwd_warp<float, 4, 3, false>", 90) == \
        ["softmax_fwd_warp<float, 4, 3, false>"]  # not a registered kernel: compiled alone


def test_no_bfloat16_kernel_is_compiled_or_dispatched():
    """Issue 15.4: tinytensor has no bfloat16 dtype, so the bf16 instantiations only cost
    compile time (and broke pre-sm_80 GPUs); none is compiled and bfloat16 arrays are not
    taken by the CUDA paths until that dtype exists."""
    for mod in LAUNCHERS.values():
        for cc in (75, 90):
            assert not [e for e in mod.cuda_instantiations(full=True, arch=cc) if "bf16" in e], mod.CUDA_SOURCE
    assert "bfloat16" not in _cuda.CTYPES
    with pytest.raises(TypeError, match="no CUDA kernel for dtype bfloat16"):
        _cuda.ctype("bfloat16")
    fake = types.SimpleNamespace(dtype="bfloat16", shape=(2, 8, 64), size=1024, ndim=3)
    from tinytensor.kernels._common import cuda_ok
    assert not cuda_ok(fake)
    assert cuda_attention.why_not(fake, fake, fake, None) == "no CUDA kernel for bfloat16"


# ------------------------------------------------------------------ attention at large scores
# Issue 9 (found with cross_entropy): the forward kept lse = m + log(l) per query and the
# backward took p = exp(s - lse); at large scores m + log(l) rounds (at 1e8 a float32 holds
# only multiples of 8: m + log(2) = m), so p did. Now (m, log(l)) are kept apart and
# p = exp((s - m) - log(l)). Scores here are a^2 + b_i * d_j with small integers b, d: each
# product is exact, so every implementation rounds the sum the same way (once).
#
# Tolerances, for an output or gradient v against torch (or the reference) r:
# |v - r| <= TOL * scale, scale = max(1, max|r|) for the output and dv, and a for dq and dk:
# dq = sum_j ds_j k_j has a component a * sum_j ds_j that is 0 in exact arithmetic and noise
# of about a * eps in any floating-point implementation, torch's included. Measured after the
# fix at most 2.1e-6 (float32) and 2.3e-15 (float64); before it at least 4.5e-5 and 2.5e-14
# (at scores 1024), growing with the scores to 8 and 8e-9 at 1e8.
ATTN_TOL = {np.float32: 5e-6, np.float64: 1e-14}
ROOTS = [32, 100, 1000, 10000]  # scores about a^2: 1024, 1e4, 1e6, 1e8
L_ATT = S_ATT = 19


@pytest.fixture
def small_blocks(monkeypatch):
    """CPU attention blocks of 8, so that the rescaling across key blocks is exercised."""
    monkeypatch.setattr(k_attention, "KEY_BLOCK", 8)
    monkeypatch.setattr(k_attention, "QUERY_BLOCK", 8)
    monkeypatch.setattr(k_attention, "BLOCK_ELEMS", 100)


def _large_scores(a, dtype, rng):
    b = rng.integers(-3, 4, size=(2, 2, L_ATT))
    b[..., ::4] = 0  # queries that see a tie over every key (the issue's case)
    d = rng.integers(-3, 4, size=(2, 2, S_ATT))
    q = np.stack([np.full(b.shape, a), b], -1)
    k = np.stack([np.full(d.shape, a), d], -1)
    v = rng.standard_normal((2, 2, S_ATT, 3))
    return [x.astype(dtype) for x in (q, k, v)]


def _masks(rng):
    dead = rng.uniform(size=(L_ATT, S_ATT)) < 0.7
    dead[5] = False  # a query that sees no key
    pad = np.arange(S_ATT)[None, None, None, :] < np.array([S_ATT, 7])[:, None, None, None]
    fl = rng.choice([0.0, -1.0, -2.5, -np.inf], size=(L_ATT, S_ATT))
    fl[:, 0], fl[3] = 0.0, -np.inf
    return [("plain", {}), ("causal", {"is_causal": True}), ("bool mask", {"attn_mask": dead}),
            ("key padding", {"attn_mask": pad}), ("float mask", {"attn_mask": fl})]


def _sdpa_tt(arrays, kw, fused, cot):
    ins = [tt.tensor(x, requires_grad=True) for x in arrays]
    kwt = {k: tt.tensor(v.astype(arrays[0].dtype) if v.dtype.kind == "f" else v) if isinstance(v, np.ndarray) else v
           for k, v in kw.items()}
    with tt.kernels.use_fusion(fused), tt.record() as tape:
        out = F.scaled_dot_product_attention(*ins, scale=1.0, **kwt)
    assert (k_attention.FlashAttention in {n.fn for n in tape.nodes}) == fused
    with tt.kernels.use_fusion(fused):
        grads = tt.grad((out * tt.tensor(cot.astype(arrays[0].dtype))).sum(), ins)
    return [np.asarray(t.detach().numpy(), np.float64) for t in [out, *grads]]


def _sdpa_torch(arrays, kw, cot):
    ins = [torch.tensor(x, requires_grad=True) for x in arrays]
    kwt = {k: torch.tensor(v.astype(arrays[0].dtype) if v.dtype.kind == "f" else v) if isinstance(v, np.ndarray)
           else v for k, v in kw.items()}
    with sdpa_kernel([SDPBackend.MATH]):
        out = TF.scaled_dot_product_attention(*ins, scale=1.0, **kwt)
    (out * torch.tensor(cot.astype(arrays[0].dtype))).sum().backward()
    return [t.detach().double().numpy() for t in [out] + [x.grad for x in ins]]


def _attn_close(got, want, a, tol, what):
    for name, x, r, scale in zip(("output", "dq", "dk", "dv"), got, want, (None, a, a, None)):
        s = float(scale if scale else max(1.0, float(np.max(np.abs(r)))))
        err = np.abs(x - r)
        worst = np.unravel_index(np.argmax(np.nan_to_num(err, nan=np.inf)), err.shape)
        assert np.all(err <= tol * s), (
            f"attention {what}: {name} off at {tuple(int(i) for i in worst)}: got {float(x[worst])}, want "
            f"{float(r[worst])} (|diff| {float(err[worst])} > {tol} * {s})")


@pytest.mark.parametrize("case", range(5), ids=["plain", "causal", "bool mask", "key padding", "float mask"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("a", ROOTS, ids=[f"scores{a * a:g}" for a in ROOTS])
def test_attention_large_scores_match_torch_and_reference(small_blocks, a, dtype, case):
    rng = np.random.default_rng(a + case)
    name, kw = _masks(rng)[case]
    arrays = _large_scores(a, dtype, rng)
    cot = rng.standard_normal((2, 2, L_ATT, 3))
    want = _sdpa_torch(arrays, kw, cot)
    fused = _sdpa_tt(arrays, kw, True, cot)
    ref = _sdpa_tt(arrays, kw, False, cot)
    what = f"{name}, {np.dtype(dtype).name}, scores about {a * a:g}"
    _attn_close(fused, want, a, ATTN_TOL[dtype], f"fused vs torch ({what})")
    _attn_close(ref, want, a, ATTN_TOL[dtype], f"reference vs torch ({what})")
    _attn_close(fused, ref, a, ATTN_TOL[dtype], f"fused vs reference ({what})")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_attention_issue_example_tie_at_1e8(dtype):
    """The reported case: two keys tied at score 1e8 share the query evenly, so the gradient
    of out[..., 0] reaches each value row with weight 0.5 (it was 1.0)."""
    q = tt.tensor(np.array([[[1e4, 0.0]]], dtype), requires_grad=True)
    k = tt.tensor(np.array([[[1e4, 0.0], [1e4, 0.0]]], dtype), requires_grad=True)
    v = tt.tensor(np.array([[[1.0, 0.0], [0.0, 1.0]]], dtype), requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    out[..., 0].sum().backward()
    assert v.grad.numpy()[0, :, 0].tolist() == [0.5, 0.5]
    assert out.detach().numpy().tolist() == [[[0.5, 0.5]]]


def test_attention_grouped_heads_on_the_cpu_backward(small_blocks):
    """The fused op's own grouped-query layout (groups > 1: k and v shared, not repeated)
    broadcast its saved (B, H, L) statistics against (B, Hkv, G, L, S) scores in the
    backward and raised. F.scaled_dot_product_attention(enable_gqa=True) now takes it
    (it used to repeat k and v first)."""
    rng = np.random.default_rng(3)
    q, k, v = (tt.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((2, 4, 9, 4), (2, 2, 10, 4), (2, 2, 10, 4)))
    with tt.record() as tape:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5, enable_gqa=True)
    assert [(n.fn, n.attrs["groups"]) for n in tape.nodes] == [(k_attention.FlashAttention, 2)]
    g = rng.standard_normal(out.shape)
    grads = tt.grad((out * tt.tensor(g)).sum(), [q, k, v])
    qt, kt, vt = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        ot = TF.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=0.5, enable_gqa=True)
    (ot * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ot.detach().numpy(), atol=1e-12)
    for got, want in zip(grads, (qt.grad, kt.grad, vt.grad)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)


# ------------------------------------------------------------------ on the GPU (gpu marker)
# Each case runs fused on CUDA in `dtype` and fused on the CPU in float64 from the same
# rounded inputs (the CPU path is checked against torch above and in test_kernels.py).
GPU_TOL = {np.float32: 2e-5, np.float16: 5e-3, np.float64: 1e-12}


def _gpu_and_cpu(fn, arrays, dtype, fused_op, seed=0):
    """[output, grads...] as float64 NumPy, from CUDA in `dtype` and from the CPU in float64."""
    res = []
    for device, dt in (("cuda", dtype), ("cpu", np.float64)):
        ins = [tt.tensor(a.astype(dtype).astype(dt), device=device, requires_grad=True) if a.dtype.kind == "f"
               else tt.tensor(a, device=device) for a in arrays]
        with tt.record() as tape:
            out = fn(*ins)
        assert fused_op in {n.fn for n in tape.nodes}, f"{fused_op.__name__} did not run on {device}"
        cot = np.random.default_rng(seed).standard_normal(out.shape)
        diff = [t for t in ins if t.requires_grad]
        grads = tt.grad((out * tt.tensor(cot.astype(dt), device=device)).sum(), diff, allow_unused=True)
        res.append([np.asarray(out.detach().to("cpu").numpy(), np.float64)]
                   + [np.zeros(t.shape) if g is None else np.asarray(g.to("cpu").numpy(), np.float64)
                      for t, g in zip(diff, grads)])
    return res


def _gpu_close(got, want, tol, what, scales=None):
    for i, (x, r) in enumerate(zip(got, want)):
        finite = r[np.isfinite(r)]
        s = scales[i] if scales else max(1.0, float(np.max(np.abs(finite))) if finite.size else 1.0)
        np.testing.assert_allclose(x, r, atol=tol * s, rtol=tol, equal_nan=True,
                                   err_msg=f"{what}: {'output' if i == 0 else f'gradient {i}'}")


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n", [1023, 1024, 1025, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=["float32", "float16", "float64"])
def test_gpu_softmax_rows_with_neg_inf_runs(dtype, n, log):
    """Issue 15.1 on the kernels: masked rows through the warp path (n <= 1024) and the
    long-row online path (n > 1024; float64 always)."""
    FusedSoftmax, FusedLogSoftmax = k_softmax.FusedSoftmax, k_softmax.FusedLogSoftmax
    rows = [r for name, r in _masked_rows(n, dtype, np.random.default_rng(n)).items() if name != "all -inf"]
    x = np.stack(rows).astype(np.float64)
    fn = (lambda t: F.log_softmax(t, -1)) if log else (lambda t: F.softmax(t, -1))
    got, want = _gpu_and_cpu(fn, [x], dtype, FusedLogSoftmax if log else FusedSoftmax)
    _gpu_close(got, want, GPU_TOL[dtype], f"{'log_softmax' if log else 'softmax'} n={n} {np.dtype(dtype).name}")


@pytest.mark.gpu
@pytest.mark.parametrize("C", [257, 1025, 4096, 32001])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=["float32", "float16", "float64"])
def test_gpu_cross_entropy_over_a_masked_vocabulary(dtype, C):
    """Issue 15.1: cross-entropy over logits with -inf runs (a masked vocabulary), C past
    64 * VEC, so that whole threads see only -inf."""
    rng = np.random.default_rng(C)
    x = rng.standard_normal((6, C)) * 3
    x[0, : C // 2] = -np.inf
    x[1, np.arange(C) % 100 < 37] = -np.inf
    x[2, 1:] = -np.inf
    x[3, ::2] = -np.inf
    x[4, : C - 5] = -np.inf
    t = np.array([C - 1, 40, 0, 1, C - 2, 3])
    got, want = _gpu_and_cpu(lambda a, b: F.cross_entropy(a, b), [x, t], dtype, k_ce.FusedCrossEntropy)
    _gpu_close(got, want, GPU_TOL[dtype], f"cross_entropy C={C} {np.dtype(dtype).name}")


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n", [2, 1000, 3000])
@pytest.mark.parametrize("dtype,scale", [(np.float32, 1e4), (np.float32, 1e8), (np.float16, 1e3),
                                         (np.float64, 1e8), (np.float64, 1e12)])
def test_gpu_softmax_at_large_offsets(dtype, scale, n, log):
    """Issue 9 on CUDA: log_softmax was x - (m + log(s)); at 1e8 float32 m + log(s) = m, so
    log_softmax([1e8, 1e8]) gave [0, 0]. Rows around +-scale with ties and small offsets."""
    FusedSoftmax, FusedLogSoftmax = k_softmax.FusedSoftmax, k_softmax.FusedLogSoftmax
    rng = np.random.default_rng(n)
    ulp = float(np.spacing(dtype(scale)))
    x = np.concatenate([np.zeros((1, n)), rng.integers(-3, 4, size=(2, n)) * ulp, rng.standard_normal((1, n))]) + scale
    x[-1] = x[-1] * -1
    fn = (lambda t: F.log_softmax(t, -1)) if log else (lambda t: F.softmax(t, -1))
    got, want = _gpu_and_cpu(fn, [x], dtype, FusedLogSoftmax if log else FusedSoftmax)
    _gpu_close(got, want, GPU_TOL[dtype], f"n={n} {np.dtype(dtype).name} at {scale:g}")
    if n == 2 and log:
        assert abs(got[0][0, 0] + np.log(2)) <= GPU_TOL[dtype], got[0][0]


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(3), ids=["plain", "causal", "key padding"])
@pytest.mark.parametrize("a", ROOTS, ids=[f"scores{a * a:g}" for a in ROOTS])
@pytest.mark.parametrize("dtype,e", [(np.float32, 2), (np.float16, 64), (np.float16, 40)],
                         ids=["float32 simt", "float16 mma", "float16 simt"])
def test_gpu_attention_large_scores(dtype, e, a, case):
    """Issue 9 on CUDA: the kernels kept m + log2(l) per row and the backward took
    p = exp2(x - (m + log2 l)). Scores a^2 + b_i * d_j are exact in float32 (d a multiple
    of 8: at 1e8 a float32 holds multiples of 8) and scale = ln 2 makes the kernels'
    scale * log2(e) exactly 1, so they compute x = s exactly too: what is left is the
    rounding of the statistics. dq and dk are compared to within tol * a (see above)."""
    rng = np.random.default_rng(a + case)
    L = S = 150
    b = rng.integers(-3, 4, size=(2, 2, L))
    b[..., ::4] = 0
    d = rng.integers(-3, 4, size=(2, 2, S)) * 8
    q, k = np.zeros((2, 2, L, e)), np.zeros((2, 2, S, e))
    q[..., 0], q[..., 1], k[..., 0], k[..., 1] = a, b, a, d
    v = rng.standard_normal((2, 2, S, e)) * 0.25  # keeps dS, and the a * sum(dS) noise in dq, small
    kw = [{}, {"is_causal": True}, {}][case]
    arrays = [q, k, v]
    if case == 2:
        arrays.append(np.arange(S)[None, None, None, :] < np.array([S, 77])[:, None, None, None])
    fn = lambda q_, k_, v_, *m: F.scaled_dot_product_attention(  # noqa: E731
        q_, k_, v_, attn_mask=m[0] if m else None, scale=float(np.log(2)), **kw)
    got, want = _gpu_and_cpu(fn, arrays, dtype, k_attention.FlashAttention)
    tol = GPU_TOL[dtype] * (3 if dtype == np.float16 else 1)
    scales = [max(1.0, float(np.abs(want[0]).max())), a, a, max(1.0, float(np.abs(want[3]).max()))]
    _gpu_close(got, want, tol, f"attention {np.dtype(dtype).name} e={e} scores {a * a:g}", scales)


@pytest.mark.gpu
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("view", ["W[:, 0]", "w[::2]"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_gpu_norm_with_strided_weight_and_bias(dtype, view, rms):
    """Issue 15.2 on the kernels: weights and biases that are views, forward and backward."""
    n = 96
    rng = np.random.default_rng(1)
    W = rng.standard_normal((n, 3) if view == "W[:, 0]" else (2 * n,)) + 1

    def fn(x, Wt):
        w = Wt[:, 0] if view == "W[:, 0]" else Wt[::2]
        if rms:
            return F.rms_norm(x, (n,), w, eps=1e-5)
        return F.layer_norm(x, (n,), w, Wt[:, 1] if view == "W[:, 0]" else Wt[1::2])
    got, want = _gpu_and_cpu(fn, [rng.standard_normal((37, n)) + 2, W], dtype,
                             k_norm.FusedRMSNorm if rms else k_norm.FusedNorm)
    _gpu_close(got, want, GPU_TOL[dtype], f"{'rms_norm' if rms else 'layer_norm'} weight {view}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=["float32", "float16", "float64"])
def test_gpu_cross_entropy_on_strided_1d_logits(dtype):
    """Issue 15.3 on the kernels: (C,) logits that are a view, x[::2]."""
    rng = np.random.default_rng(2)
    got, want = _gpu_and_cpu(lambda X, t: F.cross_entropy(X[::2], t, label_smoothing=0.1),
                             [rng.standard_normal(2 * 301), np.array(7)], dtype, k_ce.FusedCrossEntropy)
    _gpu_close(got, want, GPU_TOL[dtype], f"cross_entropy on x[::2] {np.dtype(dtype).name}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=["float32", "float16", "float64"])
def test_gpu_row_kernels_on_a_two_dimensional_grid(monkeypatch, dtype):
    """Issue 15.6 on the kernels: with at most 5 blocks along x, every row kernel finds its
    rows through grid_block() (blockIdx.y * gridDim.x + blockIdx.x), as 2^31 rows and more do."""
    monkeypatch.setattr(_cuda, "MAX_GRID", 5)
    rng = np.random.default_rng(4)
    tol = GPU_TOL[dtype]
    for n in (100, 3000):
        got, want = _gpu_and_cpu(lambda t: F.log_softmax(t, -1), [rng.standard_normal((203, n))], dtype,
                                 k_softmax.FusedLogSoftmax)
        _gpu_close(got, want, tol, f"log_softmax n={n}")
    got, want = _gpu_and_cpu(lambda x, w, b: F.layer_norm(x, (64,), w, b),
                             [rng.standard_normal((301, 64)), rng.standard_normal(64), rng.standard_normal(64)],
                             dtype, k_norm.FusedNorm)
    _gpu_close(got, want, tol, "layer_norm")
    got, want = _gpu_and_cpu(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
                             [rng.standard_normal((301, 50)), rng.integers(0, 50, 301)], dtype, k_ce.FusedCrossEntropy)
    _gpu_close(got, want, tol, "cross_entropy")
    if dtype != np.float64:  # flash_bwd_dot: one warp per query row, 2 * 2 * 70 rows
        got, want = _gpu_and_cpu(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                 [rng.standard_normal((2, 2, 70, 64)) for _ in range(3)], dtype,
                                 k_attention.FlashAttention)
        _gpu_close(got, want, tol * (3 if dtype == np.float16 else 1), "attention")


@pytest.mark.gpu
def test_gpu_softmax_past_2_31_rows():
    """Issue 15.6 for real: 2^31 + 3 rows of float64 (one block per row: a grid of
    (2^30 + 2, 2)), 32 GiB in and out. The output goes to memory that held nan (CuPy's pool
    hands the freed block back), so a row left unwritten shows."""
    import cupy
    rows = 2**31 + 3
    if cupy.cuda.runtime.memGetInfo()[0] < 3 * rows * 8 + (4 << 30):
        pytest.skip("needs 52 GiB of free GPU memory")
    x = cupy.zeros((rows, 1), np.float64)
    x[-2:] = 5.0
    stale = cupy.full((rows, 1), np.nan, np.float64)
    del stale
    try:
        y = F.log_softmax(tt.as_tensor(x), -1).data  # as_tensor: no copy to take the nan block
        assert bool((y == 0.0).all()), f"rows not written: {int((y != 0.0).sum())}"
    finally:
        del x
        cupy.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
def test_gpu_float64_scalars_are_exact():
    """Issue 15.7 on the kernels: eps = 0.1 and label smoothing 0.1 arrived as float32
    (1.5e-9 off), visible against float64 on the CPU at 1e-12."""
    rng = np.random.default_rng(5)
    got, want = _gpu_and_cpu(lambda x: F.layer_norm(x, (40,), eps=0.1), [rng.standard_normal((9, 40)) * 0.3],
                             np.float64, k_norm.FusedNorm)
    _gpu_close(got, want, 1e-13, "layer_norm eps=0.1")
    w = np.linspace(0.1, 1.7, 40)
    got, want = _gpu_and_cpu(lambda x, t, w_: F.cross_entropy(x, t, weight=w_.detach(), label_smoothing=0.1),
                             [rng.standard_normal((9, 40)), rng.integers(0, 40, 9), w], np.float64,
                             k_ce.FusedCrossEntropy)
    _gpu_close(got[:2], want[:2], 1e-13, "cross_entropy smoothing=0.1, weights")
