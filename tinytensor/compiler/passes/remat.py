"""Rematerialization: recompute a cheap elementwise value in the backward instead of
keeping it alive from the forward.

A GPT block's MLP shows the case: h = gelu(a) is read by the forward matmul and, much
later, by the backward's weight gradient (h^T @ g), while gelu's own backward keeps `a`
anyway. Keeping both a and h through the whole forward-backward gap costs one activation
per layer; recomputing h from a just before its first backward reader costs one more
elementwise pass. So: a forward instruction whose op is cheap and elementwise, whose
output is large and read in the backward, and whose inputs are alive at that backward
reader anyway (their lifetime does not grow), is cloned right before that reader, and the
backward reads the clone. The clone runs the same op on the same inputs: the same bits.

Runs last (after cse, which would merge the clone back); the memory plan and fusion see
the result, so the clone usually joins a backward kernel.

Cost model: a pass of arithmetic is cheap, a transcendental function (erf, exp, log, tanh,
sigmoid, pow...) is not: the exact GELU's erf is ~30x an add. So a value whose recompute
evaluates one is redone only where the backward evaluates the same function of the same
input anyway (`evaluations` gives the keys, from each op's rule `evaluates`): gelu(x), whose
slope op in the backward (gelu_erf_slope, gelu_tanh_slope: Gelu.backward records one)
computes erfc(-x/sqrt 2) or the tanh of its forward; silu(x), whose backward computes
sigmoid(x). In one kernel those are one evaluation (fuse._shared for the tanh GELU's steps,
the C compiler's common subexpressions for erfc and sigmoid), so remat adds no
transcendental work; `transcendentals(program)` counts it, and the tests hold the count.
"""
import dataclasses
import math

from ...core.rules import rule_of
from ..ir import Value, nbytes
from . import finish, freeze, is_random

MIN_BYTES = 64 * 1024   # below this the saved memory is not worth a pass over it
# What may be redone is each op's rule (core/rules.py): `cheap` (one read of each input and
# one write: no reductions, no exp of a sum) and `transcendental` (an exp, log, erf, tanh...
# per element of its output: arithmetic, compares, selects, sqrt and sums are not; the
# softmaxes' exp counts as the Exp ops fusion lowers them to).


def _transcendental(ins):
    t = rule_of(ins.fn).transcendental
    return bool(t(ins.attrs) if callable(t) else t)


def evaluations(ins):
    """The transcendental evaluations one element of `ins` makes, as keys: two instructions
    with a common key compute that function of the same input (one evaluation in a shared
    kernel)."""
    fn = ins.fn
    if not ins.inputs or not _transcendental(ins):
        return []
    x = ins.inputs[0].id
    shared = rule_of(fn).evaluates   # the functions of x it evaluates, named to be shared
    if shared is not None:
        return [(name, x) for name in (shared(ins.attrs) if callable(shared) else shared)]
    return [(fn, freeze(ins.attrs), tuple(v.id for v in ins.inputs))]


def transcendentals(program):
    """Transcendental function evaluations (elements times functions) one run of `program`
    makes: per kernel, each key of `evaluations` once; elsewhere, each instruction's."""
    total = 0
    for ins in program.instrs:
        body = ins.attrs["body"].instrs if ins.op == "fused" else [ins]
        keys = {}
        for i in body:
            for key in evaluations(i):
                keys.setdefault(key if ins.op == "fused" else (key, id(i)), math.prod(i.outputs[0].shape))
        total += sum(keys.values())
    return total



def _views(program, k, readers):
    """Indices of the forward view instructions (reshape, permute, ...) reading, directly
    or through each other, the output of instruction k: a backward that reads h through
    `h.reshape(...)` needs those redone too, and they cost nothing."""
    found, todo = [], [program.instrs[k].outputs[0].id]
    while todo:
        vid = todo.pop()
        for r in readers.get(vid, ()):
            ins = program.instrs[r]
            if ins.role == "forward" and getattr(ins.fn, "is_view", False) and r not in found:
                found.append(r)
                todo.append(ins.outputs[0].id)
    return sorted(found)


def _cheap(ins):
    return (ins.role == "forward" and rule_of(ins.fn).cheap and len(ins.outputs) == 1 and not ins.saved
            and not ins.attr_inputs and not is_random(ins))


def _partnered(program, redo, first):
    """Whether every transcendental evaluation of the instructions `redo` is one that a
    backward instruction from `first` on makes anyway (the same function of the same input)."""
    needed = {key for k in redo for key in evaluations(program.instrs[k])}
    if not needed:
        return True
    have = {key for ins in program.instrs[first:] if ins.role != "forward" for key in evaluations(ins)}
    return needed <= have


def candidates(program, depth=3, min_bytes=MIN_BYTES):
    """{index of an instruction whose value to recompute: (the indices of every instruction
    to redo for it, in order: cheap producers it needs, itself, its views; the index of
    the first backward instruction reading any of those values)}."""
    instrs = program.instrs
    readers, last, made = {}, {}, {}
    for k, ins in enumerate(instrs):
        for v in ins.inputs:
            readers.setdefault(v.id, []).append(k)
            last[v.id] = k
        for v in ins.outputs:
            made[v.id] = k
    held = {v.id for v in program.outputs} | {v.id for v in program.inputs}
    held |= {v.id for v in program.consts}
    chosen, redone = {}, set()

    def producers(k, first, level):
        """Instructions to redo so instruction k's inputs exist at `first`, or None."""
        need = []
        for x in instrs[k].inputs:
            if x.id in held or last.get(x.id, -1) >= first:
                continue  # alive there anyway
            j = made.get(x.id)
            if x.id in redone or j is None or level == depth or not _cheap(instrs[j]):
                return None
            more = producers(j, first, level + 1)
            if more is None:
                return None
            need += [i for i in more + [j] if i not in need]
        return need

    for k, ins in enumerate(instrs):
        if not _cheap(ins):
            continue
        v = ins.outputs[0]
        views = _views(program, k, readers)
        values = [v.id] + [instrs[j].outputs[0].id for j in views]
        if any(x in held for x in values) or nbytes(v) < min_bytes:
            continue
        reads = [r for x in values for r in readers.get(x, ()) if r not in views]
        backward = [r for r in reads if instrs[r].role != "forward"]
        if not backward:
            continue
        first = min(backward)
        if any(instrs[r].role == "forward" and r > first for r in reads):
            continue  # the forward still reads it after the backward started: nothing to drop
        need = producers(k, first, 1)
        if need is None:
            continue  # an input would have to live longer
        if not _partnered(program, need + [k], first):
            continue  # it would evaluate an erf, exp, tanh... that the backward does not
        chosen[k] = (sorted(need) + [k] + views, first)
        redone.update(values)
    return chosen


def run(program, min_bytes=MIN_BYTES):
    chosen = candidates(program, min_bytes=min_bytes)
    if not chosen:
        return program
    before = {}   # backward reader index -> instructions to redo right before it, in order
    for redo, first in chosen.values():
        batch = before.setdefault(first, [])
        batch += [k for k in redo if k not in batch]
    instrs = []
    swap = {}     # original value id -> its recomputed twin, for the backward readers
    for j, ins in enumerate(program.instrs):
        for k in sorted(before.get(j, ())):
            orig = program.instrs[k]
            v = orig.outputs[0]
            twin = Value(v.shape, v.dtype, name=v.name)
            instrs.append(dataclasses.replace(orig, outputs=[twin], role="backward",
                                              inputs=[swap.get(x.id, x) for x in orig.inputs]))
            swap[v.id] = twin
        if ins.role != "forward" and any(x.id in swap for x in ins.inputs):
            ins = dataclasses.replace(ins, inputs=[swap.get(x.id, x) for x in ins.inputs])
        instrs.append(ins)
    return finish(program, instrs, {})
