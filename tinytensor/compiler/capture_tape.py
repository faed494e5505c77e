"""The capture tape: a record() tape that also notes what a replay must repeat or refuse
(first versions, entry .grads, an optimizer's inputs and assignments, sizes read as
numbers) and gives up the arrays of results nothing but itself still holds."""
import contextlib
import weakref
from sys import getrefcount

import numpy as np

from ..core.node import Tape
from ..core.tensor import Tensor
from ..device import CPU, device_of_array
from .. import symbolic
from .errors import LIBRARY_DIRS, CaptureError, shape_label, user_frame


# a capture looks for arrays to release (CaptureTape._release) after this many new results,
# or sooner once they hold this many bytes
RELEASE_BATCH = 64
RELEASE_BYTES = 8 << 20


def _held_by_tape():
    """getrefcount of a recorded result, as `CaptureTape._release` reads it, that only the
    tape holds: its results list, `_live`, `first_version`, the loop's name and
    getrefcount's own argument. Measured on the very structures, not assumed: a count too
    high would release a tensor the step still holds."""
    t = Tensor._make(np.empty(0), CPU, False)
    outputs, live, first = [[t]], [t], {id(t): (t, 0)}  # noqa: F841  (held: their references count)
    del t
    for t in live:
        return getrefcount(t)


_HELD_BY_TAPE = _held_by_tape()


class _Released:
    """A released result's `.data`: its shape and dtype, which building the program reads,
    and no memory. Any other use is an error, never a value: a tensor the step reaches
    only through a weak reference (which the tape's own reference keeps alive, where eager
    would have let it die), or a bug of the release."""
    __slots__ = ("shape", "dtype", "ndim", "size")

    def __init__(self, a):
        self.shape, self.dtype, self.ndim, self.size = a.shape, a.dtype, a.ndim, a.size

    def __array__(self, *args, **kwargs):
        raise CaptureError(
            "tt.compile: the step read a tensor whose array the capture had released, as "
            "nothing but the recording held it: a tensor reached only through a weak "
            "reference (weakref.ref, a WeakValueDictionary) cannot be read back inside a "
            "compiled function; hold it with a normal reference, or compute it again")

    def __array_ufunc__(self, *args, **kwargs):
        self.__array__()

    def __array_function__(self, *args, **kwargs):
        self.__array__()

    def __getattr__(self, name):
        self.__array__()


class CaptureTape(Tape):
    """A tape that also notes each tensor's version when the step first touched it (an
    in-place update after that would make the replay read a value eager never used)."""

    def __init__(self, fn_name, known):
        super().__init__()
        self.fn_name = fn_name
        self.known = known          # ids of the arguments and parameters: traced values
        self.first_version = {}     # id(tensor) -> (tensor, version)
        self.entry_grads = {}       # id(leaf requiring grad) -> (leaf, its .grad when first used)
        self.role = None            # "optimizer" while an optimizer step records its ops
        self.roles = {}             # node index -> role, where not read off the derivative order
        self.inputs = []            # (tensor, fn): inputs a replay reads as fn()
        self.assigns = []           # (node count then, target tensor or None, new tensor, write, into)
        self.assigned = {}          # id(target's version cell) -> bumps the assignments made
        self.before_call = []       # functions a replay calls before reading its inputs
        self.stepped = set()        # ids of the optimizers whose step() this capture recorded
        self.cleared = set()        # ids of parameters whose .grad a zero_grad() cleared
        self.labels = {}            # id(parameter or buffer) -> its name, for errors
        self.symbolic = None        # a dynamic.Symbolic when the sizes are symbolic
        self.size_inputs = []       # (tensor, SymInt or SymFloat, NumPy dtype): numbers of sizes
        self.upstream = []          # stand-in gradients of the results (aot.record_backward)
        self.released = {}          # id(result tensor) -> weakref to the array it gave up
        self._uses = {}             # id(tensor) -> times a recorded node lists it as an input
        self._live = []             # results whose arrays are not released yet
        self._kept = 0              # results the last _release could not release
        self._fresh = 0             # bytes of the results recorded since

    def size_scalar(self, value, np_dtype, device):
        """A 0-d tensor of a number computed from dynamic sizes: a program input that each
        call recomputes for its sizes."""
        # its value now, read without pinning the sizes it comes from (NumPy calls __float__)
        t = Tensor._make(device.xp.asarray(symbolic.numbers(value), dtype=np_dtype), device, False)
        t.name = f"size {value.poly}" if isinstance(value, symbolic.SymInt) else "size"
        self.size_inputs.append((t, value, np_dtype))
        return t

    @contextlib.contextmanager
    def recording_as(self, role):
        prev, self.role = self.role, role
        try:
            yield
        finally:
            self.role = prev

    def input(self, fn, name=""):
        """A tensor around fn()'s array that the program reads as an input, calling fn
        afresh at each replay (a learning rate, a bias correction, an optimizer's state)."""
        a = fn()
        t = Tensor._make(a, device_of_array(a), False)
        t.name = name
        self.inputs.append((t, fn))
        return t

    def assign(self, new, write, target=None, into=None):
        """`write(new's array)` now and after every replay; `target` is the parameter it
        updates in place (its version is bumped, as an eager optimizer step bumps it).
        `into` (default: target) is the tensor whose array `write` overwrites, when the
        program reads it as an input: a runner may then compute the new value straight into
        that array (codegen/runner.py checks that nothing reads the old value afterwards),
        and `write` must do nothing when handed the very array it would write into."""
        write(new.data)
        self.assigns.append((len(self.nodes), target, new, write, target if into is None else into))
        if target is not None:
            cell = id(target._version)
            self.assigned[cell] = self.assigned.get(cell, 0) + 1

    def add(self, node, results):
        super().add(node, results)
        sym = self.symbolic
        if sym is not None:
            # backwards read their inputs' shapes off in_meta: the formulas, not the numbers
            node.in_meta = [(sym.shape_of(t),) + tuple(m[1:]) for t, m in zip(node.inputs, node.in_meta)]
            sym.on_node(node, results)
            node.out_meta = [(sym.shape_of(t),) + tuple(m[1:]) for t, m in zip(results, node.out_meta)]
        if self.role is not None:
            self.roles[len(self.nodes) - 1] = self.role
        seen = self.first_version
        for t in node.inputs:
            if id(t) not in seen:
                seen[id(t)] = (t, t._version[0])
                if t.requires_grad and t.grad_fn is None:
                    self.entry_grads[id(t)] = (t, t.grad)
        for t in results:
            seen[id(t)] = (t, t._version[0])
        if sym is None:   # the symbolic shapes are keyed by arrays: those stay
            uses = self._uses
            for t in node.inputs:
                uses[id(t)] = uses.get(id(t), 0) + 1
            self._fresh += sum(t.data.nbytes for t in results)
            if self._fresh >= RELEASE_BYTES or len(self._live) + len(results) >= 2 * self._kept + RELEASE_BATCH:
                self._release()
            # only now: this op's results are on their way to the caller, and a multi-output
            # op's are held by nothing but the tape's list yet (a single output also by a
            # local of Function.apply), so a release here would take them from the step
            self._live += results

    def _release(self):
        """Give up the arrays of the recorded results that nothing outside the capture can
        reach any more: only the tape itself still holds such a tensor (its results list,
        `_live`, `first_version`, the inputs of the nodes that read it), so no code of the
        step will read its array again, and building the program needs only its shape and
        dtype (and the array's identity while the array lives on elsewhere: saved for a
        backward, an index in an op's attributes). Without this a capture held every
        intermediate of the step at once (1.4 GB of RSS for the 4-layer GPT-2 bench step,
        230,000 page faults), where eager frees them as it goes."""
        base, uses = _HELD_BY_TAPE, self._uses
        again = True
        while again:   # a released view lets go of its base (`_base`): look at the bases again
            again, kept = False, []
            for t in self._live:
                a = t.data
                if getrefcount(t) != base + uses.get(id(t), 0):
                    kept.append(t)
                    continue
                try:
                    self.released[id(t)] = weakref.ref(a)
                except TypeError:   # an array type without weak references: keep it
                    kept.append(t)
                    continue
                t.data = _Released(a)
                if t._base is not None:
                    t._base, again = None, True
            self._live = kept
        self._kept, self._fresh = len(kept), 0

    def traced(self, t):
        """Whether `t` is a value of the program (an argument, a parameter or buffer, a
        result of a recorded op), not a constant the program keeps as it is now."""
        return id(t) in self._producer or id(t) in self.known

    def refuse_inplace(self, op, tensors):
        """Called by the in-place ops (ops/inplace.py) while capturing: an in-place update
        that involves a traced value (an argument, a parameter, a result of the step)
        cannot be replayed (the program would keep the array it wrote, or miss the write),
        so it is refused here, naming the op and the line (the check of the versions after
        the step still catches one on a constant the step then reads)."""
        if not any(isinstance(t, Tensor) and self.traced(t) for t in tensors):
            return
        where = user_frame(skip=LIBRARY_DIRS)
        x = tensors[0]
        if x.requires_grad and x.grad_fn is None:
            label = self.labels.get(id(x)) or shape_label(x)
            raise CaptureError(
                f"tt.compile: {self.fn_name} changed parameter {label} in place outside an nn.optim "
                f"optimizer step ({op} at {where}); the replay would not repeat it. Update it "
                "with an nn.optim optimizer inside the compiled function, or do it outside")
        raise CaptureError(
            f"tt.compile: {self.fn_name} calls the in-place op {op} on a tensor of the step at "
            f"{where}; in-place ops are not captured yet (the replay would not repeat the "
            "write): use the out-of-place form (x = x + y instead of x.add_(y), "
            "tt.where(mask, v, x) instead of x[mask] = v, inplace=False)")

    def refuse_complex(self, op, arrays):
        """Called by Function.apply while capturing when an op reads or makes a complex array:
        the IR, its passes and the C/CUDA code generators know real dtypes only (issue 23),
        so a complex step runs eagerly or not at all, never half-compiled."""
        dt = next(a.dtype for a in arrays if a.dtype.kind == "c")
        raise CaptureError(
            f"tt.compile: {self.fn_name}: op '{op}' at {user_frame()} works on {dt.name} "
            "tensors; complex dtypes are not supported by the compiler (its IR and kernels are "
            "real-valued). Run this function without tt.compile, or compile only its real part")

    def read_value(self, t, what):
        """Called by Tensor.item() and friends while capturing: a value the step computed
        (or an argument / parameter) read into Python would be frozen into the program."""
        if id(t) not in self._producer and id(t) not in self.known:
            return  # a constant made from Python numbers: reading it back is harmless
        where = user_frame(skip=LIBRARY_DIRS)   # the user's line, not nn/'s reader
        raise CaptureError(
            f"tt.compile: {self.fn_name} reads a tensor's value into Python ({what}) at {where}; "
            "a compiled program cannot replay Python that depends on tensor values (the value "
            "of the first call would be frozen). Keep it in tensor ops (tt.where instead of an "
            "if), or return the tensor and read it outside the compiled function.")
