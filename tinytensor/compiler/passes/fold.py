"""Constant folding: an instruction whose inputs are all 0-d constants, and whose outputs
hold one element each, is run now (by the interpreter, so bitwise as at run time) and its
outputs become constants. Parameters are inputs, never constants, so they are never folded;
a fold never bakes a large array (an expand of a scalar stays an op)."""
import dataclasses

from .. import ir
from ..interpret import run_instr
from . import finish, is_random


def run(program):
    consts = dict(program.consts)
    canon, instrs = {}, []
    for ins in program.instrs:
        inputs = [canon.get(v.id, v) for v in ins.inputs]
        if (inputs and not is_random(ins) and all(v in consts and v.ndim == 0 for v in inputs)
                and all(_numel(o.shape) == 1 for o in ins.outputs)):
            arrays = run_instr(ins, [consts[v] for v in inputs])
            for o, a in zip(ins.outputs, arrays):
                c = ir.Value(tuple(a.shape), o.dtype, kind="const", name=o.name)
                consts[c] = a
                canon[o.id] = c
            continue
        instrs.append(dataclasses.replace(ins, inputs=inputs))
    return finish(program, instrs, canon, consts)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
