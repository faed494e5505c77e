"""Every CUDA kernel compiles for sm_80 (A100) and sm_90 (H100/H200) without a GPU, and
the hot ones (float32, float16) use no spill memory; so does what a pre-Ampere GPU is given
(sm_75, T4: the instantiation lists for that compute capability, without the tensor-core
attention kernels, which need sm_80). CUDA 13's nvcc compiles nothing older than sm_75.

Compiles with nvcc (`--ptxas-options=-v`) when it is on the PATH, and with NVRTC (what
CuPy uses at run time, through `cupy_backends.cuda.libs.nvrtc`) when CuPy and the NVRTC
library are installed; skips when neither is. A compile error or a spill fails the test.
Reports are cached in pytest's cache keyed by the source text, the kernel list and the
compiler version, so only a changed source is compiled again."""
import hashlib
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tinytensor.kernels import _cuda, cuda_attention, cuda_cross_entropy, cuda_norm, cuda_softmax

MODULES = [cuda_softmax, cuda_norm, cuda_cross_entropy, cuda_attention]
ARCHS = ("sm_80", "sm_90", "sm_75")


def _exprs(mod, arch):
    """What `_cuda.function` compiles on a device of that compute capability (the kernels
    the dispatcher can pick, or their register-bounding subset)."""
    return mod.cuda_instantiations(arch=int(arch[3:]))


def _nvcc_version(nvcc):
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]


def _compilers():
    out = []
    nvcc = _cuda.find_nvcc()
    if nvcc:
        out.append(("nvcc", _nvcc_version(nvcc)))
    v = _cuda.nvrtc_version()
    if v is not None:
        out.append(("nvrtc", f"nvrtc {v}"))
    return out


COMPILERS = _compilers()


@pytest.fixture(scope="module")
def reports(request):
    """{(compiler, module name): {(expr, arch): info}}, compiled in parallel, cached."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    jobs, result = [], {}
    for comp, version in COMPILERS:
        for mod in MODULES:
            for arch in ARCHS:
                exprs = _exprs(mod, arch)
                key = hashlib.sha256(json.dumps([_cuda.source(mod.CUDA_SOURCE), exprs, version, arch,
                                                 comp]).encode()).hexdigest()[:24]
                hit = cache.get(f"tinytensor/ptxas/{key}", None) if cache is not None else None
                jobs.append((comp, mod, exprs, arch, key, hit))

    def run(job):
        comp, mod, exprs, arch, key, hit = job
        if hit is not None:
            return job, {tuple(json.loads(k)): v for k, v in hit.items()}
        fn = _cuda.ptxas_report if comp == "nvcc" else _cuda.nvrtc_report
        try:
            rep = fn(mod.CUDA_SOURCE, exprs, archs=(arch,))
        except RuntimeError as e:  # a compile error: reported by the test of that file
            return job, str(e)
        if cache is not None:
            cache.set(f"tinytensor/ptxas/{key}", {json.dumps(list(k)): v for k, v in rep.items()})
        return job, rep

    with ThreadPoolExecutor(max_workers=2) as pool:
        for (comp, mod, exprs, arch, _, _), rep in pool.map(run, jobs):
            result.setdefault((comp, mod.CUDA_SOURCE), {})
            if isinstance(rep, str):
                result[(comp, mod.CUDA_SOURCE)] = rep
            elif isinstance(result[(comp, mod.CUDA_SOURCE)], dict):
                result[(comp, mod.CUDA_SOURCE)].update(rep)
    return result


def _hot(expr):
    # float64 kernels are for checking on the GPU, not for speed; their double-precision
    # math may call slow-path subroutines whose register saves ptxas counts as spills
    return "<double" not in expr


@pytest.mark.slow
@pytest.mark.skipif(not COMPILERS, reason="neither nvcc nor NVRTC (cupy + nvidia-cuda-nvrtc) found")
@pytest.mark.parametrize("compiler", [c for c, _ in COMPILERS] or ["none"])
@pytest.mark.parametrize("mod", MODULES, ids=[m.CUDA_SOURCE for m in MODULES])
def test_kernels_compile_without_spills(reports, compiler, mod):
    rep = reports[(compiler, mod.CUDA_SOURCE)]
    assert not isinstance(rep, str), rep  # the compiler's error output
    missing = [(e, a) for a in ARCHS for e in _exprs(mod, a) if (e, a) not in rep]
    assert not missing, f"kernels not compiled: {missing}"
    spills = {f"{e} {a}": (r["spill_stores"], r["spill_loads"]) for (e, a), r in rep.items()
              if _hot(e) and (r["spill_stores"] or r["spill_loads"])}
    assert not spills, f"register spills (stores, loads) in hot kernels: {spills}"
    assert all(r["registers"] <= 255 for r in rep.values())


def test_ptxas_report_parses_and_fails_on_errors(tmp_path, monkeypatch):
    """The checker itself: it reads registers and spills, and raises on a compile error."""
    log = ("ptxas info    : Compiling entry function '_Z1fv' for 'sm_80'\n"
           "ptxas info    : Function properties for _Z1fv\n"
           "    8 bytes stack frame, 12 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, 380 bytes cmem[0]\n")
    rep = _cuda._parse_ptxas(log, ["f"], "sm_80", "")
    (info,) = rep.values()
    assert info["registers"] == 40 and info["spill_stores"] == 12 and info["spill_loads"] == 4
    if _cuda.find_nvcc() is None:
        pytest.skip("nvcc not found")
    monkeypatch.setattr(_cuda, "_DIR", str(tmp_path))
    monkeypatch.setattr(_cuda, "_sources", {})
    (tmp_path / "common.cuh").write_text("")
    (tmp_path / "bad.cu").write_text("template <int N> __global__ void k(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed"):
        _cuda.ptxas_report("bad", ["k<1>"], archs=("sm_80",))
