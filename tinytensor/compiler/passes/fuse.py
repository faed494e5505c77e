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

A value defined in a group and used outside it (or a program output) stays an output of
the kernel. 0-d constants move into the kernel body (codegen bakes them in as literals).

Before grouping, a matmul whose only reader transposes its last two dims (a Linear's
weight gradient: (x.mT @ g).mT, back to the weight's (out, in) layout) is rewritten to
compute the transposed product directly, g.mT @ x: a contiguous result, where the
transposed view would cost the next kernel a strided copy. Every CBLAS computes a
row-major product as the column-major product of the swapped operands, so both forms are
the same BLAS call on the same memory: the same bits.

Not fused (yet): reductions over leading dims (sum_to of a bias gradient), prod/min/mean
as their own ops (mean is captured as sum * (1/n) already), matmul and movement ops other than `expand` stay separate
instructions; erf (and gelu with approximate="none") stays on NumPy until the C backend
has a vectorized erf; integer arithmetic stays on NumPy (C and NumPy differ on overflow
and division).
"""
import heapq
import math

import numpy as np

from ...core import primitives as P
from ...ops import elementwise as E
from ...ops.linalg import MatMul
from ...ops.movement import Permute
from ...ops.norms import LayerNormCore, RMSNormCore
from ...ops.reduce import Amax, Sum
from ...ops.softmax import LogSoftmax, Softmax
from ..ir import Instr, Program, Value, nbytes

FLOAT = ("float32", "float64")
BOOL = ("bool",)
FLOAT_OR_BOOL = FLOAT + BOOL

# Function class -> the dtypes (of inputs and output) it is fused for. Each one has a C
# emitter in codegen/c.py (test_fuse checks the two tables agree).
FUSIBLE = {
    E.Add: FLOAT, E.Sub: FLOAT, E.Mul: FLOAT, E.Div: FLOAT, E.Neg: FLOAT,
    E.Maximum: FLOAT, E.Minimum: FLOAT, E.Abs: FLOAT, E.Sqrt: FLOAT, E.Rsqrt: FLOAT,
    E.Exp: FLOAT, E.Log: FLOAT, E.Tanh: FLOAT, E.Sigmoid: FLOAT, E.Silu: FLOAT,
    E.Gelu: FLOAT, E.Relu: FLOAT, E.PowScalar: FLOAT, E.Clone: FLOAT_OR_BOOL,
    E.Where: FLOAT_OR_BOOL, P.Cast: FLOAT_OR_BOOL, P.Expand: FLOAT_OR_BOOL,
    E.LogicalAnd: FLOAT_OR_BOOL, E.LogicalOr: FLOAT_OR_BOOL, E.LogicalXor: FLOAT_OR_BOOL,
    E.LogicalNot: FLOAT_OR_BOOL, E.BitwiseAnd: BOOL, E.BitwiseOr: BOOL, E.BitwiseXor: BOOL,
    E.BitwiseNot: BOOL, E.Eq: FLOAT_OR_BOOL, E.Ne: FLOAT_OR_BOOL, E.Lt: FLOAT_OR_BOOL, E.Le: FLOAT_OR_BOOL, E.Gt: FLOAT_OR_BOOL, E.Ge: FLOAT_OR_BOOL,
}
# x ** p that NumPy computes exactly (x*x, sqrt, 1/x, x), so the kernel can match it bit for bit
EXACT_POWERS = (1, 2, 0.5, -1)
# ops that are several NumPy passes on their own: worth a kernel even when nothing fuses
COMPOSITE = (E.Gelu, E.Sigmoid, E.Silu, E.Rsqrt)


def fusible(ins):
    """Whether `ins` can be a member of a fused elementwise kernel."""
    dtypes = FUSIBLE.get(ins.fn)
    if dtypes is None or len(ins.outputs) != 1:
        return False
    shape = ins.outputs[0].shape
    if not all(isinstance(d, int) for d in shape):
        return False  # symbolic dims: the C backend specializes on static shapes
    if any(v.dtype.name not in dtypes for v in list(ins.inputs) + ins.outputs):
        return False
    if ins.fn is E.PowScalar and ins.attrs.get("exponent") not in EXACT_POWERS:
        return False
    if ins.fn is E.Gelu and ins.attrs.get("approximate") != "tanh":
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



def run(program):
    """`program` with its elementwise chains replaced by fused kernels."""
    program = lower_composites(transposed_products(program))
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
            merged = sorted(members[g] + (members[mine] if mine is not None else [k]))
            if dom is not None and _rows_ok(merged, instrs, dom) \
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

    return program.replace(instrs=_schedule(program, group, members, uses, outputs))


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
    if ins.fn is RMSNormCore:
        return [("q", E.Mul, ["x", "x"], {}), ("s", Sum, ["q"], keep), ("ms", E.Div, ["s", n], {}),
                ("a", E.Add, ["ms", eps], {}), ("rs", E.Rsqrt, ["a"], {}), ("y", E.Mul, ["x", "rs"], {})]
    return [("s", Sum, ["x"], keep), ("mu", E.Div, ["s", n], {}), ("xc", E.Sub, ["x", "mu"], {}),
            ("q", E.Mul, ["xc", "xc"], {}), ("s2", Sum, ["q"], keep), ("v", E.Div, ["s2", n], {}),
            ("a", E.Add, ["v", eps], {}), ("rs", E.Rsqrt, ["a"], {}), ("y", E.Mul, ["xc", "rs"], {})]


def _swaps_last_two(ins):
    dims = ins.attrs.get("dims", ()) if ins.fn is Permute else ()
    n = len(dims)
    return n >= 2 and tuple(dims) == tuple(range(n - 2)) + (n - 1, n - 2)


def transposed_products(program):
    """`program` with each `permute(a @ b)` that swaps the last two dims, where the product
    has no other reader, computed as `b.mT @ a.mT` (a transposed input that is itself a
    swap reads the swap's source instead)."""
    instrs = program.instrs
    uses, producer = {}, {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            uses.setdefault(v.id, []).append(k)
        for v in ins.outputs:
            producer[v.id] = ins
    outputs = {v.id for v in program.outputs}
    rewrite = {}   # index of the matmul -> index of the permute that reads it
    for k, ins in enumerate(instrs):
        if ins.fn is MatMul and len(ins.outputs) == 1 and ins.inputs[0].ndim >= 2 \
                and ins.inputs[1].ndim >= 2 and ins.outputs[0].id not in outputs:
            readers = uses.get(ins.outputs[0].id, [])
            if len(readers) == 1 and _swaps_last_two(instrs[readers[0]]):
                rewrite[k] = readers[0]
    if not rewrite:
        return program
    drop = set(rewrite.values())
    out = []
    for k, ins in enumerate(instrs):
        if k in drop:
            continue
        if k not in rewrite:
            out.append(ins)
            continue
        swap = instrs[rewrite[k]]
        operands = []
        for v in reversed(ins.inputs):
            src = producer.get(v.id)
            if src is not None and _swaps_last_two(src):
                operands.append(src.inputs[0])
                continue
            t = Value(v.shape[:-2] + (v.shape[-1], v.shape[-2]), v.dtype)
            dims = tuple(range(v.ndim - 2)) + (v.ndim - 1, v.ndim - 2)
            out.append(Instr(op="permute", fn=Permute, inputs=[v], outputs=[t],
                             attrs={"dims": dims}, scope=ins.scope, role=ins.role))
            operands.append(t)
        out.append(Instr(op=ins.op, fn=MatMul, inputs=operands, outputs=list(swap.outputs),
                         attrs=dict(ins.attrs), scope=ins.scope, role=ins.role))
    return program.replace(instrs=out)


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


def _acyclic(merged, users, group, members):
    """True unless a path leaves `merged` and comes back into it through other
    instructions, other groups counting as the one kernel each will be (contracting the
    group would then make a cycle). Grouping goes in schedule order and `merged` ends at
    the instruction being placed: what comes after it is in no group yet, and only reads
    later values, so a path through it never comes back."""
    inside, last = set(merged), merged[-1]
    seen, stack = set(), [u for m in merged for u in users[m] if u not in inside]
    while stack:
        k = stack.pop()
        if k in inside:
            return False
        if k in seen or k > last:
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
        if len(ms) == 1 and instrs[ms[0]].fn not in COMPOSITE:
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
    names = [ins.op for ins in body_instrs]
    name = "fused_" + "_".join(names[:6]) + (f"_and_{len(names) - 6}_more" if len(names) > 6 else "")
    body = Program(inputs=inputs, instrs=list(body_instrs), outputs=outs, consts=consts)
    first = body_instrs[0]
    return Instr(op="fused", fn=None, inputs=list(inputs), outputs=list(outs),
                 attrs={"body": body, "name": name}, scope=_common_scope(body_instrs), role=first.role)


def _common_scope(body_instrs):
    parts = [ins.scope.split(".") if ins.scope else [] for ins in body_instrs]
    common = []
    for level in zip(*parts):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return ".".join(common)
