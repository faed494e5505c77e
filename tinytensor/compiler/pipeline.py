"""The compiler's one list of stages: which passes run, in which order, for each backend.

A captured program goes through COMMON (every backend: the program is still one piece, so
aot.py can split a differentiable one into its forward and backward afterwards), then each
piece through `lowering(backend)`: fusion (for the C backend with its column kernels), then
for the C backend the memory plan. Code generation (codegen/c.py, codegen/cuda.py)
receives the finished program and only emits; `explain` runs every stage of
`stages("c")`, this same list.

Each stage is a module with `run(program) -> Program` (passes/__init__.py says what each
does), named by its module. A stage that only annotates the program (the plan: its
`memory`) has `rewrites=False`: explain shows no stage of its own for it, every stage's
row having its planned peak.
"""
from typing import Callable, NamedTuple

from .. import symbolic
from .passes import columns, cse, dce, fold, fuse, pads, plan, remat, simplify


class Stage(NamedTuple):
    name: str
    run: Callable
    rewrites: bool = True   # False: the instructions come out as they went in


def _stage(module, rewrites=True):
    return Stage(module.__name__.rsplit(".", 1)[-1], module.run, rewrites)


def _fuse_with_columns(program):
    """Fusion (passes/fuse.py, which first lowers the ops that say so: passes/lower.py), then
    sums over leading dims as column kernels (passes/columns.py, the C backend's alone)."""
    return columns.run(fuse.run(program))


# remat last but for dce: cse would merge the recomputed values back into the kept ones, and
# a forward value whose every reader now reads its recomputation is dead (a gradient of a
# loss whose own value is not returned: nothing else read it)
COMMON = tuple(_stage(m) for m in (dce, cse, fold, simplify, pads, dce, remat, dce))
FUSE = _stage(fuse)
FUSE_C = Stage("fuse", _fuse_with_columns)
PLAN = _stage(plan, rewrites=False)   # the arena the C runner lays intermediates in
LOWERING = {"numpy": (), "cuda": (FUSE,), "c": (FUSE_C, PLAN)}


def lowering(backend):
    """The stages that make one piece of a program ready for `backend`'s code generator."""
    return LOWERING[backend]


def stages(backend):
    """Every stage a program goes through for `backend`, in order."""
    return COMMON + lowering(backend)


@symbolic.with_formulas
def run(program, stages=COMMON):
    """`program` through `stages` (Stage records or pass modules) in order; returns
    (program, [(stage name, instruction count)]), "captured" first."""
    counts = [("captured", len(program.instrs))]
    for s in stages:
        s = s if isinstance(s, Stage) else _stage(s)
        program = s.run(program)
        counts.append((s.name, len(program.instrs)))
    return program, counts


def lower(program, backend):
    """`program` (through COMMON already) made ready for `backend`'s code generator."""
    return run(program, lowering(backend))[0]


def after_fusion(program, backend):
    """For a program fused already by `fuse.run` (a test looking at the fused program
    before building it): the rest of `backend`'s lowering."""
    if backend == "c":
        program = columns.run(program)
    return run(program, lowering(backend)[1:])[0]
