"""Common-subexpression elimination: an instruction with the op, Function, attributes and
inputs of an earlier one is dropped and its outputs read the earlier one's. Small equal
constants (same dtype, shape and bytes, so -0.0 stays apart from 0.0) merge first, which
is what lets two `x * 2.0` meet."""
import dataclasses

from . import finish, freeze, is_random

_SMALL = 64  # elements: larger constants are compared by identity only


def run(program):
    canon, consts, by_bytes = {}, {}, {}
    for v, a in program.consts.items():
        if a.size <= _SMALL:
            key = (a.dtype.str, a.shape, a.tobytes())
            if key in by_bytes:
                canon[v.id] = by_bytes[key]
                continue
            by_bytes[key] = v
        consts[v] = a
    seen, instrs = {}, []
    for ins in program.instrs:
        inputs = [canon.get(v.id, v) for v in ins.inputs]
        key = None
        if ins.op != "fused" and not is_random(ins):
            key = (ins.op, ins.fn, freeze(ins.attrs), tuple(v.id for v in inputs))
            first = seen.get(key)
            if first is not None:
                for o, p in zip(ins.outputs, first.outputs):
                    canon[o.id] = p
                continue
        new = dataclasses.replace(ins, inputs=inputs)
        if key is not None:
            seen[key] = new
        instrs.append(new)
    return finish(program, instrs, canon, consts)
