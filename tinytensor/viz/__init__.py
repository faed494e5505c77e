"""Graph export: draw what ran, from the tape the backward engine reads.

    with tt.record() as tape:
        loss = model(tokens, targets)
    g = tt.viz.graph(tape, group_by_module=True, max_depth=2, collapse=True)
    g.render("gpt2.svg")            # .dot, .svg, .png, .pdf; DOT + a hint without Graphviz

or straight from outputs: `tt.viz.graph(loss, backward=True)`. The pipeline is one small
module per step: build (tape -> vertices and edges), grads (record the backward),
annotate (FLOPs and bytes), collapse (repeated blocks), fold (max_depth), render (DOT),
output (files).
"""
from .annotate import annotate as _annotate, fmt_bytes, fmt_flops, op_flops
from .build import Graph, Sources, build
from .collapse import collapse_repeats
from .fold import fold
from .grads import record_gradients
from .output import DotGraph, GraphvizNotFoundWarning, INSTALL_HINT, make, write
from .render import dot_lines

__all__ = ["graph", "Graph", "DotGraph", "GraphvizNotFoundWarning", "op_flops", "fmt_flops",
           "fmt_bytes", "write", "INSTALL_HINT"]


def _compiled_program(args):
    """The ir.Program to draw if `args` is one program or one compiled function, else None."""
    if len(args) != 1:
        return None
    (a,) = args
    from ..compiler import ir  # light: the IR classes only
    if isinstance(a, ir.Program):
        return a
    programs = getattr(a, "programs", None)
    if programs is not None and getattr(a, "_cache", None) is not None:
        if not programs:
            raise ValueError("tt.viz.graph: this compiled function has not run yet, so it has "
                             "no program to draw; call it once first")
        from ..compiler import pipeline  # drawn as its backend runs it: fused for C and CUDA
        return pipeline.lower(programs[-1], a.backend)
    return None


def graph(*outputs_or_tapes, group_by_module=True, max_depth=None, collapse=False,
          backward=False, create_graph=False, annotate=True, edge_labels="auto", names=None,
          legend=False, title=None, rankdir="TB", use_graphviz=True):
    """Draw the ops that produced `outputs` (Tensors) or that a `tt.record()` tape holds.

    Returns a `graphviz.Digraph` (a `DotGraph` stand-in without the graphviz package)
    with `.render(path)` by suffix and `.graph`, the drawn vertices, edges and per-module
    totals (`.graph.totals[(module_path, order)]`).

    - group_by_module: one cluster per module path (`h.0.attn`), labelled with its totals.
    - max_depth: modules deeper than this many path parts are folded into single boxes.
    - collapse: identical consecutive blocks (`h.0` ... `h.11`) are drawn once, marked x12.
    - backward: also record and draw the gradient graph (True or 1); an int n draws n
      derivative orders (n >= 2 is the create_graph=True case), one colour per order.
    - create_graph: same as backward=max(backward, 2).
    - annotate: FLOPs, bytes of output and bytes saved for backward per op and per module.
    - edge_labels: "auto" (shapes where they help: module boundaries, boxes,
      multi-output ops), "all" or "none".
    - names: {label: tensor} to name inputs (`{"tokens": idx}`).

    A compiled program (`tt.compile(f).programs[k]`, an `ir.Program` after any pass) or a
    compiled function (its latest program, fused as its backend runs it) is drawn as
    `tt.compiler.explain` draws each stage: one cluster per fused kernel.
    """
    program = _compiled_program(outputs_or_tapes)
    if program is not None:
        from ..compiler.explain import picture
        return picture(program, title or "compiled program")
    src = Sources(outputs_or_tapes, names)
    orders = int(backward)
    if create_graph:
        orders = max(orders, 2)
    extra = []
    if orders:
        outs = src.final_outputs()
        src.outputs = outs  # the forward's outputs, fixed before the gradient tape joins
        tape, extra, seeds = record_gradients(outs, src.leaves(), orders)
        src.add_tape(tape)
        src.names.update({id(t): n for n, t in seeds.items()})
        src.keep += list(seeds.values())
    g = build(src, extra)
    _annotate(g)
    if collapse:
        collapse_repeats(g)
    fold(g, max_depth)
    if edge_labels is True or edge_labels is False:
        edge_labels = "all" if edge_labels else "none"
    if edge_labels not in ("auto", "all", "none"):
        raise ValueError(f"viz.graph: edge_labels must be 'auto', 'all' or 'none', got {edge_labels!r}")
    body = dot_lines(g, group_by_module=group_by_module, annotate=annotate,
                     edge_labels=edge_labels, legend=legend, title=title, rankdir=rankdir)
    return make("tinytensor", body, g, use_graphviz)
