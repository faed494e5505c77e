"""Helpers shared by the compiler back-end tests: capture a function into a Program, run
it every way, and keep compiled objects in a per-session cache directory."""
import numpy as np

import tinytensor as tt
from tinytensor.compiler import interpret
from tinytensor.compiler.capture import capture


def program_of(fn, *arrays):
    """(Program, input arrays) of fn applied to tensors made from `arrays`."""
    tensors = [tt.tensor(a) for a in arrays]
    program, _, _ = capture(fn, tuple(tensors))
    return program.verify(), [t.data for t in tensors]


def eager(fn, *arrays):
    out = fn(*[tt.tensor(a) for a in arrays])
    return [t.data for t in (out if isinstance(out, tuple) else (out,))]


def interpreted(program, arrays):
    return interpret.run(program, arrays)


def bits(a):
    """An array's bit patterns, so that equality means bitwise equality (nan, -0.0)."""
    a = np.asarray(a)
    return a.view({1: np.uint8, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def fused_instrs(program):
    return [ins for ins in program.instrs if ins.op == "fused"]
