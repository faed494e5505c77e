"""Sums of zero-padded parts become one concatenation:

    index_add(a, key=[:, :, 0:256]) + index_add(b, key=[:, :, 256:512]) + index_add(c, [:, :, 512:768])
        -> cat([a + 0.0, b + 0.0, c + 0.0], dim=2)

Slicing one array into parts (attention's q/k/v split of the c_attn output) has, as its
backward, each part's gradient padded with zeros to the whole shape (index_add with a basic
key) and the pads added: per layer three whole-size zero fills, three copies and two
whole-size adds, where the parts side by side are the answer. The rule takes an `add` of
two pads (or of sums it already merged) whose parts are adjacent ranges of one dim, every
other dim whole, each read by that add alone; a merged sum becomes `cat` where the ranges
cover the dim, else one pad of the cat.

Bits: inside a part's range the sum computed part + 0.0 (another pad's zeros) at least once,
which turns -0.0 into +0.0 and keeps every other value, nan included; the rule adds +0.0 to
each part to give the same bits (the add fuses into the part's producer). Only float parts.
The instructions it leaves dead go to dce.
"""
from typing import NamedTuple

import numpy as np

from ...ops.elementwise import Add
from ...ops.indexing import IndexAdd
from ...ops.movement import Cat
from ..ir import Instr, Value
from . import finish

FLOAT = ("float16", "bfloat16", "float32", "float64")


class _Pad(NamedTuple):
    """A value that is zeros but for [start, stop) of dim, holding `parts` side by side."""
    dim: int
    start: int
    stop: int
    parts: list      # [(start, part Value)]
    shape: tuple
    dtype: object


def _pad(ins):
    """(dim, start, stop) of an index_add that pads its input along one dim, else None."""
    if ins.fn is not IndexAdd or ins.saved or ins.attr_inputs or len(ins.inputs) != 1 \
            or ins.attrs.get("advanced"):
        return None
    key, shape = ins.attrs.get("key"), tuple(ins.attrs.get("shape", ()))
    part, out = ins.inputs[0], ins.outputs[0]
    if type(key) is not tuple or len(key) > len(shape) or tuple(out.shape) != shape \
            or not all(type(k) is slice for k in key) or part.dtype.name not in FLOAT \
            or not all(isinstance(d, int) for d in shape) or part.dtype != out.dtype:
        return None
    cut = None
    for d, k in enumerate(key):
        start, stop, step = k.indices(shape[d])
        if (start, stop, step) == (0, shape[d], 1):
            continue
        if cut is not None or step != 1 or stop <= start:
            return None
        cut = (d, start, stop)
    if cut is None:
        return None
    d, start, stop = cut
    want = shape[:d] + (stop - start,) + shape[d + 1:]
    return cut if tuple(part.shape) == want else None


def run(program):
    uses = {}
    for ins in program.instrs:
        for v in ins.inputs:
            uses[v.id] = uses.get(v.id, 0) + 1
    for v in program.outputs:
        uses[v.id] = uses.get(v.id, 0) + 1
    pads = {}      # value id -> _Pad
    merged = {}    # add's output id -> the add, for sums made of pads
    absorbed = set()   # ids of pads and sums read only by a merging add
    for ins in program.instrs:
        cut = _pad(ins)
        if cut is not None:
            d, start, stop = cut
            out = ins.outputs[0]
            pads[out.id] = _Pad(d, start, stop, [(start, ins.inputs[0])], tuple(out.shape), out.dtype)
            continue
        if ins.fn is not Add or ins.attrs or len(ins.inputs) != 2:
            continue
        a, b = ins.inputs
        pa, pb = pads.get(a.id), pads.get(b.id)
        if pa is None or pb is None or a.id == b.id or uses.get(a.id) != 1 or uses.get(b.id) != 1:
            continue
        if (pa.dim, pa.shape, pa.dtype) != (pb.dim, pb.shape, pb.dtype) \
                or pa.shape != tuple(ins.outputs[0].shape):
            continue
        lo, hi = (pa, pb) if pa.start < pb.start else (pb, pa)
        if lo.stop != hi.start:     # not adjacent (or overlapping): not one range
            continue
        out = ins.outputs[0]
        pads[out.id] = _Pad(pa.dim, lo.start, hi.stop, lo.parts + hi.parts, pa.shape, pa.dtype)
        merged[out.id] = ins
        absorbed.update((a.id, b.id))
    if not merged:
        return program
    consts = dict(program.consts)
    instrs = []
    for ins in program.instrs:
        out = ins.outputs[0] if len(ins.outputs) == 1 else None
        if out is not None and out.id in absorbed:
            continue                 # a pad or a partial sum the root's cat replaces
        if out is None or out.id not in merged:
            instrs.append(ins)
            continue
        instrs += _materialize(pads[out.id], out, ins, consts)
    return finish(program.replace(consts=consts), instrs, {}, consts)


def _materialize(pad, out, add, consts):
    """The instructions computing the merged sum `out` (of the root `add`)."""
    d, start, stop, parts, shape, dtype = pad
    zero = Value((), dtype, kind="const")
    consts[zero] = np.asarray(0.0, dtype=dtype.np)
    made, pieces = [], []
    for _, part in sorted(parts, key=lambda p: p[0]):
        v = Value(tuple(part.shape), dtype)
        made.append(Instr(op=Add.name, fn=Add, inputs=[part, zero], outputs=[v],
                          scope=add.scope, role=add.role))
        pieces.append(v)
    whole = (start, stop) == (0, shape[d])
    joined = out if whole else Value(shape[:d] + (stop - start,) + shape[d + 1:], dtype)
    made.append(Instr(op=Cat.name, fn=Cat, inputs=pieces, outputs=[joined], attrs={"dim": d},
                      scope=add.scope, role=add.role))
    if not whole:
        key = (slice(None),) * d + (slice(start, stop),)
        made.append(Instr(op=IndexAdd.name, fn=IndexAdd, inputs=[joined], outputs=[out],
                          attrs={"key": key, "advanced": False, "shape": shape},
                          scope=add.scope, role=add.role))
    return made
