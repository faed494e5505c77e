"""Column kernels of the C backend.

A fused body with sums over the leading dims F[:r] of its shape F (passes/columns.py) is one loop nest over F, rows outside, columns inside; each sum's output (the
C = prod(F[r:]) columns, contiguous) is zeroed first, then every row is added to it in
order: NumPy's sequential sum per column of a C-contiguous array, from 0 (so -0.0 sums
to 0.0, as in NumPy). The inner loop, over a row's columns, vectorizes; the accumulators
stay in cache. Elementwise outputs of shape F are written in the same sweep.
"""
import math

import numpy as np

from ... import symbolic
from ..passes.columns import column_sum
from .emit import CTYPE, expr, lit
from .loops import GRAIN, broadcast_strides, collapse, function, split_at


def is_column_kernel(body):
    return any(column_sum(ins) for ins in body.instrs)


def column_kernel_source(body, cname, same=None):
    sums = [ins for ins in body.instrs if column_sum(ins)]
    F, r = column_sum(sums[0])
    operands = list(body.outputs) + list(body.inputs)
    acc = {ins.outputs[0].id for ins in sums}
    if same and any(operands[k].id in acc for k in same.values()):
        raise ValueError(f"c.kernel_source: {cname} sums into an output that shares an input's "
                         f"memory; a column kernel adds into its outputs and cannot")
    strides = [broadcast_strides(F[r:], F) if v.id in acc else broadcast_strides(v.shape, F)
               for v in operands]
    lead_dims, lead = collapse(F[:r], [s[:r] for s in strides])
    cols_dims, cols = collapse(F[r:], [s[r:] for s in strides])
    idx = [f"i{d}" for d in range(len(lead_dims))] + [f"j{d}" for d in range(len(cols_dims))]
    dims = lead_dims + cols_dims
    per = [a + b for a, b in zip(lead, cols)]

    def offset(st):
        terms = [i if s == 1 else f"{i} * {s}" for i, s in zip(idx, st) if s]
        return " + ".join(terms) or "0"

    lines = []
    cut = split_at(cols_dims)   # a loop over columns is split: each part sums its own columns
    cut = 0 if cut is None else cut
    first = len(lead_dims) + cut
    rest = math.prod(cols_dims[cut + 1:])   # the dims before `cut` have length 1
    for k, v in enumerate(body.outputs):
        if v.id in acc:
            lines.append(f"    for (int64_t j = tt_lo * {rest}; j < tt_hi * {rest}; j++) "
                         f"p{k}[j] = {lit(0.0, CTYPE[v.dtype.name])};")
    indent = "    "
    for n, (i, d) in enumerate(zip(idx, dims)):
        lo, hi = ("tt_lo", "tt_hi") if n == first else ("0", d)
        lines.append(f"{indent}for (int64_t {i} = {lo}; {i} < {hi}; {i}++) {{")
        indent += "    "
    names = {v.id: lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
             for v, a in body.consts.items()}
    for k, v in enumerate(body.inputs, start=len(body.outputs)):
        names[v.id] = f"x{k}"
        lines.append(f"{indent}const {CTYPE[v.dtype.name]} x{k} = p{k}[{offset(per[k])}];")
    position = {v.id: k for k, v in enumerate(body.outputs)}
    for n, ins in enumerate(body.instrs):
        out = ins.outputs[0]
        if out.id in acc:
            k = position[out.id]
            lines.append(f"{indent}p{k}[{offset(per[k])}] += {names[ins.inputs[0].id]};  /* {ins.op} */")
            continue
        t = CTYPE[out.dtype.name]
        names[out.id] = f"v{n}"
        lines.append(f"{indent}const {t} v{n} = {expr(ins, [names[v.id] for v in ins.inputs], t)};"
                     f"  /* {ins.op} */")
    for k, v in enumerate(body.outputs):
        if v.id not in acc:
            lines.append(f"{indent}p{k}[{offset(per[k])}] = {names[v.id]};")
    for _ in dims:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return function(cname, operands, len(body.outputs), same, lines, symbolic.program_symbols(body),
                     split=(cols_dims[cut], GRAIN if cut == len(cols_dims) - 1 else 1))
