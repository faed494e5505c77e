"""Capture: run a step once eagerly under `record()` and read its tape as an ir.Program.

The step runs for real (its result is the first call's result). A `backward()` inside it
records its gradient ops as `create_graph=True` does, so the backward is part of the tape,
and the `.grad` each parameter ends up with becomes a program output. Program inputs are
the step's tensor arguments (kind "input"), then every parameter, buffer or other leaf the
step reads that is not a baked constant (kind "param", read afresh at each replay), and the
`.grad` a parameter already held on entry (an eager backward adds into it). 0-d tensors made
from Python numbers, and other arrays made inside the step, are constants.

An optimizer step inside the step (nn.optim) is captured too: while capturing, the
optimizer computes the new parameters and state with ops (role "optimizer"), reads what
changes between calls (the learning rate, the bias corrections of the step count, its
state arrays) as program inputs bound to callables ("call" bindings), and hands each new
value to `_CaptureTape.assign`, which writes it in place now and, at every replay, from
the program's output: parameters keep their identity and their arrays.

What cannot be replayed is refused with an error naming it: a value read into Python
(`.item()`, `bool(t)`, ...), any other in-place update of a tensor the step uses, a
random draw that is not a recorded op (it would be frozen).
"""
import contextlib
import dataclasses
import linecache
import os
import sys
import weakref
from sys import getrefcount

import numpy as np

from .. import random as _random
from ..core.grad_mode import STATE
from ..core.node import Tape
from ..core.tensor import Tensor
from ..device import CPU, device_of_array
from ..dtypes import from_numpy_dtype
from ..kernels import fusion as _fusion
from .. import symbolic
from . import ir, state
from .dynamic import Symbolic
from .interpret import _Ctx, fill_attrs

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tinytensor
# the libraries beside it (nn/, models/): an error names the user's line, not theirs
_LIBRARY_DIRS = tuple(d for d in (os.path.join(os.path.dirname(_PACKAGE), n) for n in ("nn", "models"))
                      if os.path.isdir(d))


class CaptureError(RuntimeError):
    """A step does something a captured program could not replay faithfully."""


def capture(fn, args, kwargs=None, name=None, dynamic=False, static=frozenset(), differentiable=False):
    """Run `fn(*args, **kwargs)` once, recorded; return (Program, eager_result, meta).

    dynamic=True: the sizes of the tensor arguments are symbols (compiler/dynamic.py); the
    program's shapes and attributes hold SymInts, and meta["symbolic"] says how to read
    the symbols off a call and which guards a call's sizes must pass.

    meta: "bindings" (per program input: ("arg", i) for the i-th tensor argument,
    ("param", tensor) or ("grad", tensor) to read at each call, ("call", fn) for fn()'s
    array), "tree" (to rebuild the result from the first `n_results` outputs), "grads"
    ((param, output index or None to clear it) for every .grad the step changed), "params"
    (the parameters, in input order), "before_call" (functions a replay calls first: an
    optimizer's step count), "writes" ((output index, write) per assigned value, in order),
    "write_back" ({output index: input index} where a write overwrites an input's array),
    "cleared" (ids of parameters whose entry .grad the step cleared before reading it),
    "grad_args" (per entry of "grads", the binding of the argument it belongs to, ("arg", i)
    or ("slot", path), or None for a parameter: a replay writes that call's argument's
    .grad, and reads its entry .grad through an ("arg_grad", binding) input),
    "aot" (None, or with differentiable=True for results that require grad in a step
    without a backward of its own: their backward's part of the program, aot.py).
    """
    kwargs = kwargs or {}
    name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
    arg_tensors = flatten_tensors((args, kwargs))
    arg_bindings = [("arg", i) for i in range(len(arg_tensors))]
    slots_before = state.slots(args, kwargs)   # tensors that state objects (a KV cache) hold
    for path, v in slots_before:
        if isinstance(v, Tensor) and all(v is not t for t in arg_tensors):
            arg_tensors.append(v)
            arg_bindings.append(("slot", path))
    named = known_tensors((args, kwargs))
    for t, _ in named.values():
        if t.requires_grad and t.grad is not None and t.grad.requires_grad:
            raise CaptureError(f"tt.compile: {name}: the .grad of {named[id(t)][1]} has a graph "
                               "of its own (from a create_graph backward); detach it first")
    before = {k: (t._version[0], id(t.data), t.grad) for k, (t, _) in named.items()}
    # every generator the step may draw from is made now, so its state before the step can
    # be compared (one made mid-step would be replayed from where the step left it)
    for dev in {CPU} | {t.device for t in arg_tensors} | {t.device for t, _ in named.values()}:
        _random.generator(dev)
    rng_before = _rng_state()

    tape = _CaptureTape(name, {id(t) for t in arg_tensors} | set(named))
    tape.labels = {k: label for k, (_, label) in named.items()}
    if dynamic:   # static: (tensor number, dim) pairs an earlier capture found tied
        tape.symbolic = Symbolic(name)
        for k, (t, label) in enumerate(state.walk_tensors(args, kwargs)):
            tape.symbolic.add_argument(t, label, {d for i, d in static if i == k}, k)
            g = t.grad if t.requires_grad else None
            if g is not None and g.shape == t.shape:   # the .grad it holds: its sizes
                tape.symbolic.add_argument(g, f"{label}.grad", {d for i, d in static if i == k}, k)
        tape.symbolic.begin()
    guards = tape.symbolic.guards if dynamic else symbolic.Guards()
    prev = STATE.capture
    STATE.tapes.append(tape)
    STATE.capture = tape
    # the fused kernels' gradients build constants from their inputs' arrays (a valid-row
    # mask from the targets) that a replay would freeze; their reference decompositions
    # are ops all the way down, and fusing them again is the compiler's job
    fusion_state = _fusion.set_fusion(False)
    try:
        with symbolic.capturing(guards):
            result = fn(*args, **kwargs)
            # results that require grad: their backward too, for the user's backward (aot.py)
            joint = None
            if differentiable:
                from . import aot   # it builds on api's entries, which import this module
                joint = aot.record_backward(tape, result, name, dynamic)
    finally:
        _fusion.restore_fusion(fusion_state)
        STATE.capture = prev
        STATE.tapes.remove(tape)

    bumps = tape.assigned  # the versions an optimizer's assignments bumped (views share them)
    for k, (t, label) in named.items():
        version, data, _ = before[k]
        if t._version[0] != version + bumps.get(id(t._version), 0) or id(t.data) != data:
            _changed_in_place(name, label, t)
    for t, version in tape.first_version.values():
        if t._version[0] != version + bumps.get(id(t._version), 0):
            _changed_in_place(name, named.get(id(t), (t, t.name))[1], t)
    _check_random(name, tape, rng_before)

    entry_grads = {k: (t, before[k][2]) for k, (t, _) in named.items() if t.requires_grad}
    for k, pair in tape.entry_grads.items():
        entry_grads.setdefault(k, pair)
    b = _Builder(tape, arg_tensors, named, entry_grads, arg_bindings)
    results = flatten_tensors(result)
    outputs = [b.value(t) for t in results]
    slot_writes = []    # (output index or None to empty it, path) per slot the step refilled
    before = dict(slots_before)
    for path, v in state.slots(args, kwargs):
        old = before.get(path, _MISSING)
        if v is old or (not isinstance(v, Tensor) and not isinstance(old, Tensor) and v == old):
            continue
        if v is None:
            slot_writes.append((None, path))
        elif isinstance(v, Tensor):
            slot_writes.append((len(outputs), path))
            outputs.append(b.value(v))
        else:
            raise CaptureError(
                f"tt.compile: {name} changes {state.describe(path)} from {old!r} to {v!r}; a "
                "compiled program replays tensor ops, not changes to Python values of the "
                "objects it is given (the replay would set the first call's value again). "
                "Keep that value in a tensor, or update it outside the compiled function")
    grads = []
    writes, write_back = [], {}
    for new, write, into in b.assigned:
        if into is not None:
            write_back[len(outputs)] = into
        writes.append((len(outputs), write))
        outputs.append(new)
    for t, old in entry_grads.values():
        if t.grad is old:
            continue
        if t.grad is None:
            grads.append((t, None))
            continue
        grads.append((t, len(outputs)))
        outputs.append(b.value(t.grad))
    grad_args = [b.arg_of.get(id(t)) for t, _ in grads]
    aot_meta = None if joint is None else joint.add_outputs(b, outputs)
    program = ir.Program(inputs=b.inputs, instrs=_drop_unread_saved(b.instrs, outputs),
                         outputs=outputs, consts=b.consts).verify()

    # the eager state the step leaves: .grad without the graph create_graph gave it, in
    # memory of its own, as an eager backward leaves it; results carry no history
    handed = set()
    for t, k in grads:
        if k is not None:
            t.grad = Tensor._make(own(t.grad.data, handed), t._device, False)
    tree = result = rebuild(result, [t.detach() if t.requires_grad else t for t in results])
    if dynamic:   # sizes among the results: plain numbers, as eager returns them (the tree
        result = rebuild(tree, flatten_tensors(tree), symbolic.numbers)   # keeps formulas)
    read_grads = {id(x[1]) for x in b.bindings if x[0] == "grad"}
    meta = {"bindings": b.bindings, "tree": tree, "n_results": len(results), "grads": grads,
            "params": [x[1] for x in b.bindings if x[0] == "param"],
            "before_call": list(tape.before_call), "writes": writes, "write_back": write_back,
            "cleared": tape.cleared - read_grads, "slot_writes": slot_writes,
            "entry_grads": {k: g for k, (_, g) in entry_grads.items()}, "grad_args": grad_args,
            "aot": aot_meta}
    if dynamic:
        sym = tape.symbolic
        meta["symbolic"] = {"symbols": dict(sym.values), "guards": sym.guards,
                            "static": sym.pinned_dims()}
    return program, result, meta


_MISSING = object()


def _drop_unread_saved(instrs, outputs):
    """Keep a side array of forward as an output only where a backward reads it."""
    read = {v.id for ins in instrs for v in ins.inputs} | {v.id for v in outputs}
    out = []
    for ins in instrs:
        if ins.saved:
            n = len(ins.outputs) - len(ins.saved)
            keep = [j for j, v in enumerate(ins.outputs[n:]) if v.id in read]
            ins = dataclasses.replace(ins, outputs=ins.outputs[:n] + [ins.outputs[n + j] for j in keep],
                                      saved=tuple(ins.saved[j] for j in keep))
        out.append(ins)
    return out


# a capture looks for arrays to release (_CaptureTape._release) after this many new results,
# or sooner once they hold this many bytes
RELEASE_BATCH = 64
RELEASE_BYTES = 8 << 20


def _held_by_tape():
    """getrefcount of a recorded result, as `_CaptureTape._release` reads it, that only the
    tape holds: its results list, `_live`, `first_version`, the loop's name and
    getrefcount's own argument. Measured on the very structures, not assumed: a count too
    high would release a tensor the step still holds."""
    t = Tensor._make(np.empty(0), CPU, False)
    outputs, live, first = [[t]], [t], {id(t): (t, 0)}
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


class _CaptureTape(Tape):
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
        where = user_frame(skip=_LIBRARY_DIRS)
        x = tensors[0]
        if x.requires_grad and x.grad_fn is None:
            label = self.labels.get(id(x)) or _shape_label(x)
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
        where = user_frame(skip=_LIBRARY_DIRS)   # the user's line, not nn/'s reader
        raise CaptureError(
            f"tt.compile: {self.fn_name} reads a tensor's value into Python ({what}) at {where}; "
            "a compiled program cannot replay Python that depends on tensor values (the value "
            "of the first call would be frozen). Keep it in tensor ops (tt.where instead of an "
            "if), or return the tensor and read it outside the compiled function.")


def user_frame(skip=()):
    """'file:line (`source`)' of the innermost frame outside tinytensor's own code and the
    directories in `skip` (nn/ for its optimizers)."""
    inside = tuple(os.path.abspath(d) + os.sep for d in (_PACKAGE, *skip))
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(inside):
        f = f.f_back
    if f is None:
        return "an unknown line"
    src = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f" (`{src}`)" if src else "")


def _changed_in_place(name, label, t):
    if t.requires_grad and t.grad_fn is None:
        raise CaptureError(
            f"tt.compile: {name} changed parameter {label or _shape_label(t)} in place outside "
            "an nn.optim optimizer step (a manual update, or an optimizer that does not "
            "capture its update); the replay would not repeat it. Update it with an nn.optim "
            "optimizer inside the compiled function, or do it outside")
    raise CaptureError(
        f"tt.compile: {name} modified {('tensor ' + label) if label else _shape_label(t)} in "
        "place; in-place ops are not captured yet: use the out-of-place form (x = x + y "
        "instead of x.add_(y))")


def _shape_label(t):
    return f"a tensor of shape {tuple(t.shape)} ({t.dtype.name})"


def _rng_state():
    return {dev: _random.get_rng_state(dev) for dev in list(_random._generators)}


def _check_random(name, tape, before):
    """Every draw from tinytensor's generator must come from a recorded random op, which
    the replay redraws. Redraw those from the state before the step: a generator that does
    not end where the step left it was also drawn from by something the tape cannot see."""
    after = _rng_state()
    if after == before:
        return
    draws = [(node, node.attrs) for node in tape.nodes if getattr(node.fn, "random", False)]
    try:
        for dev in after:  # a generator made during the step replays from its first state
            _random.set_rng_state(dev, before[dev] if dev in before else _random.initial_rng_state(dev))
        for node, attrs in draws:
            node.fn.forward(_Ctx(), **attrs)
        replayed = _rng_state()
    finally:
        for dev, state in after.items():
            _random.set_rng_state(dev, state)
    if replayed != after:
        raise CaptureError(
            f"tt.compile: {name} drew random numbers outside a recorded op (tt.rand, tt.randn, "
            "tt.randint, ... inside the step): the replay would reuse the first call's numbers. "
            "Draw them outside the compiled function and pass them in as arguments.")


class _Builder:
    """Tape nodes -> Instrs; tensors -> Values (created on first sight)."""

    def __init__(self, tape, arg_tensors, named, entry_grads, arg_bindings):
        self.inputs, self.instrs, self.consts, self.bindings = [], [], {}, []
        self.values = {}            # id(tensor) -> Value
        self.arrays = {}            # id(array) -> Value: a saved tensor a backward unpacks
        #                             is a new Tensor object around the same array
        self.named = named
        self.grad_owner = {id(g): p for p, g in entry_grads.values() if g is not None}
        # a tensor argument's .grad belongs to the argument of each call, not to this one
        self.arg_of = {}
        for t, binding in zip(arg_tensors, arg_bindings):
            self.arg_of.setdefault(id(t), binding)
        sym = tape.symbolic
        self.shape_of = sym.shape_of if sym is not None else (lambda t: t.data.shape)
        saved_shape = sym.saved_shapes.get if sym is not None else (lambda i, s: s)
        for i, (t, binding) in enumerate(zip(arg_tensors, arg_bindings)):
            if id(t) not in self.values:
                self._input(t, "input", f"arg{i}" if binding[0] == "arg" else "state", binding)
        for t, fn in tape.inputs:
            self._input(t, "input", t.name, ("call", fn))
        for t, value, np_dtype in tape.size_inputs:
            self._input(t, "input", t.name, ("size", (value, np_dtype)))
        for k, t in enumerate(tape.upstream):   # read by the backward program only (aot.py)
            self._input(t, "input", f"grad_out{k}", ("upstream", k))
        self.assigned = []          # (Value, write, input index or None) of each assignment, in order
        assigns = iter(tape.assigns)
        pending = next(assigns, None)
        released = tape.released
        for k, (node, results) in enumerate(zip(tape.nodes, tape.outputs)):
            while pending is not None and pending[0] <= k:
                self._assign(*pending[1:])
                pending = next(assigns, None)
            ins = [self.value(t) for t in node.inputs]
            outs = [ir.Value(tuple(self.shape_of(t)), m[1]) for t, m in zip(results, node.out_meta)]
            for t, v in zip(results, outs):
                self.values[id(t)] = v
                self.arrays.setdefault(id(t.data), v)
                gone = released.get(id(t))
                a = gone() if gone is not None else None
                if a is not None:   # an array its tensor gave up, alive elsewhere (saved, an index)
                    self.arrays.setdefault(id(a), v)
            saved = []
            for k, e in enumerate(node.saved or ()):
                # (array, edge, leaf, version cell, ...): no cell means an array forward
                # computed on the side; a backward reading it must get this call's
                if e[3] is None and id(e[0]) not in self.arrays:
                    v = ir.Value(tuple(saved_shape(id(e[0]), e[0].shape)), from_numpy_dtype(e[0].dtype))
                    self.arrays[id(e[0])] = v
                    outs.append(v)
                    saved.append(k)
            attrs, paths = dict(node.attrs), []
            for path, a in _arrays_in(node.attrs):
                v = self.arrays.get(id(a))
                if v is not None:  # an index tensor's array: an input, not a frozen attribute
                    paths.append(path)
                    ins.append(v)
            if paths:
                attrs = fill_attrs(attrs, paths, [None] * len(paths))
            self.instrs.append(ir.Instr(op=node.name, fn=node.fn, inputs=ins, outputs=outs,
                                        attrs=attrs, scope=node.scope,
                                        role=tape.roles.get(k) or ("backward" if node.order else "forward"),
                                        saved=tuple(saved), attr_inputs=tuple(paths)))
        while pending is not None:
            self._assign(*pending[1:])
            pending = next(assigns, None)

    def _assign(self, target, new, write, into):
        v = self.value(new)
        dest = self.values.get(id(into)) if into is not None else None
        index = next((i for i, x in enumerate(self.inputs) if x is dest), None)
        self.assigned.append((v, write, index))
        if target is not None:  # ops after the update read the new value, as eager does
            self.values[id(target)] = v

    def _input(self, t, kind, name, binding):
        v = ir.Value(tuple(self.shape_of(t)), t.dtype, kind=kind, name=name)
        self.values[id(t)] = v
        self.arrays.setdefault(id(t.data), v)
        self.inputs.append(v)
        self.bindings.append(binding)
        return v

    def value(self, t):
        v = self.values.get(id(t))
        if v is None:
            v = self.arrays.get(id(t.data))
        if v is not None:
            return v
        p = self.grad_owner.get(id(t))
        if p is not None:  # the .grad a parameter held on entry: read afresh at each call
            at = self.arg_of.get(id(p))
            return self._input(t, "param", f"{self._label(p) or 'param'}.grad",
                               ("grad", p) if at is None else ("arg_grad", at))
        if id(t) in self.named or t.requires_grad or (t.ndim and t.grad_fn is not None):
            label = self._label(t)
            return self._input(t, "param", label, ("param", t))
        # a constant: a 0-d number, or an array the step made without an op (tt.arange,
        # tt.tensor([...]), the ones a backward starts from); copied, so nothing can change it
        v = ir.Value(tuple(t.shape), t.dtype, kind="const")
        self.consts[v] = t.data.copy()
        self.values[id(t)] = v
        return v

    def _label(self, t):
        return self.named[id(t)][1] if id(t) in self.named else (t.name or "")


def _arrays_in(attrs):
    """(path, array) for every array inside attrs (directly, or in nested tuples/lists)."""
    def go(obj, path):
        if isinstance(obj, np.ndarray) or type(obj).__module__.startswith("cupy"):
            yield path, obj
        elif isinstance(obj, (tuple, list)):
            for i, o in enumerate(obj):
                yield from go(o, path + (i,))
    for k, a in attrs.items():
        yield from go(a, (k,))


def known_tensors(obj):
    """{id: (tensor, name)} of the parameters and buffers of every Module among the
    arguments, and of every optimizer's parameters (found by duck typing: tinytensor
    cannot import nn)."""
    out = {}
    for o in _walk(obj):
        if hasattr(o, "named_parameters") and hasattr(o, "training"):
            for n, p in o.named_parameters():
                out.setdefault(id(p), (p, n))
            for n, b in (o.named_buffers() if hasattr(o, "named_buffers") else ()):
                if isinstance(b, Tensor):
                    out.setdefault(id(b), (b, n))
        elif hasattr(o, "param_groups"):
            for gi, group in enumerate(o.param_groups):
                for pi, p in enumerate(group["params"]):
                    out.setdefault(id(p), (p, p.name or f"param_groups[{gi}]['params'][{pi}]"))
    return out


def _walk(obj):
    if isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _walk(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _walk(o)
    elif not isinstance(obj, Tensor):
        yield obj


def flatten_tensors(obj):
    """The tensors inside nested tuples, lists and dicts, in order."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in flatten_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in flatten_tensors(o)]
    return []


def rebuild(obj, tensors, leaf=None):
    """`obj` with its tensors (in flatten_tensors order) replaced by `tensors`, and each other
    leaf by leaf(it) when given (a size the step returned, at this call's sizes)."""
    it = iter(tensors)

    def go(o):
        if isinstance(o, Tensor):
            return next(it)
        if isinstance(o, tuple) and hasattr(o, "_fields"):  # namedtuple
            return type(o)(*[go(x) for x in o])
        if isinstance(o, (tuple, list)):
            return type(o)(go(x) for x in o)
        if isinstance(o, dict):
            new = type(o)()
            for k, x in o.items():
                new[k] = go(x)
            return new
        return o if leaf is None else leaf(o)
    return go(obj)


def owner(a):
    """The object that owns `a`'s memory (itself, or the base of its views)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def own(a, handed, inputs=frozenset()):
    """`a`, or a copy of it when it must not be handed to the caller as it is: a read-only
    broadcast view, memory already handed out (two .grads of one array) or an input's
    (`inputs`: the ids of the owners of the input arrays, `owner`). Checked by owner, not
    np.may_share_memory: a replay hands out ~100 arrays against ~300 inputs, and the pairwise
    check alone cost 7 ms of a 320 ms GPT-2-style step."""
    base = owner(a)
    if not getattr(a.flags, "writeable", True) or id(base) in handed or id(base) in inputs:
        a = a.copy()
        base = a
    handed.add(id(base))
    return a
