"""Passes: each module's `run(program) -> Program` returns a new program computing the
same outputs (checked by the interpreter in tests), never mutating its input.

    dce       drop instructions whose outputs reach no program output
    cse       one instruction for each (op, attributes, inputs); equal small constants merged
    fold      instructions on scalar constants only -> constants (never parameters)
    simplify  x*1, x/1, x-0, x+(-0.0), reshape∘reshape, permute∘permute, no-op
              reshape/permute/expand/cast
    pads      sums of zero-padded adjacent slices (the backward of splitting one array
              into parts: q/k/v) -> one cat
    remat     recompute cheap elementwise values (gelu, a norm's affine part) in the
              backward instead of keeping them from the forward (last: cse would undo it)
    lower     ops whose rule says `lower` (softmax, the norms) -> the ops of their
              recorded `decompose` (fuse runs it first)
    fuse      elementwise chains and row reductions -> one kernel each
    columns   sums over leading dims -> column kernels (the C backend's)
    plan      the arena the C runner lays intermediates in (the program's `memory`)

Which run, in which order, for which backend: compiler/pipeline.py, the one list.

Random ops (`Function.random`) are never dropped, merged or folded: each draw advances the
generator, and the replay must draw exactly what eager draws.
"""
import dataclasses

import numpy as np


def is_random(ins):
    if ins.op == "fused":
        return any(is_random(i) for i in ins.attrs["body"].instrs)
    return bool(getattr(ins.fn, "random", False))


def rewire(ins, canon):
    """`ins` reading canon[v.id] in place of each input v that was replaced."""
    if not any(v.id in canon for v in ins.inputs):
        return ins
    return dataclasses.replace(ins, inputs=[canon.get(v.id, v) for v in ins.inputs])


def finish(program, instrs, canon, consts=None):
    """The program with `instrs`, its outputs redirected through `canon`, unused
    constants dropped."""
    outputs = [canon.get(v.id, v) for v in program.outputs]
    used = {v.id for ins in instrs for v in ins.inputs} | {v.id for v in outputs}
    consts = program.consts if consts is None else consts
    return program.replace(instrs=instrs, outputs=outputs,
                           consts={v: a for v, a in consts.items() if v.id in used})


def freeze(x):
    """A hashable key for an attribute value; equal keys mean the op computes the same."""
    if isinstance(x, dict):
        return tuple(sorted((k, freeze(a)) for k, a in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(freeze(a) for a in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (bool, int, float, str, type(None), np.generic)):
        return (type(x).__name__, x)  # 1, 1.0 and True are equal keys in a dict, not here
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))
