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
"""
import dataclasses

from ...core import primitives as P
from ...ops import elementwise as E
from ..ir import Value, nbytes
from . import finish, is_random

# one read of each input and one write: cheaper to redo than to keep (no reductions, no exp of a sum)
CHEAP = {E.Gelu, E.Relu, E.Silu, E.Sigmoid, E.Tanh, E.Add, E.Sub, E.Mul, E.Neg, E.Where, P.Cast}
MIN_BYTES = 64 * 1024   # below this the saved memory is not worth a pass over it



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
    return (ins.role == "forward" and ins.fn in CHEAP and len(ins.outputs) == 1 and not ins.saved
            and not ins.attr_inputs and not is_random(ins))


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
