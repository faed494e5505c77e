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
value to `CaptureTape.assign` (capture_tape.py), which writes it in place now and, at every
replay, from the program's output: parameters keep their identity and their arrays.

The parts: capture_tape.py (the tape the step records on), lift.py (the tape as an
ir.Program), pytree.py (the tensors inside arguments and results), errors.py (what is
refused, naming the user's line); this module runs the step and checks what it did.

What cannot be replayed is refused with an error naming it: a value read into Python
(`.item()`, `bool(t)`, ...), any other in-place update of a tensor the step uses, a
random draw that is not a recorded op (it would be frozen).
"""

from .. import random as _random
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..device import CPU
from ..kernels import fusion as _fusion
from .. import symbolic
from . import ir, state
from .capture_tape import CaptureTape
from .dynamic import Symbolic
from .errors import CaptureError, shape_label, user_frame  # noqa: F401  (ops, nn import both from here)
from .interpret import _Ctx
from .lift import Builder, drop_unread_saved
from .pytree import flatten_tensors, known_tensors, own, rebuild
from .records import Binding, CaptureMeta, Symbols


def capture(fn, args, kwargs=None, name=None, dynamic=False, static=frozenset(), differentiable=False):
    """Run `fn(*args, **kwargs)` once, recorded; return (Program, eager_result, meta), meta
    a records.CaptureMeta (its fields say what a replay does besides running the program).

    dynamic=True: the sizes of the tensor arguments are symbols (compiler/dynamic.py); the
    program's shapes and attributes hold SymInts, and meta.symbolic (records.Symbols) says
    how to read the symbols off a call and which guards a call's sizes must pass.
    differentiable=True: meta.aot, for results that require grad in a step without a
    backward of its own, has their backward's part of the program (aot.py).
    """
    kwargs = kwargs or {}
    name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
    arg_tensors = flatten_tensors((args, kwargs))
    arg_bindings = [Binding("arg", i) for i in range(len(arg_tensors))]
    slots_before = state.slots(args, kwargs)   # tensors that state objects (a KV cache) hold
    for path, v in slots_before:
        if isinstance(v, Tensor) and all(v is not t for t in arg_tensors):
            arg_tensors.append(v)
            arg_bindings.append(Binding("slot", path))
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

    tape = CaptureTape(name, {id(t) for t in arg_tensors} | set(named))
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
    # are ops all the way down, and fusing them again is the compiler's job. Those of
    # fusion.CAPTURED (batch norm) are recorded as themselves: a replay gives eager's bits
    fusion_state = _fusion.for_capture()
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
    b = Builder(tape, arg_tensors, named, entry_grads, arg_bindings)
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
    program = ir.Program(inputs=b.inputs, instrs=drop_unread_saved(b.instrs, outputs),
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
    read_grads = {id(x) for kind, x in b.bindings if kind == "grad"}
    meta = CaptureMeta(
        bindings=b.bindings, tree=tree, n_results=len(results), grads=grads,
        params=[x for kind, x in b.bindings if kind == "param"], before_call=list(tape.before_call),
        writes=writes, write_back=write_back, cleared=tape.cleared - read_grads,
        slot_writes=slot_writes, entry_grads={k: g for k, (_, g) in entry_grads.items()},
        grad_args=grad_args, aot=aot_meta)
    if dynamic:
        sym = tape.symbolic
        meta.symbolic = Symbols(dict(sym.values), sym.guards, sym.pinned_dims())
    return program, result, meta


_MISSING = object()


def _changed_in_place(name, label, t):
    if t.requires_grad and t.grad_fn is None:
        raise CaptureError(
            f"tt.compile: {name} changed parameter {label or shape_label(t)} in place outside "
            "an nn.optim optimizer step (a manual update, or an optimizer that does not "
            "capture its update); the replay would not repeat it. Update it with an nn.optim "
            "optimizer inside the compiled function, or do it outside")
    raise CaptureError(
        f"tt.compile: {name} modified {('tensor ' + label) if label else shape_label(t)} in "
        "place; in-place ops are not captured yet: use the out-of-place form (x = x + y "
        "instead of x.add_(y))")


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
        for dev, st in after.items():
            _random.set_rng_state(dev, st)
    if replayed != after:
        raise CaptureError(
            f"tt.compile: {name} drew random numbers outside a recorded op (tt.rand, tt.randn, "
            "tt.randint, ... inside the step): the replay would reuse the first call's numbers. "
            "Draw them outside the compiled function and pass them in as arguments.")
