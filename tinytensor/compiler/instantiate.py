"""A program of symbolic sizes at one call's sizes: the same instructions and value ids,
with every shape and attribute evaluated (the interpreter, the memory plan and the
NumPy steps of the C runner work on numbers), made once per distinct sizes and kept."""
import collections
import dataclasses

from . import symbolic

KEEP = 16   # instantiations kept per program (a KV-cached generation makes one per length)


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

    return program.replace(inputs=[value(v) for v in program.inputs],
                           consts={value(v): a for v, a in program.consts.items()},
                           instrs=[instr(ins) for ins in program.instrs],
                           outputs=[value(v) for v in program.outputs])


class Instances:
    """make({symbol: size}) per distinct sizes, the last KEEP of them kept; called as
    instances(sizes, env) with `sizes` the values of env in a fixed order (the key)."""

    def __init__(self, make):
        self.make, self.cache = make, collections.OrderedDict()

    def __call__(self, sizes, env):
        got = self.cache.get(sizes)
        if got is None:
            got = self.cache[sizes] = self.make(env)
            if len(self.cache) > KEEP:
                self.cache.popitem(last=False)
        else:
            self.cache.move_to_end(sizes)
        return got
