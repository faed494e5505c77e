"""Algebraic simplification, only where the result is bitwise what the op computes:

    x * 1, 1 * x, x / 1, x - 0.0          -> x
    x + (-0.0), (-0.0) + x                -> x   (x + 0.0 is kept: -0.0 + 0.0 is +0.0)
    integer x + 0, x - 0                  -> x
    reshape(reshape(x)) -> one reshape;   reshape / expand to x's own shape -> x
    permute(permute(x)) -> one permute, or x when they cancel (transpose∘transpose)
    cast to x's own dtype                 -> x

A rule applies only when the output has x's shape and dtype (x * ones((4, 3)) with x of
shape (3,) broadcasts, int * 1.0 promotes: neither is x). The instructions made dead are
left for dce.
"""
import dataclasses

import numpy as np

from . import finish


def run(program):
    canon, made, instrs = {}, {}, []   # made: value id -> the (new) instruction defining it
    for ins in program.instrs:
        ins = dataclasses.replace(ins, inputs=[canon.get(v.id, v) for v in ins.inputs])
        same = _identity(program, ins)
        if same is not None:
            canon[ins.outputs[0].id] = same
            continue
        ins = _compose(ins, made)
        if ins.op in ("reshape", "permute") and ins.inputs[0].shape == ins.outputs[0].shape \
                and _is_identity_permute(ins):
            canon[ins.outputs[0].id] = ins.inputs[0]
            continue
        for o in ins.outputs:
            made[o.id] = ins
        instrs.append(ins)
    return finish(program, instrs, canon)


def _identity(program, ins):
    """The input this instruction merely passes through, or None."""
    out = ins.outputs[0] if len(ins.outputs) == 1 else None
    if out is None:
        return None
    op, ins_ = ins.op, ins.inputs
    if op in ("mul", "add") and len(ins_) == 2 and not ins.attrs:
        for x, c in ((ins_[0], ins_[1]), (ins_[1], ins_[0])):
            if _passes(x, out) and _neutral(program, c, op, x):
                return x
    elif op in ("div", "sub") and len(ins_) == 2 and not ins.attrs:
        if _passes(ins_[0], out) and _neutral(program, ins_[1], op, ins_[0]):
            return ins_[0]
    elif op in ("expand", "reshape") and _passes(ins_[0], out):
        return ins_[0]
    elif op == "cast" and _passes(ins_[0], out):
        return ins_[0]
    return None


def _passes(x, out):
    return tuple(x.shape) == tuple(out.shape) and x.dtype is out.dtype


def _neutral(program, c, op, x):
    """Whether constant c leaves x unchanged, bit for bit, under op."""
    a = program.consts.get(c) if c.kind == "const" else None
    if a is None or a.size == 0:
        return False
    if op in ("mul", "div"):
        return bool(np.all(a == 1))
    if not np.all(a == 0):
        return False
    if np.dtype(x.dtype.np).kind != "f":
        return True
    negative = np.signbit(a)
    return bool(np.all(negative)) if op == "add" else bool(not np.any(negative))


def _compose(ins, made):
    """reshape(reshape(x)) -> reshape(x); permute(permute(x)) -> permute(x)."""
    if ins.op not in ("reshape", "permute"):
        return ins
    src = made.get(ins.inputs[0].id)
    if src is None or src.op != ins.op:
        return ins
    if ins.op == "reshape":
        attrs = dict(ins.attrs, shape=tuple(ins.outputs[0].shape))
    else:
        inner, outer = src.attrs["dims"], ins.attrs["dims"]
        attrs = dict(ins.attrs, dims=tuple(inner[d] for d in outer))
    return dataclasses.replace(ins, inputs=[src.inputs[0]], attrs=attrs)


def _is_identity_permute(ins):
    if ins.op == "reshape":
        return True
    return tuple(ins.attrs["dims"]) == tuple(range(len(ins.attrs["dims"])))
