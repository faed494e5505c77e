"""A program of symbolic sizes at one call's sizes: the same instructions and value ids,
with every shape and attribute evaluated (the interpreter, the memory plan and the
NumPy steps of the C runner work on numbers), made once per distinct sizes and kept."""
import collections
import dataclasses

from .. import symbolic
from .passes import plan

KEEP = 4     # instances kept per program (each has its arena)
STREAK = 3   # calls in a row at one size that earn it an instance


def at(program, env):
    """`program` with the sizes `env` ({symbol: int}) put in."""
    values = {}

    def value(v):
        new = values.get(v.id)
        if new is None:
            new = values[v.id] = dataclasses.replace(v, shape=tuple(int(symbolic.evaluate(d, env))
                                                                    for d in v.shape))
        return new

    def instr(ins):
        attrs = ins.attrs
        if ins.op == "fused":
            attrs = dict(attrs, body=at(attrs["body"], env))
        elif symbolic.contains_symbolic(attrs):
            attrs = symbolic.evaluate(attrs, env)
        return dataclasses.replace(ins, inputs=[value(v) for v in ins.inputs],
                                   outputs=[value(v) for v in ins.outputs], attrs=attrs)

    out = program.replace(inputs=[value(v) for v in program.inputs],
                          consts={value(v): a for v, a in program.consts.items()},
                          instrs=[instr(ins) for ins in program.instrs],
                          outputs=[value(v) for v in program.outputs])
    # a planned program is planned at these sizes too (the plan is the pipeline's last stage)
    return plan.run(out) if program.memory is not None else out


def captured(program):
    """`program` at the sizes it was captured with (a program without symbols as it is):
    what explain's tables measure. Every symbol is a whole dim of some input."""
    env = {symbolic.bare_symbol(d): int(d) for v in program.inputs for d in v.shape
           if symbolic.bare_symbol(d) is not None}
    return at(program, env) if env else program


class Instances:
    """The runner for each call's sizes, called as instances(sizes, env) with `sizes` the
    values of env in a fixed order (the key).

    `generic` (a runner taking (inputs, env), shapes evaluated per call, no arena) runs most
    calls; sizes that come STREAK times in a row (a training loop at one batch shape) get an
    instance of their own, make(env): the program at those sizes with its memory plan and
    arena, a few per cent faster per call. Making one costs about a replay of a small
    program, so KV-cached decoding, where every token is a new cache length, never pays it;
    only the last KEEP instances are kept (an arena each)."""

    def __init__(self, make, generic=None):
        self.make, self.generic = make, generic
        self.cache = collections.OrderedDict()
        self.last, self.streak = None, 0

    def __call__(self, sizes, env):
        got = self.cache.get(sizes)
        if got is not None:
            self.cache.move_to_end(sizes)
            return got
        self.streak = self.streak + 1 if sizes == self.last else 1
        self.last = sizes
        if self.generic is not None and self.streak < STREAK:
            generic = self.generic
            return lambda inputs: generic(inputs, env)
        got = self.cache[sizes] = self.make(env)
        if len(self.cache) > KEEP:
            self.cache.popitem(last=False)
        return got
