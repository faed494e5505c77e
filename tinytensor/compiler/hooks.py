"""The compiler's answers to core's capture hooks (core/hooks.py): while a capture tape
records a step (`STATE.capture`, set by capture.py), `STATE.hooks` is a `CompilerHooks`
around it, and the ops, nn's optimizers and buffers ask it instead of the tape."""
from ..core import hooks as _hooks
from ..creation import full
from ..symbolic import SymFloat, SymInt, contains_symbolic
from . import capture as _capture


class CompilerHooks(_hooks.CaptureHooks):
    capturing = True

    def __init__(self, tape):
        self.tape = tape
        self.sym = tape.symbolic
        self.symbolic = tape.symbolic is not None
        self.fn_name = tape.fn_name

    # -------------------------------------------------------------- values
    def read_value(self, t, what):
        self.tape.read_value(t, what)

    def traced(self, t):
        return self.tape.traced(t)

    def refuse_inplace(self, op, tensors):
        self.tape.refuse_inplace(op, tensors)

    def refuse_complex(self, op, arrays):
        self.tape.refuse_complex(op, arrays)

    def where(self, skip=()):
        return _capture.user_frame(skip=skip)

    def fail(self, message):
        raise _capture.CaptureError(message)

    # -------------------------------------------------------------- sizes
    def is_size(self, value):
        return self.symbolic and isinstance(value, (SymInt, SymFloat))

    def holds_sizes(self, values):
        return self.symbolic and contains_symbolic(values)

    def shape_of(self, t):
        return self.sym.shape_of(t) if self.symbolic else t.data.shape

    def numbers(self, attrs):
        return self.sym.numbers(attrs) if self.symbolic else attrs

    def size_scalar(self, value, np_dtype, device):
        return self.tape.size_scalar(value, np_dtype, device)

    def filled(self, fill, shape, dtype, device):
        return full(tuple(shape), fill, dtype=dtype, device=device)

    # -------------------------------------------------------------- functional updates
    def input(self, fn, name=""):
        return self.tape.input(fn, name)

    def assign(self, new, write, target=None, into=None):
        self.tape.assign(new, write, target=target, into=into)

    def each_call(self, fn):
        self.tape.before_call.append(fn)

    def recording_as(self, role):
        return self.tape.recording_as(role)

    def owns_buffer(self, t):
        return id(t) in self.tape.labels

    def optimizer_step(self, optimizer, where):
        tape = self.tape
        if id(optimizer) in tape.stepped:
            # each step's state reads (step count, bias corrections) are inputs a replay
            # reads once, before the program: a second step would read the first one's
            raise _capture.CaptureError(
                f"tt.compile: {tape.fn_name} calls {type(optimizer).__name__}.step() a second "
                f"time at {where}; a compiled function can hold one step of each optimizer. "
                "Compile the function of one step and call it in a loop (or accumulate the "
                "gradients of several micro-batches, then step once)")
        tape.stepped.add(id(optimizer))

    def grad_cleared(self, p):
        self.tape.cleared.add(id(p))


_hooks.install(CompilerHooks)
