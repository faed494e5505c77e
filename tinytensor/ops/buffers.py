"""Reading and updating a state tensor in place (batch norm's running statistics, its
num_batches_tracked) so that tt.compile replays the update instead of freezing it.

Eager: the new value (computed in ops under no_grad) is copied into the tensor's own array
and its version bumped, as torch's in-place update does. Under capture: the update is a
recorded assignment (`STATE.hooks.assign`, core/hooks.py): the program computes the new value at every
replay and writes it into the same array; the old value is read as a program input at
every call, never copied into the program as a constant. A buffer of a Module passed to
the compiled function is such an input already; one the function reaches otherwise (a
closure's model) is read afresh from its array at each call. A tensor passed as a plain
argument (or computed by the step) is refused by name when the op writes it (the write
would land in the first call's tensor); reading one (eval) is an ordinary input. Left as is:
a tensor made inside the step without an op (`tt.zeros(3)`) and updated there is read, like
a closure's buffer, from the first call's array.
"""
from ..core.grad_mode import STATE


def read(op, t, name, update=False):
    """`t` as the op should read it: itself eagerly, a per-call input under capture.
    update: the op will `write` t afterwards (refused for an argument or a step's result)."""
    hooks = STATE.hooks
    if not hooks.capturing or hooks.owns_buffer(t):   # eager, or a buffer of a Module among the arguments
        return t
    if not hooks.traced(t):                  # a closure's buffer: read its array at every call
        return hooks.input(lambda: t.data, name)
    if not update:                           # an argument read, not written: an input already
        return t
    hooks.fail(
        f"tt.compile: {hooks.fn_name}: {op} updates {name} (shape {tuple(t.shape)}) in place, and "
        f"that tensor is an argument or a result of the step (at {hooks.where()}); a replay "
        "would write into the first call's tensor. Keep running statistics in a Module's "
        "buffers (nn.BatchNorm2d) and pass the module, or update them outside")


def write(op, t, new, src):
    """t <- new, in place (new: a tensor of t's shape computed in ops, no graph; src: what
    `read` gave for t, the input a compiled runner may overwrite)."""
    def store(a):
        if a is not t.data:   # a compiled runner may have computed it in place already
            t.data[...] = a
        t._version[0] += 1    # as torch's in-place update bumps it

    STATE.hooks.assign(new.to(t.dtype), store, target=t, into=src)
