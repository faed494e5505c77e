"""The typed records a capture hands the rest of the compiler (api.py, aot.py, choose.py,
kernels/c_eager.py): what each program input is bound to, and what a replay must do
besides running the program."""
import dataclasses
from typing import NamedTuple


class Binding(NamedTuple):
    """What program input k reads at each call. kind: "arg" (x: the i-th tensor argument),
    "slot" (x: a state object's path, state.py), "param" / "grad" (x: the tensor, or the
    parameter whose .grad), "arg_grad" (x: the Binding of the argument whose .grad),
    "call" (x: a function returning the array), "size" (x: (formula, NumPy dtype), a
    number of the call's sizes), "upstream" (x: k, the gradient of result k, aot.py)."""
    kind: str
    x: object


class Symbols(NamedTuple):
    """A capture of symbolic sizes (dynamic=True): the symbols and the sizes they were
    captured at, the guards a call's sizes must pass, and the (tensor number, dim) pairs
    found tied to a fixed size."""
    symbols: dict
    guards: object
    static: frozenset


@dataclasses.dataclass
class CaptureMeta:
    """What a replay needs besides the program (capture.py `capture` fills it)."""
    bindings: list        # Binding per program input, in order
    tree: object          # the result's structure, to rebuild it from the first n_results outputs
    n_results: int
    grads: list           # (param, output index or None to clear it) per .grad the step changed
    params: list          # the parameters, in input order
    before_call: list     # functions a replay calls first (an optimizer's step count)
    writes: list          # (output index, write) per assigned value, in order
    write_back: dict      # {output index: input index} where a write overwrites an input's array
    cleared: set          # ids of parameters whose entry .grad the step cleared before reading it
    slot_writes: list     # (output index or None to empty it, path) per state slot refilled
    entry_grads: dict     # id(leaf) -> the .grad it held on entry
    grad_args: list       # per entry of grads: the Binding of its argument, or None (a parameter)
    aot: object           # None, or the split of a differentiable step's program (aot.py)
    symbolic: Symbols = None   # dynamic=True only
