"""Compiling the CUDA sources in `cuda/`: at run time through CuPy's `RawModule` (NVRTC),
and ahead of time through `nvcc` for the compile checks (registers, spills).

Each `.cu` file is compiled with `common.cuh` pasted in front, so the sources need no
include path and no CUDA headers: the same text goes through NVRTC and nvcc. Kernels are
C++ templates; a caller names one instantiation (`"softmax_fwd_warp<float, 4, 8, false>"`)
and gets it compiled once per device and cached (CuPy also keeps the binaries on disk).
Which instantiations a file compiles depends on the device's compute capability: the
tensor-core attention kernels need sm_80, and below it (T4: sm_75) they are left out of
the program, so that the rest still compiles there.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda")
_sources = {}
_functions = {}

# CUDA storage type of each dtype the kernels take. The sources are generic over bf16 too,
# but tinytensor has no bfloat16 dtype yet, so nothing compiles or dispatches it.
CTYPES = {"float32": "float", "float64": "double", "float16": "half16"}

# blocks a grid holds along x (along y: 65535)
MAX_GRID = 2**31 - 1


def ctype(dtype):
    name = str(dtype)
    if name not in CTYPES:
        raise TypeError(f"tinytensor.kernels: no CUDA kernel for dtype {name} "
                        f"(the kernels take {', '.join(CTYPES)})")
    return CTYPES[name]


def grid(blocks):
    """The grid for `blocks` row blocks (a row count may pass 2^31): (x, y) with x <= MAX_GRID
    and x * y >= blocks by less than y, read back by `grid_block()` in common.cuh."""
    blocks = max(1, int(blocks))
    y = -(-blocks // MAX_GRID)
    if y > 65535:
        raise ValueError(f"tinytensor.kernels: {blocks} blocks do not fit one CUDA grid "
                         f"(at most {MAX_GRID} * 65535)")
    return (-(-blocks // y), y)


_cc = {}
_smem = {}
KNOWN_ARCHS = (75, 80, 86, 89, 90, 100, 120)  # to name the one a kernel needs
_ATTR_SMEM_OPTIN = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin


def compute_capability():
    """The current CuPy device's compute capability as an int (75 for a T4, 90 for an H100)."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    dev = cupy.cuda.Device().id
    cc = _cc.get(dev)
    if cc is None:
        cc = _cc[dev] = int(cupy.cuda.Device(dev).compute_capability)
    return cc


def max_shared_memory():
    """The shared memory one block may opt in to on the current CuPy device, in bytes
    (64 KiB on a T4, 227 KiB on an H100)."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    dev = cupy.cuda.Device().id
    v = _smem.get(dev)
    if v is None:
        v = _smem[dev] = int(cupy.cuda.runtime.deviceGetAttribute(_ATTR_SMEM_OPTIN, dev))
    return v


def source(name):
    """`common.cuh` followed by `cuda/<name>.cu`."""
    src = _sources.get(name)
    if src is None:
        with open(os.path.join(_DIR, "common.cuh")) as f:
            common = f.read()
        with open(os.path.join(_DIR, name + ".cu")) as f:
            src = common + "\n#line 1 \"" + name + ".cu\"\n" + f.read()
        _sources[name] = src
    return src


_registry = {}
_smem_set = {}


def register(name, instantiations):
    """`instantiations(full=True, arch=cc)` lists every kernel of `cuda/<name>.cu` the
    dispatcher may ask for on a device of compute capability `cc`; they are compiled
    together, once per device, at the first request."""
    _registry[name] = instantiations


def module_exprs(name, expr, cc):
    """The instantiations to compile together for `expr` on compute capability `cc`: the
    registered list for `cc`; `expr` alone when no list has it (a kernel asked for by
    hand). A registered kernel that `cc` cannot run is an error naming the requirement."""
    if name not in _registry:
        return [expr]
    exprs = list(_registry[name](full=True, arch=cc))
    if expr in exprs:
        return exprs
    for need in (a for a in KNOWN_ARCHS if a > cc):
        if expr in _registry[name](full=True, arch=need):
            raise RuntimeError(f"tinytensor.kernels: {name}.cu kernel {expr} needs a GPU of compute "
                               f"capability {need / 10:.1f} (sm_{need}) or newer; this one is "
                               f"{cc / 10:.1f} (sm_{cc})")
    return [expr]


def function(name, expr):
    """The compiled kernel `expr` (a template instantiation) from `cuda/<name>.cu`, for
    the current CuPy device."""
    # CuPy is optional: imported only on a GPU path
    import cupy
    dev = cupy.cuda.Device().id
    key = (name, expr, dev)
    fn = _functions.get(key)
    if fn is None:
        exprs = module_exprs(name, expr, compute_capability())
        mod = cupy.RawModule(code=source(name), options=("--std=c++17",), name_expressions=exprs)
        for e in exprs:
            _functions[(name, e, dev)] = mod.get_function(e)
        fn = _functions[key]
    return fn


def launch(name, expr, grid, block, args, shared_mem=0):
    fn = function(name, expr)
    if shared_mem > 48 * 1024 and _smem_set.get(id(fn), 0) < shared_mem:
        fn.max_dynamic_shared_size_bytes = shared_mem  # opt in beyond the 48 KiB default
        _smem_set[id(fn)] = shared_mem
    fn(grid, block, args, shared_mem=shared_mem)


# ------------------------------------------------------------------ ahead-of-time checks
def find_nvcc():
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if root and os.path.exists(os.path.join(root, "bin", "nvcc")):
                return os.path.join(root, "bin", "nvcc")
    return nvcc


_FUNC = re.compile(r"ptxas info\s*: Compiling entry function '(\S+)' for '(sm_\d+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def ptxas_report(name, exprs, archs=("sm_80", "sm_90"), nvcc=None, timeout=600):
    """Compile `cuda/<name>.cu` with nvcc for `archs`, instantiating `exprs`, and return
    {(expr, arch): {"registers", "spill_stores", "spill_loads", "stack", "smem"}}.

    Raises RuntimeError with the compiler's output on a compile error."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    refs = ",\n".join(f"  (const void*)&{e}" for e in exprs)
    # taking each instantiation's address in host code makes nvcc emit its device code
    text = source(name) + f"\nconst void* tt_instantiate_{name}[] = {{\n{refs}\n}};\n"
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name + ".cu")
        with open(path, "w") as f:
            f.write(text)
        for arch in archs:
            out = os.path.join(tmp, f"{name}_{arch}.cubin")
            cmd = [nvcc, "-cubin", f"-arch={arch}", "--std=c++17", "--ptxas-options=-v",
                   "-o", out, path]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            log = proc.stdout + proc.stderr
            if proc.returncode != 0:
                raise RuntimeError(f"nvcc failed on {name}.cu for {arch}:\n{log}")
            if "warning" in log.lower() and "ptxas info" not in log:
                raise RuntimeError(f"nvcc warned on {name}.cu for {arch}:\n{log}")
            report.update(_parse_ptxas(log, exprs, arch, nvcc))
    return report


def nvrtc_report(name, exprs, archs=("sm_80", "sm_90")):
    """As `ptxas_report`, compiling through NVRTC (what CuPy uses at run time) with
    `cupy_backends.cuda.libs.nvrtc`; needs no GPU."""
    # NVRTC's bindings come with CuPy, which is optional
    from cupy_backends.cuda.libs import nvrtc
    report = {}
    for arch in archs:
        prog = nvrtc.createProgram(source(name), name + ".cu", [], [])
        try:
            for e in exprs:
                nvrtc.addNameExpression(prog, e)
            try:
                nvrtc.compileProgram(prog, [f"-arch={arch}", "--std=c++17", "-Xptxas", "-v"])
            except Exception as err:
                raise RuntimeError(f"NVRTC failed on {name}.cu for {arch}: {err}\n"
                                   f"{nvrtc.getProgramLog(prog)}") from err
            report.update(_parse_ptxas(nvrtc.getProgramLog(prog), exprs, arch, find_nvcc() or ""))
        finally:
            nvrtc.destroyProgram(prog)
    return report


def nvrtc_version():
    try:
        # NVRTC's bindings come with CuPy, which is optional
        from cupy_backends.cuda.libs import nvrtc
        return nvrtc.getVersion()
    except Exception:  # no CuPy, or no NVRTC library
        return None


def _parse_ptxas(log, exprs, arch, nvcc):
    mangled = {}
    cur = None
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            cur = m.group(1)
            mangled[cur] = {"registers": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0, "smem": 0}
            continue
        if cur is None:
            continue
        m = _PROPS.search(line)
        if m:
            mangled[cur].update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                spill_loads=int(m.group(3)))
        m = _REGS.search(line)
        if m:
            mangled[cur]["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            if s:
                mangled[cur]["smem"] = int(s.group(1))
    names = _demangle(list(mangled), nvcc)
    norm = {_norm(e): e for e in exprs}
    out = {}
    for mname, dname in zip(mangled, names):
        # "void softmax_fwd_warp<float, 4, 8, false>(const float*, ...)" -> the expression
        head = dname.split("(")[0].replace("void ", "", 1)
        expr = norm.get(_norm(head), head)
        out[(expr, arch)] = mangled[mname]
    return out


def _norm(s):
    s = re.sub(r"\s+", "", s)
    return s.replace("(bool)1", "true").replace("(bool)0", "false")


def _demangle(names, nvcc):
    filt = os.path.join(os.path.dirname(nvcc), "cu++filt")
    if not names or not os.path.exists(filt):
        filt = shutil.which("c++filt")
    if not names or filt is None:
        return names
    proc = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True)
    out = proc.stdout.splitlines()
    return out if len(out) == len(names) else names


def main():
    """python -m tinytensor.kernels._cuda [nvcc|nvrtc] [--full] [sm_XX ...]: registers and
    spills of every kernel for sm_80 and sm_90 (or the archs named)."""
    # the launch modules import this one: at the top the import would be circular
    from . import cuda_attention, cuda_cross_entropy, cuda_norm, cuda_softmax
    use = "nvrtc" if "nvrtc" in sys.argv[1:] else "nvcc"
    full = "--full" in sys.argv[1:]
    archs = [a for a in sys.argv[1:] if a.startswith("sm_")] or ["sm_80", "sm_90"]
    for mod in (cuda_softmax, cuda_norm, cuda_cross_entropy, cuda_attention):
        rep = {}
        for arch in archs:
            exprs = mod.cuda_instantiations(full=full, arch=int(arch[3:]))
            rep.update((nvrtc_report if use == "nvrtc" else ptxas_report)(mod.CUDA_SOURCE, exprs, archs=(arch,)))
        for (expr, arch), r in sorted(rep.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(f"{use} {arch}  {expr:44s} regs {r['registers']:3d}  spill st/ld "
                  f"{r['spill_stores']}/{r['spill_loads']}  stack {r['stack']}")


if __name__ == "__main__":
    main()
