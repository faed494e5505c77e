"""The oracle: run an ir.Program with the ops' own forwards, on NumPy (or CuPy) arrays.

Each instruction calls `instr.fn.forward` on the arrays eager handed it, with a ctx that
saves nothing, so a captured program interpreted on the arrays of its capture repeats the
eager computation op for op: the results are bitwise those of the capture run. A "fused"
instruction runs the Program in its attrs["body"].
"""
import functools
import weakref

import numpy as np

from ..core.function import _Ctx
from ..device import array_context, device_of_array

# program -> per instruction: (compile_instr's step, input ids, output ids, ids dead after it)
_plans = weakref.WeakKeyDictionary()


def run(program, input_arrays):
    """The program's output arrays for `input_arrays` (one per program input, in order)."""
    if len(input_arrays) != len(program.inputs):
        raise ValueError(f"interpret.run: the program takes {len(program.inputs)} inputs, got "
                         f"{len(input_arrays)}")
    env = {v.id: a for v, a in zip(program.inputs, input_arrays)}
    for v, a in program.consts.items():
        env[v.id] = a
    plan = _plans.get(program)
    if plan is None:
        plan = _plans[program] = [
            (compile_instr(ins), [v.id for v in ins.inputs], [v.id for v in ins.outputs], gone)
            for ins, gone in zip(program.instrs, _dead_after(program))]
    for step, in_ids, out_ids, gone in plan:
        env.update(zip(out_ids, step([env[i] for i in in_ids])))
        for k in gone:  # free intermediates as soon as nothing reads them
            del env[k]
    return [env[v.id] for v in program.outputs]


def compile_instr(instr):
    """`run_instr(instr, arrays)` as a function of `arrays`, with what depends on the
    instruction alone decided once. The plain case (no attribute inputs, nothing saved, no
    0-d result, NumPy arrays) calls forward and nothing else: per instruction, run_instr's
    checks cost 0.5-1.4 us on top of forwards of a few us, in a step of ~100 instructions."""
    if instr.op == "fused" or instr.attr_inputs or instr.saved \
            or any(len(v.shape) == 0 for v in instr.outputs):
        return functools.partial(run_instr, instr)
    forward, attrs, ndarray = instr.fn.forward, instr.attrs, np.ndarray

    def step(arrays):
        if arrays and arrays[0].__class__ is not ndarray:  # CuPy's, or a subclass's
            return run_instr(instr, arrays)
        out = forward(_Ctx(), *arrays, **attrs)
        return list(out) if out.__class__ is tuple else [out]
    return step


def run_instr(instr, arrays):
    """The output arrays (a list) of one instruction applied to `arrays`."""
    if instr.op == "fused":
        return run(instr.attrs["body"], arrays)
    fn, attrs = instr.fn, instr.attrs
    if instr.attr_inputs:
        n = len(instr.attr_inputs)
        attrs = fill_attrs(attrs, instr.attr_inputs, arrays[-n:])
        arrays = arrays[:-n]
    ctx = _SavingCtx() if instr.saved else _Ctx()
    if arrays and not isinstance(arrays[0], np.ndarray):
        with array_context(device_of_array(arrays[0])):
            out = fn.forward(ctx, *arrays, **attrs)
    else:
        out = fn.forward(ctx, *arrays, **attrs)
    out = out if out.__class__ is tuple else (out,)
    if instr.saved:
        out = out + tuple(ctx.to_save[k] for k in instr.saved)
    # NumPy ufuncs return scalars for 0-d inputs; eager wraps them back into arrays too
    return [np.asarray(a) if isinstance(a, np.generic) else a for a in out]


def fill_attrs(attrs, paths, arrays):
    """attrs with arrays[i] placed at paths[i] (a key, then indices into nested tuples)."""
    attrs = dict(attrs)
    for path, a in zip(paths, arrays):
        attrs[path[0]] = _put(attrs[path[0]], path[1:], a)
    return attrs


def _put(obj, path, a):
    if not path:
        return a
    items = list(obj)
    items[path[0]] = _put(items[path[0]], path[1:], a)
    return type(obj)(items)


class _SavingCtx(_Ctx):
    to_save = ()

    def save_for_backward(self, *arrays):
        self.to_save = arrays


def _dead_after(program):
    """For each instruction, the ids of values read for the last time there (never the
    program's inputs, constants or outputs)."""
    keep = {v.id for v in program.outputs} | {v.id for v in program.inputs}
    keep |= {v.id for v in program.consts}
    last = {}
    for k, ins in enumerate(program.instrs):
        for v in ins.inputs:
            last[v.id] = k
        for v in ins.outputs:  # an output nobody reads dies where it is made
            last.setdefault(v.id, k)
    dead = [[] for _ in program.instrs]
    for vid, k in last.items():
        if vid not in keep:
            dead[k].append(vid)
    return dead
