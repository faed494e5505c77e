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
around them. Before grouping, the ops whose rule says `lower` (softmax, log_softmax, layer
norm, RMS norm) are written as the ops of their `decompose` (passes/lower.py), the same
NumPy operations in the same order, so the interpreter still gives their bits and the
kernels fuse across them.

What may join a kernel is each op's rule (core/rules.py, the `compile_rule` beside its
Function): the dtypes it fuses for, whether it is worth a kernel alone, whether it is a
reduction a row kernel computes, whether it commutes; this module keeps no op lists.

After vertical grouping, sibling groups merge (`_merge_siblings`): elementwise groups of
one loop shape that read a common value of that shape from outside, with no path from one
to the other, become one kernel, one sweep over the shared input (GELU's forward and
backward both read x). Inside a kernel, each op whose rule says `in_kernel` (the GELUs) is
written as its `decompose` steps (the tanh GELU as the ops of its NumPy forward, the exact
one and its slope around one float64 cdf), and an (op, attributes, inputs) computed twice
is computed once (`_shared`), so siblings that compute the same expression share it (a
GELU and its slope: one tanh, one erfc); every output keeps its bits.

A value defined in a group and used outside it (or a program output) stays an output of
the kernel. 0-d constants move into the kernel body (codegen bakes them in as literals).

Sums over leading dims (the sum_to of a bias gradient) are compiled by a later pass,
passes/columns.py, that the C backend runs on the fused program.

A matmul is computed as eager computes it, operands and layout included: rewriting a
Linear's weight gradient (x.mT @ g).mT as g.mT @ x (a contiguous result) is a different BLAS
call, the same bits on some CPUs' kernels and not on others (OpenBLAS's Haswell kernels).

Not fused (yet): sums over leading dims with other kernels (they are columns.py's kernels,
of their own or after an elementwise kernel: not after a row kernel), prod/min/mean
as their own ops (mean is captured as sum * (1/n) already), matmul and movement ops other than `expand` stay separate
instructions; integer arithmetic stays on NumPy (C and NumPy differ on overflow
and division): integers are only compared, selected (where) and broadcast in kernels.
"""
import dataclasses
import heapq
import math
from typing import NamedTuple

import numpy as np

from ...core.rules import FLOAT, rule_of
from ...ops.linalg import MatMul
from ..ir import Instr, Program, nbytes
from ... import symbolic
from . import freeze, lower

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
    """Whether `ins` can be a member of a fused elementwise kernel (its rule's `fuses`)."""
    rule = rule_of(ins.fn)
    if not rule.fuses or len(ins.outputs) != 1:
        return False
    shape = ins.outputs[0].shape
    if not all(isinstance(d, int) for d in shape):
        return False  # a dim that is neither a number nor a SymInt formula
    if any(v.dtype.name not in rule.fuses for v in list(ins.inputs) + ins.outputs):
        return False
    return rule.fuses_if is None or bool(rule.fuses_if(ins.attrs))


class Domain(NamedTuple):
    """The loop of a kernel: its shape F, and for a row kernel the number r of leading dims
    it loops over (reducing F[r:]; None: an elementwise kernel). A column kernel's (columns.py)
    sums F[:r]."""
    shape: tuple
    rows: object


def _reduces(ins):
    return rule_of(ins.fn).reduce is not None


def _static(shape):
    return all(isinstance(d, int) for d in shape)


def row_reduction(ins):
    """(F, r) when `ins` is a float sum or max of a non-empty array of static shape F over
    its trailing dims F[r:] (keepdim or not), else None."""
    if not _reduces(ins) or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return None
    x, out = ins.inputs[0], ins.outputs[0]
    dims = tuple(ins.attrs.get("dims", ()))
    r = x.ndim - len(dims)
    if not dims or dims != tuple(range(r, x.ndim)) or not _static(x.shape) or math.prod(x.shape) == 0:
        return None
    if x.dtype.name not in FLOAT or out.dtype.name != x.dtype.name:
        return None
    return Domain(tuple(x.shape), r)


def row_shapes(F, r):
    """The shapes of per-row values of a row kernel over F reducing F[r:]: keepdim first."""
    return F[:r] + (1,) * (len(F) - r), F[:r]



@symbolic.with_formulas
def run(program):
    """`program` with its elementwise chains replaced by fused kernels."""
    program = lower.run(program)
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
        own = row_reduction(ins) or (Domain(tuple(ins.outputs[0].shape), None) if fusible(ins) else None)
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
        if _reduces(ins):
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
        if len(ms) == 1 and not rule_of(lone.fn).alone and not _big(lone.outputs[0]):
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
    body_instrs = _shared(_kernel_steps(body_instrs, consts), consts, {v.id for v in outs})
    body = Program(inputs=inputs, instrs=list(body_instrs), outputs=outs, consts=consts)
    first = body_instrs[0]
    return Instr(op="fused", fn=None, inputs=list(inputs), outputs=list(outs),
                 attrs={"body": body, "name": name}, scope=_common_scope(body_instrs), role=first.role)


def _kernel_name(body_instrs):
    names = [ins.op for ins in body_instrs]
    return "fused_" + "_".join(names[:6]) + (f"_and_{len(names) - 6}_more" if len(names) > 6 else "")


def _kernel_steps(body_instrs, consts):
    """`body_instrs` with each op whose rule says `in_kernel` written as its `decompose`
    steps (passes/lower.py), constants added to `consts`: the tanh GELU as the ops of its
    NumPy forward, so that a backward in the same kernel computing the same tanh shares it
    (`_shared`); the exact GELU and its slope as x and a float64 cdf(x) (ops/elementwise.py
    `GeluCdf`), which a kernel computing both of one x computes once."""
    out = []
    for ins in body_instrs:
        steps = lower.steps(ins, consts) if rule_of(ins.fn).in_kernel else None
        if steps is None and rule_of(ins.fn).in_kernel:
            raise AssertionError(f"fuse: {ins.op} of {[tuple(v.shape) for v in ins.inputs]} has no "
                                 "decomposition to put in a kernel (its rule says in_kernel)")
        out += steps if steps is not None else [ins]
    return out


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
        if rule_of(ins.fn).commutes and any(v in consts and not np.isnan(consts[v]).any() for v in inputs):
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
