"""Vertical fusion of elementwise/broadcast chains, and of row reductions with their
producers and consumers, into kernels (`Instr(op="fused")`).

Greedy producer-consumer fusion over the schedule: each fusible instruction joins the
group of the producer whose fusion saves the most bytes of memory traffic (a saved read,
plus a saved write when the producer's value has no other use), and may pull other
producer groups in too, as long as the merged group stays free of cycles (no value
leaves the group and comes back into it through an instruction outside). A group is one
loop over its output shape, so every member must produce that shape; smaller inputs
(a bias row, a 0-d constant, an `expand` source) are read with broadcast indexing.

A group may also hold sums and maxima over trailing dims (`row_reduction`) of one shape F,
reducing its last dims: a row kernel. Its members are then ops of shape F, the reductions,
and ops on per-row values (the keepdim shape, or the rows' shape without the reduced
dims); an op of shape F may read a per-row value only in its keepdim form, which
broadcasts back over the row. So softmax (max, sub, exp, sum, div), layer norm and their
backwards (sums of g * y broadcast back) are one kernel each, with the elementwise ops
around them. Before grouping, the reference softmax, log_softmax, layer norm and RMS norm
ops (one Function each, as capture records them: their fused eager kernels are off) are
written as those primitive ops (`lower_composites`), the same NumPy operations in the same
order, so the interpreter still gives their bits and the kernels fuse across them.

After vertical grouping, sibling groups merge (`_merge_siblings`): elementwise groups of
one loop shape that read a common value of that shape from outside, with no path from one
to the other, become one kernel, one sweep over the shared input (GELU's forward and
backward both read x). Inside a kernel, each tanh GELU is written as the ops of its NumPy
forward, and an (op, attributes, inputs) computed twice is computed once (`_shared`), so
siblings that compute the same expression share it; every output keeps its bits.

A value defined in a group and used outside it (or a program output) stays an output of
the kernel. 0-d constants move into the kernel body (codegen bakes them in as literals).

Sums over leading dims (the sum_to of a bias gradient) are compiled by a later pass,
`columns`, that the C backend runs on the fused program (the CUDA backend has no column
kernels yet): each becomes a column kernel, appended to the elementwise kernel that makes
its input where there is one. NumPy adds the rows of a C-contiguous array in order, so
the kernel does too; on an array that eager may hold strided (`_eager_contiguous`) or a
single column (NumPy sums that pairwise), the sum stays NumPy's.

A matmul is computed as eager computes it, operands and layout included: rewriting a
Linear's weight gradient (x.mT @ g).mT as g.mT @ x (a contiguous result) is a different BLAS
call, the same bits on some CPUs' kernels and not on others (OpenBLAS's Haswell kernels).

Not fused (yet): sums over leading dims with other kernels (they are `columns`' kernels,
of their own or after an elementwise kernel: not after a row kernel), prod/min/mean
as their own ops (mean is captured as sum * (1/n) already), matmul and movement ops other than `expand` stay separate
instructions; integer arithmetic stays on NumPy (C and NumPy differ on overflow
and division): integers are only compared, selected (where) and broadcast in kernels.
"""
import dataclasses
import heapq
import math

import numpy as np

from ...core import primitives as P
from ...ops import elementwise as E
from ...ops.linalg import MatMul
from ...ops.indexing import GetItemCopy, IndexAdd, ScatterAdd
from ...ops.movement import Cat, Permute, Reshape
from ...ops.norms import LayerNormCore, RMSNormCore
from ...ops.reduce import Amax, Sum
from ...ops.softmax import LogSoftmax, Softmax
from ..ir import Instr, Program, Value, nbytes
from ... import symbolic
from . import freeze
from .gelu import GeluCdf, GeluErfSlope, GeluFromCdf, GeluSlopeFromCdf
from ...dtypes import float64

FLOAT = ("float32", "float64")
BOOL = ("bool",)
FLOAT_OR_BOOL = FLOAT + BOOL
# integers are only compared, selected and broadcast in a kernel: exact in C as in NumPy
# (their arithmetic stays NumPy's: C and NumPy differ on overflow and division)
INT = ("int64", "int32")
ANY = FLOAT_OR_BOOL + INT

# Function class -> the dtypes (of inputs and output) it is fused for. Each one has a C
# emitter in codegen/c.py (test_fuse checks the two tables agree).
FUSIBLE = {
    E.Add: FLOAT, E.Sub: FLOAT, E.Mul: FLOAT, E.Div: FLOAT, E.Neg: FLOAT,
    E.Maximum: FLOAT, E.Minimum: FLOAT, E.Abs: FLOAT, E.Sqrt: FLOAT, E.Rsqrt: FLOAT,
    E.Exp: FLOAT, E.Log: FLOAT, E.Tanh: FLOAT, E.Sigmoid: FLOAT, E.Silu: FLOAT,
    E.Gelu: FLOAT, E.Erf: FLOAT, GeluErfSlope: FLOAT, E.Relu: FLOAT, E.PowScalar: FLOAT, E.Clone: ANY,
    E.Where: ANY, P.Cast: FLOAT_OR_BOOL, P.Expand: ANY,
    E.LogicalAnd: FLOAT_OR_BOOL, E.LogicalOr: FLOAT_OR_BOOL, E.LogicalXor: FLOAT_OR_BOOL,
    E.LogicalNot: FLOAT_OR_BOOL, E.BitwiseAnd: BOOL, E.BitwiseOr: BOOL, E.BitwiseXor: BOOL,
    E.BitwiseNot: BOOL, E.Eq: ANY, E.Ne: ANY, E.Lt: ANY, E.Le: ANY, E.Gt: ANY, E.Ge: ANY,
}
# ops that only a kernel's body holds (`_gelu_steps` writes them): each has a C emitter too
KERNEL_ONLY = (GeluCdf, GeluFromCdf, GeluSlopeFromCdf)
# x ** p that NumPy computes exactly (x*x, sqrt, 1/x, x), so the kernel can match it bit for bit
EXACT_POWERS = (1, 2, 0.5, -1)
# ops that are several NumPy passes on their own: worth a kernel even when nothing fuses
COMPOSITE = (E.Gelu, E.Erf, GeluErfSlope, E.Sigmoid, E.Silu, E.Rsqrt)
# A lone cheap op whose result is at least this big is a kernel too: NumPy would give it a
# fresh array per call, and page faults on that much new memory cost more than the op
# (a bias add of (8, 128, 768) float32 before the q/k/v split: 0.7-1 ms in NumPy inside
# a training step, 0.2 ms as a kernel writing into the runner's arena).
LONE_BYTES = 1 << 20
# The most instructions one kernel holds. Past that a chain goes on in a new kernel (one
# more write and read of its array per MAX_OPS ops, ~1% of the work): the C compiler's
# time grows faster than linearly with a function's size (a 4,000-op chain in one kernel:
# 36 s of gcc, 20,000 ops: minutes and 700 MB), and the fusion's own checks walk a group's
# members, which is linear per step only while a group stays this small.
MAX_OPS = 256


def fusible(ins):
    """Whether `ins` can be a member of a fused elementwise kernel."""
    dtypes = FUSIBLE.get(ins.fn)
    if dtypes is None or len(ins.outputs) != 1:
        return False
    shape = ins.outputs[0].shape
    if not all(isinstance(d, int) for d in shape):
        return False  # a dim that is neither a number nor a SymInt formula
    if any(v.dtype.name not in dtypes for v in list(ins.inputs) + ins.outputs):
        return False
    if ins.fn is E.PowScalar and ins.attrs.get("exponent") not in EXACT_POWERS:
        return False
    if ins.fn is E.Gelu and ins.attrs.get("approximate") not in ("tanh", "none"):
        return False
    return True


# reductions a row kernel computes (codegen/c.py REDUCE has the code of each)
REDUCTIONS = (Sum, Amax)


def _static(shape):
    return all(isinstance(d, int) for d in shape)


def row_reduction(ins):
    """(F, r) when `ins` is a float sum or max of a non-empty array of static shape F over
    its trailing dims F[r:] (keepdim or not), else None."""
    if ins.fn not in REDUCTIONS or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return None
    x, out = ins.inputs[0], ins.outputs[0]
    dims = tuple(ins.attrs.get("dims", ()))
    r = x.ndim - len(dims)
    if not dims or dims != tuple(range(r, x.ndim)) or not _static(x.shape) or math.prod(x.shape) == 0:
        return None
    if x.dtype.name not in FLOAT or out.dtype.name != x.dtype.name:
        return None
    return tuple(x.shape), r


def row_shapes(F, r):
    """The shapes of per-row values of a row kernel over F reducing F[r:]: keepdim first."""
    return F[:r] + (1,) * (len(F) - r), F[:r]



@symbolic.with_formulas
def run(program):
    """`program` with its elementwise chains replaced by fused kernels."""
    program = lower_composites(program)
    instrs = program.instrs
    producer = {v.id: k for k, ins in enumerate(instrs) for v in ins.outputs}
    uses = {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            uses.setdefault(v.id, []).append(k)
    users = [sorted({u for v in ins.outputs for u in uses.get(v.id, ())}) for ins in instrs]
    outputs = {v.id for v in program.outputs}
    group = [None] * len(instrs)      # instruction index -> group id
    members = {}                      # group id -> sorted instruction indices
    domain = {}                       # group id -> (F, r): loop shape, row dims (None: no reduction)
    spans = _matmul_spans(instrs)

    for k, ins in enumerate(instrs):
        own = row_reduction(ins) or ((tuple(ins.outputs[0].shape), None) if fusible(ins) else None)
        if own is None:
            continue
        saving = {}
        for v in ins.inputs:
            p = producer.get(v.id)
            if p is None or group[p] is None or _joint(domain[group[p]], own) is None:
                continue
            once = len(uses[v.id]) == 1 and v.id not in outputs
            saving[group[p]] = saving.get(group[p], 0) + nbytes(v) * (2 if once else 1)
        mine = None
        for g in sorted(saving, key=lambda g: (-saving[g], g)):
            dom = _joint(domain[g], domain[mine] if mine is not None else own)
            size = len(members[g]) + (len(members[mine]) if mine is not None else 1)
            if dom is None or size > MAX_OPS:
                continue
            merged = sorted(members[g] + (members[mine] if mine is not None else [k]))
            if not spans(merged) and _rows_ok(merged, instrs, dom) \
                    and _acyclic(merged, users, group, members):
                for m in members.pop(g):
                    group[m] = mine if mine is not None else g
                if mine is None:
                    mine = g
                    group[k] = g
                else:
                    domain.pop(g)
                members[mine], domain[mine] = merged, dom
        if mine is None:
            group[k] = k
            members[k], domain[k] = [k], own
    _merge_siblings(instrs, group, members, domain, users, spans)

    return program.replace(instrs=_schedule(program, group, members, uses, outputs))


def _big(v):
    return _static(v.shape) and nbytes(v) >= LONE_BYTES


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
    return tuple(x.shape), r


@symbolic.with_formulas
def columns(program):
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
    if any(ins.fn in REDUCTIONS and column_sum(ins) is None for ins in body.instrs) or None in doms:
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


def lower_composites(program):
    """`program` with each reference softmax, log_softmax, layer norm and RMS norm over
    trailing dims written as the primitive ops its NumPy forward runs, in its order (so
    the results keep their bits): max, sub, exp, sum, div, log; sum, div by the count (as
    np.mean), mul, add eps, rsqrt."""
    consts = dict(program.consts)
    out, changed = [], False
    for ins in program.instrs:
        steps = _decomposition(ins)
        if steps is None:
            out.append(ins)
            continue
        changed = True
        x, y = ins.inputs[0], ins.outputs[0]
        env = {"x": x}
        for k, (name, fn, args, attrs) in enumerate(steps):
            srcs = []
            for a in args:
                if isinstance(a, str):
                    srcs.append(env[a])
                else:   # a number: a 0-d constant of x's dtype, as NumPy rounds a Python float
                    c = Value((), x.dtype, kind="const")
                    consts[c] = np.asarray(a, dtype=x.dtype.np)
                    srcs.append(c)
            if fn in REDUCTIONS:
                shape = row_shapes(tuple(x.shape), x.ndim - len(attrs["dims"]))[0]
            else:
                shape = tuple(x.shape) if any(s.shape == x.shape for s in srcs) else srcs[0].shape
            v = y if k == len(steps) - 1 else Value(shape, x.dtype)
            env[name] = v
            out.append(Instr(op=fn.name, fn=fn, inputs=srcs, outputs=[v], attrs=dict(attrs),
                             scope=ins.scope, role=ins.role))
    return program.replace(instrs=out, consts=consts) if changed else program


def _decomposition(ins):
    """[(name, Function, argument names or numbers, attrs)] computing `ins` (its input is
    "x", the last step its output), or None when it is not a lowered op on these shapes."""
    if ins.fn not in (Softmax, LogSoftmax, LayerNormCore, RMSNormCore) or ins.saved \
            or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return None
    x = ins.inputs[0]
    if x.dtype.name not in FLOAT or not _static(x.shape) or x.ndim == 0 or math.prod(x.shape) == 0:
        return None
    if ins.fn in (Softmax, LogSoftmax):
        if ins.attrs["dim"] != x.ndim - 1:
            return None
        keep = {"dims": (x.ndim - 1,), "keepdim": True}
        head = [("m", Amax, ["x"], keep), ("d", E.Sub, ["x", "m"], {}), ("e", E.Exp, ["d"], {}),
                ("s", Sum, ["e"], keep)]
        if ins.fn is Softmax:
            return head + [("y", E.Div, ["e", "s"], {})]
        return head + [("l", E.Log, ["s"], {}), ("y", E.Sub, ["d", "l"], {})]
    dims = tuple(ins.attrs["dims"])
    if dims != tuple(range(x.ndim - len(dims), x.ndim)):
        return None
    keep, n, eps = {"dims": dims, "keepdim": True}, math.prod(x.shape[x.ndim - len(dims):]), ins.attrs["eps"]
    if type(n) is not int:   # a norm over a dynamic size: its 1/n is no constant; stays one op
        return None
    if ins.fn is RMSNormCore:
        return [("q", E.Mul, ["x", "x"], {}), ("s", Sum, ["q"], keep), ("ms", E.Div, ["s", n], {}),
                ("a", E.Add, ["ms", eps], {}), ("rs", E.Rsqrt, ["a"], {}), ("y", E.Mul, ["x", "rs"], {})]
    return [("s", Sum, ["x"], keep), ("mu", E.Div, ["s", n], {}), ("xc", E.Sub, ["x", "mu"], {}),
            ("q", E.Mul, ["xc", "xc"], {}), ("s2", Sum, ["q"], keep), ("v", E.Div, ["s2", n], {}),
            ("a", E.Add, ["v", eps], {}), ("rs", E.Rsqrt, ["a"], {}), ("y", E.Mul, ["xc", "rs"], {})]




def _joint(a, b):
    """The domain of a group made of groups of domains a and b, or None if there is none:
    elementwise groups of one shape; row groups of one (F, r); an elementwise group joins a
    row group when its shape is F or a per-row shape."""
    if a[1] is None and b[1] is None:
        return a if a[0] == b[0] else None
    if a[1] is not None and b[1] is not None:
        return a if a == b else None
    rows, plain = (a, b) if a[1] is not None else (b, a)
    return rows if plain[0] == rows[0] or plain[0] in row_shapes(*rows) else None


def _rows_ok(merged, instrs, dom):
    """In a row group, every value an op reads from inside the group is indexed by the
    row: an op of shape F reads values of shape F or the keepdim row shape, an op on
    per-row values reads values of its own shape."""
    F, r = dom
    if r is None:
        return True
    keep = row_shapes(F, r)[0]
    made = {v.id: v for m in merged for v in instrs[m].outputs}
    for m in merged:
        ins = instrs[m]
        if ins.fn in REDUCTIONS:
            continue
        shape = tuple(ins.outputs[0].shape)
        allowed = (F, keep) if shape == F else (shape,)
        if any(v.id in made and tuple(v.shape) not in allowed for v in ins.inputs):
            return False
    return True


# The most matmuls a kernel's members may lie across (`_matmul_spans`): enough for a
# layer's backward (a Linear's input and weight gradients between a recomputed activation
# and the backward of its op, both reading one input), never a forward-to-backward gap.
SPANNED = 2


def _matmul_spans(instrs):
    """spans(members) -> whether more than SPANNED matmuls lie between the first and the
    last of `members` (sorted instruction indices). A kernel runs where its first member stood, so a group
    across a matmul would compute its later members before that matmul, and keep their
    results alive from there: a backward op joined to a forward kernel (a value that remat
    recomputes in the backward, fused back into the softmax of the forward) is stored
    through the whole forward-backward gap, the very memory remat saved."""
    before, n = [], 0    # before[k]: matmuls among instructions 0 .. k-1
    for ins in instrs:
        before.append(n)
        n += ins.fn is MatMul
    return lambda ms: before[ms[-1]] - before[ms[0] + 1] > SPANNED if len(ms) > 1 else False


def _merge_siblings(instrs, group, members, domain, users, spans=lambda ms: False):
    """Horizontal fusion: elementwise groups of one loop shape that read a common value of
    that shape from outside become one kernel with the outputs of both, when no path
    leads from one to the other (GELU's forward and its backward both read x: one sweep
    over x instead of two). Each member keeps its own operations, so every output keeps
    its bits."""
    readers = {}   # value id -> an instruction of each group reading it from outside
    made = {}      # group id -> ids of the values its members make (once per group: linear)
    for g, ms in members.items():
        if domain[g][1] is None:
            made[g] = {v.id for m in ms for v in instrs[m].outputs}
    for k, ins in enumerate(instrs):
        g = group[k]
        if g is None or domain[g][1] is not None:
            continue
        for v in ins.inputs:
            if v.id not in made[g] and tuple(v.shape) == domain[g][0]:
                seen = readers.setdefault(v.id, [])
                if all(group[r] != g for r in seen):
                    seen.append(k)
    # the last member of every group of several: past it no path comes back (`_acyclic`);
    # a merge only moves it to the merged group's last member
    last = max((ms[-1] for ms in members.values() if len(ms) > 1), default=-1)
    for ks in readers.values():
        bases = []
        for k in ks:
            h = group[k]
            for b in bases:
                g = group[b]
                if g == h or domain[g] != domain[h] or len(members[g]) + len(members[h]) > MAX_OPS:
                    continue
                merged = sorted(members[g] + members[h])
                if not spans(merged) and _acyclic(merged, users, group, members, max(last, merged[-1])):
                    for m in members.pop(h):
                        group[m] = g
                    domain.pop(h)
                    members[g] = merged
                    last = max(last, merged[-1])
                    break
            else:
                bases.append(k)


def _acyclic(merged, users, group, members, bound=None):
    """True unless a path leaves `merged` and comes back into it through other
    instructions, other groups counting as the one kernel each will be (contracting the
    group would then make a cycle). An instruction reads earlier values only, so a path
    can come back down the schedule only through a group of several members: past the
    last member of every such group and of `merged` (`bound`), it never comes back.
    During vertical grouping, which goes in schedule order, that is the last of `merged`
    (the instruction being placed), the default."""
    inside = set(merged)
    bound = merged[-1] if bound is None else bound
    seen, stack = set(), [u for m in merged for u in users[m] if u not in inside]
    while stack:
        k = stack.pop()
        if k in inside:
            return False
        if k in seen or k > bound:
            continue
        seen.add(k)
        stack.extend(users[k])
        g = group[k]
        if g is not None and g in members:
            stack.extend(members[g])
    return True


def _schedule(program, group, members, uses, outputs):
    """The instruction list with each group contracted to one fused Instr, topologically
    ordered, keeping the original order wherever the dependencies allow."""
    instrs = program.instrs
    nodes = {}   # first instruction index -> Instr (fused or original)
    for g, ms in members.items():
        lone = instrs[ms[0]]
        if len(ms) == 1 and lone.fn not in COMPOSITE and not _big(lone.outputs[0]):
            continue   # a lone cheap op gains nothing from a kernel of its own
        nodes[ms[0]] = _fused(program, [instrs[m] for m in ms], set(ms), uses, outputs)
    for k, ins in enumerate(instrs):
        g = group[k]
        if g is None or members[g][0] not in nodes:
            nodes[k] = ins
    producer = {v.id: k for k, ins in nodes.items() for v in ins.outputs}
    users = {k: set() for k in nodes}
    waiting = {}
    for k, ins in nodes.items():
        deps = {producer[v.id] for v in ins.inputs if v.id in producer} - {k}
        waiting[k] = len(deps)
        for d in deps:
            users[d].add(k)
    ready = [k for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(nodes[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        raise AssertionError("fuse: contracted program has a cycle (a bug in the cycle check)")
    return order


def _fused(program, body_instrs, indices, uses, outputs):
    defined = {v.id for ins in body_instrs for v in ins.outputs}
    consts = {}
    inputs, seen = [], set()
    for ins in body_instrs:
        for v in ins.inputs:
            if v.id in defined or v.id in seen:
                continue
            seen.add(v.id)
            if v in program.consts and math.prod(v.shape) == 1:
                consts[v] = program.consts[v]
            else:
                inputs.append(v)
    outs = [v for ins in body_instrs for v in ins.outputs
            if v.id in outputs or any(k not in indices for k in uses.get(v.id, ()))]
    name = _kernel_name(body_instrs)
    body_instrs = _shared(_gelu_steps(body_instrs, consts), consts, {v.id for v in outs})
    body = Program(inputs=inputs, instrs=list(body_instrs), outputs=outs, consts=consts)
    first = body_instrs[0]
    return Instr(op="fused", fn=None, inputs=list(inputs), outputs=list(outs),
                 attrs={"body": body, "name": name}, scope=_common_scope(body_instrs), role=first.role)


def _kernel_name(body_instrs):
    names = [ins.op for ins in body_instrs]
    return "fused_" + "_".join(names[:6]) + (f"_and_{len(names) - 6}_more" if len(names) > 6 else "")


def _gelu_steps(body_instrs, consts):
    """`body_instrs` with each tanh GELU written as the ops of its NumPy forward, in its
    order, 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x))), constants rounded to x's
    dtype as NumPy rounds a Python float: so that a backward in the same kernel computing
    the same tanh shares it (`_shared`). The exact GELU and its slope: see below."""
    out = []
    for ins in body_instrs:
        if ins.fn is GeluErfSlope or (ins.fn is E.Gelu and ins.attrs.get("approximate") == "none"):
            # the exact GELU and its slope as x cdf(x) and cdf(x) + x pdf(x), cdf a float64
            # (tt_math.h): a kernel computing both of one x shares the erfc (`_shared`)
            x = ins.inputs[0]
            cdf = Value(tuple(x.shape), float64)
            out.append(Instr(op=GeluCdf.name, fn=GeluCdf, inputs=[x], outputs=[cdf], attrs={},
                             scope=ins.scope, role=ins.role))
            fn = GeluSlopeFromCdf if ins.fn is GeluErfSlope else GeluFromCdf
            out.append(Instr(op=fn.name, fn=fn, inputs=[x, cdf], outputs=list(ins.outputs), attrs={},
                             scope=ins.scope, role=ins.role))
            continue
        if ins.fn is not E.Gelu:
            out.append(ins)
            continue
        x = ins.inputs[0]

        def op(fn, *args, to=None):
            srcs = []
            for a in args:
                if not isinstance(a, Value):
                    c = Value((), x.dtype, kind="const")
                    consts[c] = np.asarray(a, dtype=x.dtype.np)
                    a = c
                srcs.append(a)
            v = to or Value(tuple(x.shape), x.dtype)
            out.append(Instr(op=fn.name, fn=fn, inputs=srcs, outputs=[v], attrs={},
                             scope=ins.scope, role=ins.role))
            return v
        cube = op(E.Mul, op(E.Mul, op(E.Mul, 0.044715, x), x), x)
        t = op(E.Tanh, op(E.Mul, E._SQRT_2_OVER_PI, op(E.Add, x, cube)))
        op(E.Mul, op(E.Mul, 0.5, x), op(E.Add, 1.0, t), to=ins.outputs[0])
    return out


COMMUTATIVE = (E.Add, E.Mul)


def _shared(body_instrs, consts, kept):
    """`body_instrs` computing each (op, attributes, inputs) once, constants compared by
    dtype, shape and bytes; a duplicate whose value leaves the kernel (in `kept`) stays.
    `c * x` and `x * c` (and +) are one computation for a constant c that is not nan:
    IEEE + and * commute bit for bit, but for which nan's payload comes out."""
    canon, by_bytes, seen, out = {}, {}, {}, []
    for v, a in consts.items():
        canon[v.id] = by_bytes.setdefault((a.dtype.str, a.shape, a.tobytes()), v)
    const_ids = {c.id for c in consts}
    for ins in body_instrs:
        inputs = [canon.get(v.id, v) for v in ins.inputs]
        ids = [v.id for v in inputs]
        if ins.fn in COMMUTATIVE and any(v in consts and not np.isnan(consts[v]).any() for v in inputs):
            ids.sort(key=lambda i: i in const_ids)   # the constant last
        key = (ins.fn, freeze(ins.attrs), tuple(ids))
        first = seen.get(key)
        if first is not None and ins.outputs[0].id not in kept:
            canon[ins.outputs[0].id] = first
            continue
        seen.setdefault(key, ins.outputs[0])
        out.append(dataclasses.replace(ins, inputs=inputs))
    used = {v.id for ins in out for v in ins.inputs}
    for v in [v for v in consts if v.id not in used]:
        del consts[v]
    return out


def _common_scope(body_instrs):
    parts = [ins.scope.split(".") if ins.scope else [] for ins in body_instrs]
    common = []
    for level in zip(*parts):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return ".".join(common)
