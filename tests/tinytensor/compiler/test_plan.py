"""Memory planning: buffers live at once never overlap, memory is reused once a buffer
dies, and what the caller holds (inputs, parameters, outputs) is never in the arena."""
import itertools

import tinytensor as tt
from tinytensor.compiler import ir
from tinytensor.compiler.passes import plan
from tinytensor.core import primitives as P
from tinytensor.ops import elementwise as E
from tinytensor.ops import movement as M


def val(*shape, kind="value", name=""):
    return ir.Value(tuple(shape), tt.float32, kind=kind, name=name)


def op(fn, inputs, out):
    return ir.Instr(op=fn.name, fn=fn, inputs=list(inputs), outputs=[out])


def chain_program():
    """x -> a(4 KiB) -> b(8 KiB) -> c(4 KiB) -> d(1 KiB, output); a is also read by c."""
    x, w = val(1024, kind="input", name="x"), val(1024, kind="param", name="w")
    a, b, c, d = val(1024), val(2, 1024), val(1024), val(256)
    e = val(2, 1024)
    instrs = [op(E.Exp, [x], a),
              op(P.Expand, [a], e),                 # a view of a: no buffer, keeps a alive
              op(E.Mul, [e, x], b),
              op(E.Add, [a, w], c),
              op(E.Tanh, [b], val(2, 1024)),
              op(E.Neg, [c], d)]
    instrs[4].outputs[0].name = "t"
    t = instrs[4].outputs[0]
    instrs.append(op(E.Add, [t, t], val(2, 1024)))
    out = instrs[-1].outputs[0]
    return ir.Program(inputs=[x, w], instrs=instrs, outputs=[out, d]).verify()


def test_live_buffers_never_overlap_and_memory_is_reused():
    program = chain_program()
    p = plan.plan(program)
    named = {b.value.id: b for b in p.buffers}
    a, e, b, c, t = (program.instrs[k].outputs[0] for k in range(5))
    assert set(named) == {a.id, b.id, c.id, t.id}          # e is a view; outputs are not planned
    assert named[a.id].end == 3                             # read through the view until c
    for x, y in itertools.combinations(p.buffers, 2):
        if x.start <= y.end and y.start <= x.end:
            assert x.offset + x.size <= y.offset or y.offset + y.size <= x.offset, (x, y)
    assert p.total == 4096 + 8192 + 4096 + 8192
    # lifetimes a [0, 3], b [2, 4], c [3, 5], t [4, 6]: the most live at once is b + c + t
    # at the tanh (b is read where t is made); t reuses a's memory (and more)
    live = [sum(x.size for x in p.buffers if x.start <= k <= x.end) for k in range(7)]
    assert max(live) == 8192 + 4096 + 8192 == p.peak
    assert named[t.id].offset <= named[a.id].offset < named[t.id].offset + named[t.id].size
    assert p.peak < p.total and "planned peak" in p.summary()


def test_inputs_params_consts_outputs_and_views_of_them_are_not_in_the_arena():
    x = val(8, kind="input")
    k = val(8, kind="const")
    r, s = val(2, 4), val(2, 4)
    program = ir.Program(inputs=[x], instrs=[op(M.Reshape, [x], r), op(E.Mul, [r, r], s)],
                         outputs=[s], consts={k: None})
    program.instrs[0].attrs["shape"] = (2, 4)
    assert plan.plan(program).buffers == [] and plan.plan(program).peak == 0


def test_an_intermediate_read_by_an_output_view_is_not_planned():
    x = val(8, kind="input")
    a, r = val(8), val(2, 4)
    program = ir.Program(inputs=[x], instrs=[op(E.Exp, [x], a), op(M.Reshape, [a], r)], outputs=[r])
    assert plan.plan(program).buffers == []
