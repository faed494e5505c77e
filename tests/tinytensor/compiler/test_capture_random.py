"""The capture's check that every random draw is a recorded op: a generator made during
the step (a device no argument or parameter lives on) replays from the state it was made
with, so a recorded dropout there is not mistaken for a draw the replay cannot see."""
import numpy as np

import tinytensor as tt
from tinytensor.compiler.capture import capture
from tinytensor.ops.random_ops import DropoutMask

_CPU = tt.device("cpu")


class _OtherDevice(type(_CPU)):
    """Stands in for a GPU without one: a device of its own for the generator registry
    (its type stays "cpu", so its generator draws with NumPy)."""

    def __hash__(self):
        return 12345

    def __eq__(self, other):
        return self is other


def _other_device():
    d = object.__new__(_OtherDevice)
    for k in getattr(type(_CPU), "__slots__", ()):
        object.__setattr__(d, k, getattr(_CPU, k))
    if hasattr(_CPU, "__dict__"):
        d.__dict__.update(_CPU.__dict__)
    return d


def test_a_recorded_draw_on_a_generator_made_during_the_step_is_not_refused():
    other = _other_device()

    def step(x):
        return x * DropoutMask.apply(shape=tuple(x.shape), dtype=x.dtype, device=other, p=0.5)
    x = tt.tensor(np.ones((4, 4), np.float32))
    tt.manual_seed(0)
    program, _, _ = capture(step, (x,))      # the generator of `other` is made mid-step
    assert any(getattr(ins.fn, "random", False) for ins in program.instrs)
    capture(step, (x,))                      # and, made already, the second time too
