"""Column kernels: sums over leading dims (the sum_to of a bias gradient), compiled on the
fused program (passes/fuse.py) by the C backend (the CUDA backend has no column kernels
yet).

Each becomes a column kernel, appended to the elementwise kernel that makes its input
where there is one. NumPy adds the rows of a C-contiguous array in order, so the kernel
does too; on an array that eager may hold strided (`_eager_contiguous`) or a single column
(NumPy sums that pairwise), the sum stays NumPy's.
"""
import math

import numpy as np

from ...core import primitives as P
from ...core.rules import FLOAT, rule_of
from ...ops.indexing import GetItemCopy, IndexAdd, ScatterAdd
from ...ops.linalg import MatMul
from ...ops.movement import Cat, Permute, Reshape
from ...ops.reduce import Amax, Sum
from ... import symbolic
from ..ir import Instr, Program
from .fuse import Domain, _common_scope, _kernel_name, _static, fusible


def column_sum(ins):
    """(F, r) when `ins` (a sum, or the sum_to of a broadcast's gradient) sums a float array
    of static shape F over its leading dims F[:r] only, into at least two columns, else None.
    NumPy sums a C-contiguous array over leading dims by adding its rows one after another
    in order, from 0: a sequential sum per column, which a column kernel reproduces. One
    column is a contiguous run that NumPy sums pairwise (a row reduction's order)."""
    if ins.fn not in (Sum, P.SumTo) or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return None
    x, out = ins.inputs[0], ins.outputs[0]
    if not _static(x.shape) or not _static(out.shape) or x.dtype.name not in FLOAT \
            or out.dtype.name != x.dtype.name or math.prod(x.shape) == 0:
        return None
    if ins.fn is Sum:
        dims = tuple(ins.attrs.get("dims", ()))
    else:   # the axes primitives.sum_to_array sums over
        shape = tuple(ins.attrs["shape"])
        lead = x.ndim - len(shape)
        dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                          if s == 1 and x.shape[i + lead] != 1)
    r = len(dims)
    if not dims or dims != tuple(range(r)) or r >= x.ndim or math.prod(x.shape[r:]) < 2:
        return None
    return Domain(tuple(x.shape), r)


@symbolic.with_formulas
def run(program):
    """`program` (fused) with each column sum (`column_sum`) of an array eager holds
    C-contiguous computed as a column kernel: appended to the elementwise kernel (or the
    lone elementwise op) that makes its input, which then reads its inputs once for both
    (and no longer writes a value only the sum read), or a kernel of its own."""
    instrs = list(program.instrs)
    producer = {v.id: k for k, ins in enumerate(instrs) for v in ins.outputs}
    uses = {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            uses.setdefault(v.id, set()).add(k)
    outputs = {v.id for v in program.outputs}
    contiguous = _eager_contiguous(program)
    for k, ins in enumerate(instrs):
        dom = column_sum(ins)
        if dom is None or ins.inputs[0].id not in contiguous:
            continue
        x = ins.inputs[0]
        p = producer.get(x.id)
        into = instrs[p] if p is not None else None
        if into is not None and into.op != "fused" and fusible(into) and tuple(x.shape) == dom[0]:
            body = [into]
        elif into is not None and into.op == "fused" and _column_domain(into.attrs["body"]) in (dom, "plain") \
                and tuple(into.attrs["body"].outputs[0].shape) == dom[0]:
            body = list(into.attrs["body"].instrs)
        else:
            p, body = None, []
        members = body + [ins]
        made = {v.id for m in members for v in m.outputs}
        inputs = list(dict.fromkeys(v for m in members for v in m.inputs if v.id not in made))
        kernel_consts = dict(into.attrs["body"].consts) if body and into.op == "fused" else {}
        inputs = [v for v in inputs if v not in kernel_consts]   # the producer's own scalars
        for v in [v for v in inputs if v in program.consts and math.prod(v.shape) == 1]:
            kernel_consts[v] = program.consts[v]
            inputs.remove(v)
        # the sum's input stays an output of the kernel only if something else reads it
        keep = x.id in outputs or bool(uses.get(x.id, set()) - {k})
        outs = [] if p is None else [v for v in (into.outputs if into.op == "fused" else [x])
                                     if v.id != x.id or keep]
        outs.append(ins.outputs[0])
        kernel = Instr(op="fused", fn=None, inputs=inputs, outputs=outs,
                       attrs={"body": Program(inputs=inputs, instrs=members, outputs=outs,
                                              consts=kernel_consts), "name": _kernel_name(members)},
                       scope=_common_scope(members), role=members[0].role)
        if p is None:
            instrs[k] = kernel
        else:   # at the producer's place: what reads the sum comes after the sum, after it
            instrs[p], instrs[k] = kernel, None
            for v in kernel.outputs:
                producer[v.id] = p
            for v in inputs:
                uses.setdefault(v.id, set()).add(p)
    return program.replace(instrs=[ins for ins in instrs if ins is not None])


def _column_domain(body):
    """(F, r) of a column kernel's body, "plain" for an elementwise body, None otherwise."""
    doms = {column_sum(ins) for ins in body.instrs if ins.fn in (Sum, P.SumTo)}
    if any(rule_of(ins.fn).reduce and column_sum(ins) is None for ins in body.instrs) or None in doms:
        return None
    return doms.pop() if len(doms) == 1 else ("plain" if not doms else None)


def _eager_contiguous(program):
    """Ids of the values whose arrays eager (and the interpreter) hold C-contiguous: a
    column sum has NumPy's order only on those. Element strides are followed through the
    ops whose results' layout is known: program inputs are taken to be contiguous
    (tensors are made so); matmul, reductions, index_add (zeros(shape), then added
    into), scatter_add (x.copy(), then added into) and cat of C-order arrays make fresh
    C-order arrays; an elementwise result takes the layout of its
    full-shape operands (NumPy's order "K"), C order when they all have it; a permute
    permutes strides; a reshape is a view where NumPy can make one, else a C-order copy.
    `x[index array]` gathers rows into a fresh C-order array. Any other op may give a
    strided view."""
    layout = {v.id: _c_strides(v.shape) for v in list(program.inputs) + list(program.consts)}
    for ins in program.instrs:
        if not all(_static(v.shape) for v in ins.outputs):
            continue
        if ins.op == "fused" or fusible(ins):
            # every output has the loop shape (a row kernel's per-row ones are fresh too)
            loop = max((tuple(v.shape) for v in ins.outputs), key=math.prod)
            if all(layout.get(v.id) == _c_strides(v.shape) for v in ins.inputs if tuple(v.shape) == loop):
                layout.update((v.id, _c_strides(v.shape)) for v in ins.outputs)
            continue
        if len(ins.outputs) != 1 or not ins.inputs:
            continue
        out, src = ins.outputs[0], layout.get(ins.inputs[0].id)
        if ins.fn in (MatMul, IndexAdd, ScatterAdd) or (ins.fn in (Sum, P.SumTo, Amax) and src == _c_strides(ins.inputs[0].shape)):
            layout[out.id] = _c_strides(out.shape)
        elif ins.fn is GetItemCopy and len(ins.inputs) == 2 and len(ins.attrs["key"]) == 1 \
                and src == _c_strides(ins.inputs[0].shape):
            layout[out.id] = _c_strides(out.shape)   # x[index array]: a fresh array, rows gathered
        elif ins.fn is Cat and all(layout.get(v.id) == _c_strides(v.shape) for v in ins.inputs):
            layout[out.id] = _c_strides(out.shape)   # NumPy lays the result out as its inputs: C
        elif ins.fn is Permute and src is not None:
            layout[out.id] = tuple(src[d] for d in ins.attrs["dims"])
        elif ins.fn is Reshape and src is not None:
            layout[out.id] = _reshaped_strides(ins.inputs[0].shape, src, out.shape)
    shapes = {v.id: v.shape for v in list(program.inputs) + list(program.consts)}
    shapes.update((v.id, v.shape) for ins in program.instrs for v in ins.outputs)
    return {i for i, st in layout.items() if st == _c_strides(shapes[i])}


def _c_strides(shape):
    """Element strides of a C-contiguous array of `shape`, 0 for a dim of size 1 (whose
    stride NumPy never steps by, and sets freely)."""
    strides, acc = [], 1
    for n in reversed(tuple(shape)):
        strides.append(acc if n != 1 else 0)
        acc *= n
    return tuple(strides[::-1])


def _reshaped_strides(shape, strides, new):
    """Strides of NumPy's reshape of an array of `shape` and element `strides` to `new`:
    a view's where it can make one (asked of NumPy itself, on an array of that layout
    that reshape(copy=False) never reads), else C order (it copies)."""
    fake = np.lib.stride_tricks.as_strided(np.empty(1, np.uint8), tuple(shape), tuple(strides))
    try:
        view = np.reshape(fake, tuple(new), copy=False)
    except ValueError:
        return _c_strides(new)
    return tuple(s if n != 1 else 0 for s, n in zip(view.strides, new))


