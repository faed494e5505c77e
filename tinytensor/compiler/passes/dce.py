"""Dead-code elimination: keep an instruction only if an output reaches a program output
(or it is a random draw, whose place in the generator's stream later draws depend on)."""
from . import finish, is_random


def run(program):
    live = {v.id for v in program.outputs}
    kept = []
    for ins in reversed(program.instrs):
        if is_random(ins) or any(v.id in live for v in ins.outputs):
            kept.append(ins)
            live.update(v.id for v in ins.inputs)
    kept.reverse()
    return finish(program, kept, {})
