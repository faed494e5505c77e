"""What core, ops and nn may ask of a `tt.compile` capture in progress: the capture-hooks
protocol, with the answers that hold when nothing is being captured.

The compiler records a step by running it eagerly on a capture tape. A few places below it
must behave differently while it does: a value read into Python (`.item()`, a size taken
from the data) would be frozen into the program, an in-place write on a value of the step
would not be replayed, a size may be a formula (dynamic=True), an optimizer's update must
become ops the program repeats. Those places ask `STATE.hooks` (core/grad_mode.py), never
the compiler itself: core declares the questions here, and the compiler installs its
answers (`install`, called by compiler/hooks.py when it loads). `STATE.hooks` is the
compiler's answers while `STATE.capture` holds a capture tape, and `NO_CAPTURE` otherwise,
so no caller tests whether a capture is running before it asks.
"""
import contextlib


class CaptureHooks:
    """The protocol. Each method's eager answer is written here; the compiler overrides all
    of them (compiler/hooks.py)."""

    capturing = False   # a capture is recording this step
    symbolic = False    # ... and its sizes are formulas (tt.compile(dynamic=True))
    fn_name = None      # the name of the function being compiled

    # -------------------------------------------------------------- values
    def read_value(self, t, what):
        """`t`'s value is about to be read into Python (`what`: '.item()', 'nonzero', ...):
        refused under capture when it is a value of the step."""

    def traced(self, t):
        """Whether `t` is a value of the program (an argument, a parameter or buffer, a
        result of a recorded op), not a constant the program keeps as it is now."""
        return False

    def refuse_inplace(self, op, tensors):
        """An in-place op `op` is about to write: refused under capture where it involves a
        value of the step."""

    def refuse_complex(self, op, arrays):
        """An op reads or makes a complex array: refused under capture (the IR is real)."""

    def where(self, skip=()):
        """'file:line (`source`)' of the user's line that is running (for messages)."""
        return ""

    def fail(self, message):
        """Raise the capture's error with `message` (only called while capturing)."""
        raise RuntimeError(message)

    # -------------------------------------------------------------- sizes
    def is_size(self, value):
        """Whether `value` is a symbolic size (or a number computed from sizes) itself."""
        return False

    def holds_sizes(self, values):
        """Whether symbolic sizes are among `values` (nested in tuples, lists, dicts, slices)."""
        return False

    def shape_of(self, t):
        """t's shape, as formulas where the sizes are symbolic."""
        return t.data.shape

    def numbers(self, attrs):
        """An op's attributes with symbolic sizes replaced by the numbers they hold now."""
        return attrs

    def size_scalar(self, value, np_dtype, device):
        """A 0-d tensor of a number computed from symbolic sizes, recomputed at each call."""
        raise RuntimeError("size_scalar: no symbolic sizes outside tt.compile(dynamic=True)")

    def filled(self, fill, shape, dtype, device):
        """A tensor of `shape` (symbolic sizes) filled with `fill`, made by recorded ops."""
        raise RuntimeError("filled: no symbolic sizes outside tt.compile(dynamic=True)")

    # -------------------------------------------------------------- functional updates
    def input(self, fn, name=""):
        """A tensor around fn()'s array that a replay reads afresh at every call."""
        raise RuntimeError("input: only while capturing")

    def assign(self, new, write, target=None, into=None):
        """`write(new's array)`: now, and (under capture) after every replay; `target` is
        the tensor it updates in place, `into` the input whose array `write` overwrites."""
        write(new.data)

    def each_call(self, fn):
        """fn() before every replay reads its inputs (the caller has called it now)."""

    def recording_as(self, role):
        """A block whose recorded ops play `role` ('optimizer') in the program."""
        return contextlib.nullcontext()

    def owns_buffer(self, t):
        """Whether `t` is a buffer of a Module among the compiled function's arguments."""
        return False

    def optimizer_step(self, optimizer, where):
        """An optimizer's step() is being recorded: a second one in one step is refused."""

    def grad_cleared(self, p):
        """zero_grad() cleared p's .grad: the program no longer reads the old one."""


NO_CAPTURE = CaptureHooks()
_installed = []   # the compiler's factory: capture tape -> CaptureHooks


def install(factory):
    """The compiler gives its answers: `factory(tape)` is the hooks while `tape` records."""
    _installed[:] = [factory]


def for_capture(tape):
    """The hooks `STATE.hooks` holds while `tape` (or nothing: None) is capturing."""
    if tape is None:
        return NO_CAPTURE
    if not _installed:
        raise RuntimeError("a capture tape was set, but no compiler installed its capture hooks")
    return _installed[0](tape)
