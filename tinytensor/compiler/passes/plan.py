"""Memory planning: where each intermediate buffer lives in one arena.

Liveness over the linear schedule: a buffer is live from the instruction that defines it
to its last reader (a view, such as a reshape or an expand, reads its base for as long as
the view itself is read, so it extends the base's lifetime and needs no buffer of its
own). Placement is largest-first best-fit, XLA's heap-simulator idea: buffers are taken
in decreasing size, and each goes into the smallest gap, among the buffers already placed
whose lifetimes overlap its own, that holds it (else above the highest of them).

Program inputs, parameters, constants and outputs are never placed in the arena: the
caller holds them, and handing arena memory to the caller would let the next call
overwrite a result it still reads.
"""
import dataclasses
import math

import numpy as np

from ... import symbolic

ALIGN = 64   # bytes: a cache line, and enough for any vector load


@dataclasses.dataclass
class Buffer:
    value: object        # the ir.Value
    size: int            # bytes, rounded up to ALIGN
    start: int           # index of the defining instruction
    end: int             # index of the last instruction that reads it (or a view of it)
    offset: int = -1


@dataclasses.dataclass
class MemoryPlan:
    buffers: list        # Buffer per planned intermediate, in schedule order
    peak: int            # arena bytes
    total: int           # bytes if every intermediate had memory of its own

    @property
    def offsets(self):
        return {b.value.id: b.offset for b in self.buffers}

    def summary(self):
        saved = 1 - self.peak / self.total if self.total else 0.0
        return (f"{len(self.buffers)} intermediate buffers: arena {_mb(self.peak)} planned peak "
                f"against {_mb(self.total)} without reuse ({saved:.0%} less)")


EMPTY = MemoryPlan([], 0, 0)   # a runner without an arena (sizes known only per call)


class AtSizes:
    """The memory plan of a program of symbolic sizes: made for each instance, when its sizes
    are numbers (instantiate.at runs `run` on it)."""

    def __repr__(self):
        return "AtSizes()"


AT_SIZES = AtSizes()


def _mb(n):
    return f"{n / 2 ** 20:.2f} MiB" if n >= 2 ** 20 else f"{n} bytes"


def nbytes(v):
    return math.prod(v.shape) * v.dtype.itemsize


def aliases(program):
    """{value id: ids of the values whose memory it may be part of}, for the values that
    share memory with others: views (of input 0) and arrays forward saved (any input)."""
    roots = {}
    for ins in program.instrs:
        own = len(ins.outputs) - len(ins.saved)
        for n, v in enumerate(ins.outputs):
            if n >= own or (n == 0 and getattr(ins.fn, "is_view", False) and ins.inputs):
                srcs = ins.inputs[:1] if n < own else ins.inputs
                roots[v.id] = tuple({r for s in srcs for r in roots.get(s.id, (s.id,))})
    return roots


def plan(program, placed=None):
    """The MemoryPlan of `program`'s intermediates (static shapes only): every instruction's
    outputs, or only those of the instructions `placed(instr)` accepts (what a runner
    actually writes into the arena)."""
    keep = {v.id for v in program.outputs} | {v.id for v in program.inputs}
    keep |= {v.id for v in program.consts}
    roots = aliases(program)
    buffers = {}

    def roots_of(vid):
        return roots.get(vid, (vid,))

    for k, ins in enumerate(program.instrs):
        for v in ins.inputs:
            for r in roots_of(v.id):
                if r in buffers:
                    buffers[r].end = k
        for v in ins.outputs:
            if v.id in roots:
                if any(r in keep for r in roots[v.id]):
                    keep.add(v.id)   # a view of a caller's tensor: not ours either
            elif v.id not in keep and (placed is None or placed(ins)):
                size = -(-nbytes(v) // ALIGN) * ALIGN
                buffers[v.id] = Buffer(v, size, k, k)
    # an output that is a view of an intermediate keeps that intermediate out of the arena
    for v in program.outputs:
        for r in roots_of(v.id):
            buffers.pop(r, None)
    placed = []
    for b in sorted(buffers.values(), key=lambda b: (-b.size, b.start)):
        live = sorted((p for p in placed if p.start <= b.end and b.start <= p.end),
                      key=lambda p: p.offset)
        best, best_gap, top = None, None, 0
        for p in live:
            gap = p.offset - top
            if gap >= b.size and (best_gap is None or gap < best_gap):
                best, best_gap = top, gap
            top = max(top, p.offset + p.size)
        b.offset = best if best is not None else top
        placed.append(b)
    peak = max((b.offset + b.size for b in placed), default=0)
    ordered = sorted(buffers.values(), key=lambda b: b.start)
    return MemoryPlan(ordered, peak, sum(b.size for b in ordered))


_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))


def has_into(ins):
    return ins.fn is not None and ins.fn.forward_into is not None


def placed_in_arena(ins):
    """Instructions whose outputs the C runner writes into arena slots (codegen/runner.py):
    fused kernels, ops with a `forward_into` and float matmuls (through np.matmul(out=))."""
    if ins.op == "fused":
        return True
    if has_into(ins):
        return not ins.saved and len(ins.outputs) == 1 and len(ins.outputs[0].shape) > 0
    return (ins.op == "matmul" and not ins.saved and not ins.attr_inputs and len(ins.inputs) == 2
            and all(v.ndim >= 2 for v in ins.inputs)
            and all(v.dtype.np == ins.outputs[0].dtype.np for v in ins.inputs)
            and ins.outputs[0].dtype.np in _FLOAT)


def run(program):
    """The last stage of the C backend's pipeline: `program` with its memory plan (the
    `memory` field) of what the runner places in its arena; a program of symbolic sizes
    gets AT_SIZES, and each instance its plan when instantiate.at makes it."""
    if any(symbolic.contains_symbolic(tuple(v.shape)) for v in program.defined()):
        return program.replace(memory=AT_SIZES)
    return program.replace(memory=plan(program, placed=placed_in_arena))


def planned(program, who):
    """`program`'s memory plan; an error naming `who` when the pipeline did not plan it."""
    memory = program.memory
    if not isinstance(memory, MemoryPlan):
        raise ValueError(f"{who}: the program has no memory plan ({memory!r}); codegen builds "
                         f"programs the pipeline lowered (compiler/pipeline.py `lower`)")
    return memory
