"""See what the compiler did: per stage the IR text, a picture, the kernels' C, a table.

`tt.compiler.explain(step, *args, out="out/compile")` captures `step` on `args` (running
it once, as the first call of a compiled function does), runs every pass and writes what
each stage looks like; `explain_stages({"captured": p0, "fuse": p1, ...}, out_dir)` does
the writing for programs you already have. For stage k named s it writes, for stage k named s:
`k_s.txt` (the IR), `k_s.svg` (graphviz; `k_s.dot` when graphviz's `dot` is missing),
`k_s_kernels/<kernel>.c` (the generated C of each fused kernel), and `stats.md`, one row
per stage: nodes, kernels, bytes moved, planned peak. It returns those rows.

In the picture every fused kernel is a cluster labelled with its name, FLOPs and bytes
moved, around the ops it replaced; each op shows its module path. Bytes moved counts what
each top-level instruction reads and writes (a kernel's inputs and outputs; its internal
values stay in registers). FLOPs count one per element per elementwise op.
"""
import math
import os
import re
import shutil

from .. import symbolic
from . import instantiate
from .capture import capture
from .ir import nbytes
from .passes import plan as plan_pass

_FUSED_COLOR = "#fff4d6"



def bytes_moved(ins):
    return sum(nbytes(v) for v in list(ins.inputs) + list(ins.outputs))


def kernel_flops(ins):
    return sum(math.prod(i.outputs[0].shape) for i in ins.attrs["body"].instrs)


def stats(program):
    program = instantiate.captured(program)   # a program of symbolic sizes: at the captured ones
    kernels = [ins for ins in program.instrs if ins.op == "fused"]
    return {"nodes": len(program.instrs), "kernels": len(kernels),
            "bytes moved": sum(bytes_moved(ins) for ins in program.instrs),
            "planned peak": plan_pass.plan(program).peak}


def explain(fn, *args, out="out/compile", dynamic=None, **kwargs):
    """Capture `fn(*args, **kwargs)` once, run the stages of `tt.compile(backend="c")` one
    by one (compiler/pipeline.py `stages("c")`), and write every stage to `out` (see the module docstring). Returns the stats
    rows, one per stage. `fn` may be a tt.compile'd function (its own function is
    captured, with its dynamic setting unless `dynamic` says otherwise); dynamic=True
    shows the program of symbolic sizes (shapes such as [s0, s1]; bytes and peak at the
    captured sizes)."""
    # the passes load on first use: import tinytensor skips them
    from . import pipeline
    if dynamic is None:
        dynamic = getattr(fn, "dynamic", False)
    module = getattr(fn, "_module", None)
    if hasattr(fn, "_fn"):   # a CompiledFunction: capture what it wraps, not a call of it
        fn, args = fn._fn, ((module,) + args if module is not None else args)
    program, _, _ = capture(fn, args, kwargs, name=getattr(fn, "__qualname__", "step"),
                            dynamic=dynamic, differentiable=True)   # as tt.compile runs it
    stages = {"captured": program}
    with symbolic.formulas():
        for k, stage in enumerate(pipeline.stages("c")):
            program = stage.run(program)
            if stage.rewrites:   # the plan's stage: every row has its planned peak
                stages[stage.name if stage.name not in stages else f"{stage.name}{k}"] = program
        return explain_stages(stages, out)


def explain_stages(program_stages, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for k, (stage, program) in enumerate(program_stages.items()):
        base = os.path.join(out_dir, f"{k}_{stage}")
        with open(base + ".txt", "w") as f:
            f.write(program.text() + "\n")
        picture = _picture(program, stage)
        if shutil.which("dot"):
            picture.render(base, format="svg", cleanup=True)
        else:  # graphviz's binaries are missing: the .dot file still opens anywhere later
            picture.save(base + ".dot")
        _kernel_sources(program, base + "_kernels")
        rows.append({"stage": stage, **stats(program)})
    with open(os.path.join(out_dir, "stats.md"), "w") as f:
        f.write("| stage | nodes | kernels | bytes moved | planned peak |\n|---|---:|---:|---:|---:|\n")
        for r in rows:
            f.write(f"| {r['stage']} | {r['nodes']} | {r['kernels']} | {r['bytes moved']} | "
                    f"{r['planned peak']} |\n")
    return rows


def _kernel_sources(program, folder):
    # the C code generator loads on first use (hashlib, ctypes): import tinytensor skips it
    from .codegen import c
    source, names = c.program_source(program)
    if not names:
        return
    os.makedirs(folder, exist_ok=True)
    for k, name in names.items():
        with open(os.path.join(folder, name + ".c"), "w") as f:
            f.write('#include "tt_math.h"\n\n' + c.kernel_source(program.instrs[k], name) + "\n")


def picture(program, stage="program"):
    """A graphviz Digraph of `program`: one box per instruction (op, output shapes, module
    path), one filled cluster per fused kernel labelled with its name, FLOPs and bytes
    moved. What `explain` writes per stage, and what `tt.viz.graph(program)` returns."""
    return _picture(program, stage)


def _picture(program, stage):
    # written as DOT here and wrapped as tt.viz wraps a tape's picture, so that both render
    # the same way (render("x.svg") writes an SVG, "x.dot" the source, by suffix) and
    # neither needs the graphviz package
    from ..viz.output import make
    from ..viz.render import q
    body = [f"\tgraph [fontname=Helvetica label={q(stage)} rankdir=TB]\n",
            "\tnode [fontname=Helvetica fontsize=10]\n"]
    made = {}   # value id -> graph node that produces it
    for v in program.inputs:
        made[v.id] = f"in{v.id}"
        label = f"{v.name or 'input'}\n{list(v.shape)} {v.dtype.name}"
        body.append(f"\t{made[v.id]} [label={q(label)} shape=ellipse]\n")
    edges = []

    def op_node(lines, ins, key, indent):
        where = f"\n@ {ins.scope}" if ins.scope else ""
        shapes = ", ".join(f"{list(v.shape)}" for v in ins.outputs)
        label = f"{ins.op}\n{shapes}{where}"
        lines.append(f"{indent}{key} [label={q(label)} shape=box]\n")
        for v in ins.inputs:
            if v.id in made:
                edges.append(f"\t{made[v.id]} -> {key}\n")
        for v in ins.outputs:
            made[v.id] = key

    for k, ins in enumerate(program.instrs):
        if ins.op != "fused":
            op_node(body, ins, f"op{k}", "\t")
            body += edges
            edges.clear()
            continue
        label = f"{ins.attrs['name']}\n{kernel_flops(ins)} FLOPs, {bytes_moved(ins)} bytes"
        body.append(f"\tsubgraph cluster_{k} {{\n\t\tfillcolor={q(_FUSED_COLOR)} "
                    f"label={q(label)} style=filled\n")
        for j, inner in enumerate(ins.attrs["body"].instrs):
            op_node(body, inner, f"op{k}_{j}", "\t\t")
        body.append("\t}\n")
        body += edges
        edges.clear()
    for j, v in enumerate(program.outputs):
        body.append(f"\tout{j} [label={q(f'output {j}')} shape=ellipse]\n")
        if v.id in made:
            body.append(f"\t{made[v.id]} -> out{j}\n")
    return make(re.sub(r"\W", "_", stage), body, None)   # the label keeps the stage's words

