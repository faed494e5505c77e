"""The backward program of a compiled call for results that received no gradient.

A compiled function's backward program (aot.py) takes one upstream gradient per
differentiable result. When the user's backward reaches only some results (`logits, loss =
fast(x, y); loss.backward()`), eager never computes the missing results' contributions at
all. Feeding zeros instead would not be the same: a zero contribution added to a -0.0
gradient makes it +0.0, and a zero times an inf saved value is a nan eager never sees.

So the missing gradients are taken out of the program: a value computed only from absent
gradients through ops linear in them (a product, a sum, a reshape, ...) is absent too; an
add or subtract of a present value and an absent one is the present value, exactly what
eager accumulates without that contribution; a gradient output that is absent is None (the
engine adds nothing, as eager). An absent value reaching any other op is a CaptureError
naming it, never a guess.
"""
from .capture import CaptureError
from .passes import finish, rewire

# ops whose output is absent (zero in every element, for every value of the other inputs)
# when any of the listed input positions is absent (None: any input)
_LINEAR = {
    "mul": None, "matmul": None, "neg": (0,), "div": (0,), "reshape": (0,), "permute": (0,),
    "expand": (0,), "sum": (0,), "sum_to": (0,), "transpose": (0,), "squeeze": (0,),
    "unsqueeze": (0,), "contiguous": (0,), "broadcast_to": (0,), "mean": (0,), "flip": (0,),
    "getitem": (0,),   # a selection of its input's elements (the index is no input: attr_inputs)
}


def without(program, absent_inputs, name=""):
    """(program, kept, out_map): `program` with the inputs at positions `absent_inputs`
    taken out; kept lists the positions of the inputs it still reads, out_map[j] is the
    new index of output j or None where that gradient is absent."""
    absent = {program.inputs[k].id for k in absent_inputs}
    canon = {}
    instrs = []
    for ins in program.instrs:
        ins = rewire(ins, canon)
        flags = [v.id in absent for v in ins.inputs]
        if not any(flags):
            instrs.append(ins)
            continue
        out = ins.outputs[0] if len(ins.outputs) == 1 else None
        linear = _LINEAR.get(ins.op, False)
        if out is not None and linear is not False and not ins.attr_inputs and (
                linear is None or any(flags[k] for k in linear if k < len(flags))):
            absent.add(out.id)
            continue
        if out is not None and ins.op in ("add", "sub") and len(ins.inputs) == 2:
            if all(flags):
                absent.add(out.id)      # both terms absent: so is the result
                continue
            k = flags.index(False)
            present = ins.inputs[k]
            if (ins.op == "add" or k == 0) and present.shape == out.shape \
                    and present.dtype == out.dtype:
                canon[out.id] = present   # what eager accumulates without the absent term
                continue
        if out is not None and ins.op in ("where", "cat", "index_add", "pad") and all(
                _zero(program, v, absent) for v in ins.inputs if v.dtype.is_floating_point):
            absent.add(out.id)          # every float input absent or a constant zero
            continue
        raise CaptureError(
            f"tt.compile: {name}: the backward reached some results but not others, and the "
            f"missing results' gradients meet op {ins.op!r} (shapes "
            f"{[tuple(v.shape) for v in ins.inputs]}) in a way the compiled backward cannot "
            "leave out exactly; return only the results the backward uses (detach the others), "
            "or differentiate every result")
    outputs = [canon.get(v.id, v) for v in program.outputs]
    out_map, kept_outputs = [], []
    for v in outputs:
        if v.id in absent:
            out_map.append(None)
        else:
            out_map.append(len(kept_outputs))
            kept_outputs.append(v)
    # instructions no kept output needs (the absent terms' producers) go
    live = {v.id for v in kept_outputs}
    needed = []
    for ins in reversed(instrs):
        if any(v.id in live for v in ins.outputs):
            needed.append(ins)
            live.update(v.id for v in ins.inputs)
    needed.reverse()
    kept = [k for k in range(len(program.inputs)) if k not in set(absent_inputs)]
    reduced = finish(program.replace(inputs=[program.inputs[k] for k in kept],
                                     outputs=kept_outputs), needed, {}).verify()
    return reduced, kept, out_map


def _zero(program, v, absent):
    if v.id in absent:
        return True
    a = program.consts.get(v) if v.kind == "const" else None
    return a is not None and not a.any()
