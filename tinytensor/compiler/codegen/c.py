"""C backend: each fused kernel becomes one C function, the program one shared object.

`build(program)` returns a runner (codegen/runner.py): `runner(list of input arrays) -> list
of outputs`. Fused instructions run their generated C function; every other instruction
runs its Function's NumPy forward, exactly as eager does. The program comes lowered by
compiler/pipeline.py (fused, column kernels made, memory planned): this module only emits,
compiles and hands the result to the runner.

The kernels' sources come from loops.py (a body without reductions), rows.py (sums and
maxima over trailing dims) and columns.py (sums over leading dims), their op expressions
from emit.py; they are compiled with toolchain.py's flags. The math functions come from
tt_math.h, written to vectorize (libm calls would not): exp, log, tanh, and erf with the
exact GELU and its slope, which are not exactly rounded (within an ulp or two of the exact
value, as eager's are), so kernels using them are not bitwise eager's.
"""
from ... import symbolic
from .. import instantiate
from . import runner as _runner, threads as _threads_mod
from .columns import column_kernel_source, is_column_kernel
from .loops import flat_kernel_source
from .rows import PAIRWISE, is_row_kernel, row_kernel_source
from .runner import Runner
from .toolchain import INCLUDE, load_with_math
from .unit import translation_unit


def kernel_source(instr, cname, same=None):
    """C source of the kernel `void cname(void *const *b)`; b = outputs, then inputs.
    same: {input operand index: output operand index} of inputs that share an output's memory."""
    body = instr.attrs["body"]
    if is_column_kernel(body):
        return column_kernel_source(body, cname, same)
    if is_row_kernel(body):
        return row_kernel_source(body, cname, same)
    return flat_kernel_source(body, cname, same)


@symbolic.with_formulas
def program_source(program, in_place=None):
    """The whole translation unit: the header, then one function per fused instruction.
    in_place: {output value id: input value id} computed in place (codegen/runner.py).
    Returns (source, {instr index: function name})."""
    head = [INCLUDE, ""]
    if any(ins.op == "fused" and is_row_kernel(ins.attrs["body"]) for ins in program.instrs):
        head += [PAIRWISE, ""]
    in_place = in_place or {}

    def source(ins, name):
        n_out = len(ins.outputs)
        position = {v.id: n_out + j for j, v in enumerate(ins.inputs)}
        same = {position[in_place[v.id]]: k for k, v in enumerate(ins.outputs)
                if v.id in in_place and in_place[v.id] in position}
        return kernel_source(ins, name, same)
    return translation_unit(program, head, source)


@symbolic.with_formulas
def build_dynamic(program, write_back=None, threads=None):
    """For a program of symbolic sizes: its kernels compiled once, taking the sizes as an
    argument, and an instantiate.Instances that makes the runner of each call's sizes (the
    program at those sizes: its memory plan, arena and NumPy steps) from those kernels.
    threads: as in `build`."""
    _lowered(program, "build_dynamic")
    fused = {k for k, ins in enumerate(program.instrs) if ins.op == "fused"}
    in_place = _runner.in_place(program, fused, write_back or {})
    kernels, source = compiled(program, in_place)
    symbols = symbolic.program_symbols(program)
    count = 1 + max((int(s[1:]) for s in symbols), default=-1)
    threads = _threads_of(threads)

    def at(env):
        sizes = [env.get(f"s{k}", 0) for k in range(count)]
        return Runner(instantiate.at(program, env), kernels, source, in_place, sizes=sizes,
                      threads=threads)
    generic = Runner(program, kernels, source, in_place, sizes=[0] * count, generic=True)
    return instantiate.Instances(at, generic)


def compiled(program, in_place):
    """({instr index: (loaded C function, its `_part` entry)}, source) of a program's
    fused kernels."""
    source, names = program_source(program, in_place)
    lib = load_with_math(source) if names else None
    # {k: (the whole kernel, its parts' entry)}
    return {k: (getattr(lib, name), getattr(lib, f"{name}_part")) for k, name in names.items()}, source


def _lowered(program, who):
    """Code generation only emits: fusion, column kernels and the memory plan are the
    pipeline's (compiler/pipeline.py), run before; a program without its plan skipped them."""
    if program.memory is None:
        raise ValueError(f"codegen.c.{who}: the program is not lowered for the C backend (no "
                         f"memory plan); run compiler/pipeline.py `lower(program, 'c')` first")


def _threads_of(threads):
    return _threads_mod.program_threads() if threads is None else threads


def build(program, write_back=None, threads=None):
    """A runner for `program`: call it with the input arrays, get the output arrays.
    write_back: {output index: input index} that the runner may compute in place.
    threads: how many parts big kernels and matmuls run in (codegen/threads.py); None: as
    many as NumPy's OpenBLAS runs (1 with another BLAS)."""
    _lowered(program, "build")
    fused = {k for k, ins in enumerate(program.instrs) if ins.op == "fused"}
    in_place = _runner.in_place(program, fused, write_back or {})
    kernels, source = compiled(program, in_place)
    return Runner(program, kernels, source, in_place, threads=_threads_of(threads))
