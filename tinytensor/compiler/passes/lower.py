"""Lowering: an op that says how it is made of simpler ops (its `decompose`, written in
tinytensor ops beside its forward, core/rules.py) is replaced by those ops.

The decomposition is not re-derived here: it is recorded. `decompose` runs once per (op,
dtype, rank, attributes) on a small sample under `capture` with symbolic sizes (the
tape-to-IR builder every compiled step goes through, compiler/capture.py), and the
recorded program, put at each instruction's sizes, takes the instruction's place. So what
a kernel computes for softmax is, op for op, what `Softmax.decompose` says, and the tests
hold `decompose` to the op's NumPy forward bit for bit (tests/tinytensor/test_decompose.py).

`run` lowers the ops whose rule says `lower` (softmax, log_softmax, layer norm, RMS norm:
one Function each on the tape, their fused eager kernels being off while capturing), where
every reduction among the steps is one a row kernel computes (trailing dims of a static,
non-empty float array): the steps then fuse into one row kernel with the ops around them.
Elsewhere (a softmax over dim 0, a norm whose 1/n is a dynamic size) the op stays one
instruction, run by its own forward. `steps` also serves fusion, which writes an op whose
rule says `in_kernel` (the GELUs) as its steps inside a kernel only.
"""
import contextlib
import dataclasses
import math

import numpy as np

from ...core.grad_mode import STATE
from ...core.rules import FLOAT, rule_of
from ...core.tensor import Tensor
from ...device import CPU
from ... import symbolic
from ..capture import capture
from ..ir import Instr, Value
from . import freeze

# sample sizes of the recording, one per dim: distinct primes, so no two dims share a symbol
# (and none is 1, which would broadcast)
_PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59)
_templates = {}   # (fn, dtype name, rank, attrs key) -> _Template, or None (no decomposition)


@dataclasses.dataclass(frozen=True)
class _Template:
    """A recorded decomposition: its program over the symbols of the sample's dims."""
    program: object     # ir.Program: one input (the op's x), one output
    dims: dict          # symbol name -> the dim of x it stands for
    sizes: tuple        # (input index, value, NumPy dtype) of each number computed from sizes
    guards: object      # symbolic.Guards: the comparisons of sizes the recording made


def run(program):
    """`program` with each `lower` op written as its decomposition's ops (module docstring)."""
    consts = dict(program.consts)
    out, changed = [], False
    for ins in program.instrs:
        lowered = rule_of(ins.fn).lower and ins.inputs and ins.inputs[0].ndim > 0 \
            and math.prod(ins.inputs[0].shape) != 0   # a row kernel has rows, of elements
        new = steps(ins, consts) if lowered else None
        if new is None or not all(_row_kernel_reduction(i) for i in new if rule_of(i.fn).reduce):
            out.append(ins)
            continue
        changed = True
        out += new
    return program.replace(instrs=out, consts=consts) if changed else program


def _row_kernel_reduction(ins):
    """Whether a reduction among the steps reduces trailing dims of its input."""
    x = ins.inputs[0]
    dims = tuple(ins.attrs.get("dims", ()))
    return bool(dims) and dims == tuple(range(x.ndim - len(dims), x.ndim))


def steps(ins, consts):
    """The instructions computing `ins` by its op's `decompose` at its sizes (the last one
    writing its output; constants added to `consts`), or None: no decomposition, or not on
    these operands (one float input of a static shape, no side outputs)."""
    decompose = getattr(ins.fn, "decompose", None)
    if decompose is None or ins.saved or ins.attr_inputs or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return None
    x, y = ins.inputs[0], ins.outputs[0]
    if x.dtype.name not in FLOAT or x.ndim > len(_PRIMES) \
            or not all(isinstance(d, int) for d in x.shape):
        return None
    key = (ins.fn, x.dtype.name, x.ndim, freeze(ins.attrs))
    if key not in _templates:
        _templates[key] = _record(ins.fn, x.dtype, x.ndim, ins.attrs)
    template = _templates[key]
    if template is None:
        return None
    env = {name: x.shape[d] for name, d in template.dims.items()}
    if not template.guards.hold(symbolic.numbers(env)):   # (amax: "the dim is not empty")
        return None
    body = template.program
    values = {body.inputs[0].id: x, body.outputs[0].id: y}
    for k, value, np_dtype in template.sizes:
        n = symbolic.evaluate(value, env)
        if isinstance(n, (symbolic.SymInt, symbolic.SymFloat)):
            return None   # a number of dynamic sizes (a norm's 1/n): no constant
        c = Value((), body.inputs[k].dtype, kind="const")
        consts[c] = np.asarray(n, dtype=np_dtype)
        values[body.inputs[k].id] = c
    if len(values) != len(body.inputs) + 1:
        return None
    for v, a in body.consts.items():
        c = Value(tuple(v.shape), v.dtype, kind="const")
        consts[c] = a
        values[v.id] = c

    def value(v):
        new = values.get(v.id)
        if new is None:
            new = values[v.id] = Value(tuple(symbolic.evaluate(d, env) for d in v.shape), v.dtype)
        return new

    out = []
    for i in body.instrs:
        attrs = symbolic.evaluate(i.attrs, env) if symbolic.contains_symbolic(i.attrs) else dict(i.attrs)
        out.append(Instr(op=i.op, fn=i.fn, inputs=[value(v) for v in i.inputs],
                         outputs=[value(v) for v in i.outputs], attrs=attrs,
                         scope=ins.scope, role=ins.role))
    if tuple(out[-1].outputs[0].shape) != tuple(y.shape) or out[-1].outputs[0] is not y:
        return None
    return out


def _record(fn, dtype, ndim, attrs):
    """`fn.decompose` recorded on a sample of `ndim` distinct prime sizes, or None when it
    does not record as one program of those sizes (a size read as a number, another input)."""
    shape = _PRIMES[:ndim]
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype.np)
    sample = Tensor._make(a, CPU, False)
    with _apart(), np.errstate(all="ignore"):   # the sample's values do not matter
        program, _, meta = capture(lambda t: fn.decompose(t, **attrs), (sample,),
                                   name=f"{fn.name}.decompose", dynamic=True)
    sym = meta.symbolic
    if sym.static or len(program.outputs) != 1:
        return None
    dims = {}
    for name, size in sym.symbols.items():
        if size not in shape:
            return None
        dims[name] = shape.index(size)
    sizes = []
    for k, (kind, x) in enumerate(meta.bindings):
        if kind == "size":
            sizes.append((k, x[0], x[1]))
        elif (kind, x) != ("arg", 0):
            return None
    if program.inputs[0] in program.outputs or not program.instrs:
        return None
    return _Template(program, dims, tuple(sizes), sym.guards)


@contextlib.contextmanager
def _apart():
    """A recording of its own: not on an outer capture's tape (a pass may run while
    kernels/c_eager.py builds a kernel inside tt.compile's capture), with no outer guards,
    and with SymInts comparing as numbers, as in any capture (a pass runs in formulas())."""
    outer = STATE.capture, STATE.tapes, list(symbolic._active), symbolic._formulas[0]
    STATE.capture, STATE.tapes = None, []
    symbolic._active.clear()
    symbolic._formulas[0] = 0
    try:
        yield
    finally:
        STATE.capture, STATE.tapes = outer[:2]
        symbolic._active[:] = outer[2]
        symbolic._formulas[0] = outer[3]
