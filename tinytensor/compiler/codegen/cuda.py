"""CUDA backend: each fused kernel becomes one CUDA kernel, the program one CuPy RawModule.

`build(program)` returns a runner: `runner(list of CuPy arrays) -> list of outputs`.
Fused instructions launch their generated kernel; every other instruction runs its
Function's forward on CuPy arrays through the interpreter's `run_instr`, as eager does.

A kernel is one grid-stride loop over the elements of its output shape (static: the
source is specialized on it, as in the C backend). The loop index is split into the
collapsed dimensions only where some input is read broadcast; each input is read at its
broadcast strides, outputs (contiguous, of the loop shape) at the index itself.

The op expressions are the C backend's (emit.py `expr`: each op's rule): CUDA C++ has the same operators and
`fabsf`/`sqrtf`, and PRELUDE maps its `tt_exp`/`tt_tanh`/`tt_log`/`tt_erf` onto CUDA's accurate
`expf`/`tanhf`/`logf`/`erff` (and double versions; the exact GELU and its slope through erfc): what CuPy's eager ufuncs call, not the
`__expf` intrinsics. OPTIONS keep IEEE semantics: `--fmad=false` (a*b+c rounds twice,
as in eager, which runs one CuPy ufunc per op), no flush of subnormals, IEEE division
and square root.
"""
import math

import numpy as np

from ...device import cupy_module
from ... import symbolic
from .. import cache_disk, instantiate
from .columns import is_column_kernel
from .emit import CTYPE, expr, lit
from .loops import broadcast_strides, collapse
from .rows import RowKernel, is_row_kernel
from .toolchain import source_file
from .unit import translation_unit
from .runner import numpy_step

OPTIONS = ("--std=c++17", "--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")
BLOCK = 256
MAX_BLOCKS = 8192   # with the grid-stride loop, enough to fill any current GPU

# tt_math.h's names mapped onto CUDA's accurate math (the module docstring says why)
PRELUDE = source_file("cuda_prelude.h")


def kernel_source(instr, cname):
    """CUDA source of `extern "C" __global__ void cname(outputs..., inputs..., sizes...)`;
    sizes: the dynamic sizes (s0, s1, ...) the kernel's loops read, as `long long`."""
    body = instr.attrs["body"]
    if is_column_kernel(body):
        raise NotImplementedError("tt.compile(backend='cuda'): column-sum kernels have no CUDA "
                                  "lowering yet (passes/columns.py is the C backend's pass)")
    if is_row_kernel(body):
        return _row_kernel_source(body, cname)
    loop = tuple(body.outputs[0].shape)
    n = math.prod(loop)
    operands = list(body.outputs) + list(body.inputs)
    dims, strides = collapse(loop, [broadcast_strides(v.shape, loop) for v in operands])
    idx_t = _index_type(n)
    lines = [f'extern "C" __global__ void {cname}({_params(body)}) {{',
             f"    const {idx_t} step = ({idx_t})blockDim.x * gridDim.x;",
             f"    for ({idx_t} i = ({idx_t})blockIdx.x * blockDim.x + threadIdx.x; i < {n}; i += step) {{"]
    ind = "        "
    # the index is split into dims only where some input is read broadcast
    split = len(dims) > 1 and any(st != strides[0] for st in strides[len(body.outputs):])
    idx = ["i"]
    if split:
        idx = [f"i{d}" for d in range(len(dims))]
        lines.append(f"{ind}{idx_t} r = i;")
        for d in reversed(range(len(dims))):
            if d:
                lines.append(f"{ind}const {idx_t} i{d} = r % {dims[d]}; r /= {dims[d]};")
            else:
                lines.append(f"{ind}const {idx_t} i0 = r;")

    def offset(st):
        if not split:
            return "i" if st[0] else "0"
        terms = [i if s == 1 else f"{i} * {s}" for i, s in zip(idx, st) if s]
        return " + ".join(terms) or "0"

    # a capture on the GPU keeps its constants as CuPy arrays: .item(), not np.asarray
    names = {v.id: lit(a.item(), CTYPE[v.dtype.name])
             for v, a in body.consts.items()}
    for k, v in enumerate(body.inputs, start=len(body.outputs)):
        names[v.id] = f"x{k}"
        lines.append(f"{ind}const {CTYPE[v.dtype.name]} x{k} = p{k}[{offset(strides[k])}];")
    for m, ins in enumerate(body.instrs):
        t = CTYPE[ins.outputs[0].dtype.name]
        names[ins.outputs[0].id] = f"v{m}"
        lines.append(f"{ind}const {t} v{m} = {expr(ins, [names[v.id] for v in ins.inputs], t)};"
                     f"  /* {ins.op} */")
    for k, v in enumerate(body.outputs):
        lines.append(f"{ind}p{k}[i] = {names[v.id]};")
    lines += ["    }", "}"]
    return "\n".join(lines)


def _params(body):
    params = []
    for k, v in enumerate(list(body.outputs) + list(body.inputs)):
        const = "const " if k >= len(body.outputs) else ""
        params.append(f"{const}{CTYPE[v.dtype.name]} *__restrict__ p{k}")
    params += [f"const long long {name}" for name in symbolic.program_symbols(body)]
    return ", ".join(params)


def _index_type(n):
    """int where the loop's extent (a number) leaves room for the grid stride, else long long
    (always for a dynamic extent: it is known only at the launch)."""
    return "long long" if type(n) is not int or n > 2**31 - 1 - BLOCK * MAX_BLOCKS else "int"


def _kahan_sum_phase(rk):
    # compensated: no per-thread row buffer (the kernels keep to registers), and an error
    # that does not grow with the row's length; the compensation restarts at inf or nan
    def phase(acc, t, pre, elem):
        zero = lit(0.0, t)
        return [f"{t} {acc} = {zero}, {acc}_c = {zero};", *rk.pragma,
                f"for ({rk.itype} j = 0; j < {rk.n}; j++) {{", *("    " + x for x in pre),
                f"    const {t} y = {elem} - {acc}_c;", f"    const {t} s = {acc} + y;",
                f"    {acc}_c = s - s == {zero} ? (s - {acc}) - y : {zero};", f"    {acc} = s;", "}"]
    return phase


def _row_kernel_source(body, cname):
    """A row kernel (RowKernel): one thread per row, over the rows by a grid-stride loop.
    Simple and register-only, but a thread reads its row alone (uncoalesced across the
    warp): a block-per-row kernel is what long rows on a GPU want."""
    rk = RowKernel(body)
    idx_t = _index_type(math.prod(rk.F))
    rk.itype = idx_t
    rk.pragma = ["#pragma unroll 1"]   # unrolled, the loops keep several elements' values live
    lines = [f'extern "C" __global__ void {cname}({_params(body)}) {{',
             f"    const {idx_t} step = ({idx_t})blockDim.x * gridDim.x;",
             f"    for ({idx_t} row = ({idx_t})blockIdx.x * blockDim.x + threadIdx.x; row < {rk.nrows}; "
             f"row += step) {{"]
    ind = "        "
    dims = rk.outer_dims
    idx = [f"i{d}" for d in range(len(dims))]
    if dims:
        lines.append(f"{ind}{idx_t} r = row;")
        for d in reversed(range(len(dims))):
            lines.append(f"{ind}const {idx_t} i{d} = r % {dims[d]}; r /= {dims[d]};" if d
                         else f"{ind}const {idx_t} i0 = r;")
    lines += [ind + x for x in rk.row_offsets(idx) + rk.lines(_kahan_sum_phase(rk))]
    lines += ["    }", "}"]
    return "\n".join(lines)


@symbolic.with_formulas
def program_source(program):
    """The whole CUDA translation unit: PRELUDE, then one kernel per fused instruction.
    Returns (source, {instr index: kernel name})."""
    return translation_unit(program, [PRELUDE], kernel_source)


# ---------------------------------------------------------------- the runner
def build(program, write_back=None):
    """A runner for `program` on CuPy arrays (write_back: the C backend's in-place
    updates, which this one does not do: it writes new arrays). The module compiles (NVRTC,
    through CuPy) at the first call on each device."""
    source, names = program_source(program)
    return Runner(program, source, names)


@symbolic.with_formulas
def build_dynamic(program, write_back=None):
    """For a program of symbolic sizes: one module whose kernels take the sizes as
    arguments, and an instantiate.Instances making the runner of each call's sizes."""
    source, names = program_source(program)
    modules = {}   # shared by the instances: CUDA device id -> RawModule
    symbols = {k: symbolic.program_symbols(program.instrs[k].attrs["body"]) for k in names}

    def at(env):
        sizes = {k: tuple(np.int64(env[s]) for s in names_) for k, names_ in symbols.items()}
        return Runner(instantiate.at(program, env), source, names, modules, sizes)
    return instantiate.Instances(at)


class Runner:
    """Runs a built program: `runner(inputs) -> outputs` (lists of CuPy arrays). `modules`
    and `sizes` for an instance of a program of symbolic sizes (build_dynamic): the compiled
    modules its instances share, and per kernel the sizes it is launched with."""

    def __init__(self, program, source, names, modules=None, sizes=None):
        self.program, self.source, self.names = program, source, names
        self._modules = {} if modules is None else modules
        self._sizes = sizes or {}
        self._inputs = [v.id for v in program.inputs]
        self._outputs = [v.id for v in program.outputs]
        self._steps = {}   # CUDA device id -> (consts on that device, steps)

    def __call__(self, inputs):
        cupy = cupy_module()   # a clear error naming the package when CuPy or a GPU is missing
        if len(inputs) != len(self._inputs):
            raise ValueError(f"compiled program (cuda): expected {len(self._inputs)} inputs, got {len(inputs)}")
        for k, (a, v) in enumerate(zip(inputs, self.program.inputs)):
            if not isinstance(a, cupy.ndarray):
                raise TypeError(f"compiled program (backend='cuda'): input {k} ({v!r}) is a "
                                f"{type(a).__module__}.{type(a).__name__}, not a CuPy array; move "
                                f"the tensors to the GPU (.to('cuda')) or compile with backend='c'")
        dev = inputs[0].device.id if inputs else cupy.cuda.Device().id
        with cupy.cuda.Device(dev):
            prepared = self._steps.get(dev)
            if prepared is None:
                prepared = self._steps[dev] = self._prepare(cupy)
            consts, steps = prepared
            env = dict(consts)
            env.update(zip(self._inputs, inputs))
            for step in steps:
                step(env)
        return [env[i] for i in self._outputs]

    def _prepare(self, cupy):
        consts = {v.id: cupy.asarray(a) for v, a in self.program.consts.items()}
        dev = cupy.cuda.Device().id
        # CuPy compiles (and reads or writes its kernel cache) on the first get_function:
        # both under cache_disk's rules for that cache's directory
        with cache_disk.cupy_cache():
            module = self._modules.get(dev)
            if module is None and self.names:
                module = self._modules[dev] = cupy.RawModule(code=self.source, options=OPTIONS)
            steps = [_kernel_step(ins, module.get_function(self.names[k]), cupy, self._sizes.get(k, ()))
                     if k in self.names else numpy_step(ins) for k, ins in enumerate(self.program.instrs)]
        return consts, steps


def _kernel_step(ins, fn, cupy, sizes=()):
    # sizes: the dynamic sizes the kernel takes after its operands (np.int64 each)
    outs = [(v.id, tuple(v.shape), v.dtype.np) for v in ins.outputs]
    ins_ = [(v.id, v.dtype.np) for v in ins.inputs]
    n = math.prod(outs[0][1])
    grid = (min(-(-n // BLOCK), MAX_BLOCKS),)
    empty, contiguous = cupy.empty, cupy.ascontiguousarray

    def step(env):
        args = []
        for i, shape, dt in outs:
            a = env[i] = empty(shape, dt)
            args.append(a)
        for i, dt in ins_:
            a = env[i]
            if not a.flags.c_contiguous or a.dtype != dt:
                a = contiguous(a, dtype=dt)
            args.append(a)
        if n:
            fn(grid, (BLOCK,), tuple(args) + sizes)
    return step

