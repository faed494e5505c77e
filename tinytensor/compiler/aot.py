"""Differentiable outputs of a compiled function (the AOT-autograd idea of torch.compile).

`fast = tt.compile(model); loss = F.cross_entropy(fast(x), y); loss.backward()`: the
function has no backward of its own, but its results require grad, so the backward the
user runs later must reach the parameters (and the arguments) through the compiled code.

1. Capture (`record_backward`, called by capture.py right after the function returned):
   the backward of the results is run once, recorded as ops like an in-step backward, from
   stand-in upstream gradients that are program inputs (binding "upstream"). The gradients
   of every leaf (and of every argument produced outside) the forward read become program
   outputs: one joint program, optimized by the passes as a whole.
2. Split (`split`): the instructions that depend on an upstream gradient, and those only
   they need, are the backward program; the rest is the forward program. Values the
   backward reads from the forward (saved values) are extra outputs of the forward and
   inputs of the backward; each is built by its backend (planned, fused) like any other.
3. Call (`_Differentiable._finish`): each replay runs the forward program, then hands its
   results to `CompiledCall`, a Function node whose inputs are the call's tensors: its
   `backward_arrays` runs the backward program on the saved values and the incoming
   gradients, and the engine accumulates into `.grad`, runs hooks, frees the saved values
   (a second backward without retain_graph errors) exactly as for any other op.

With dynamic=True the stand-in gradients take their results' symbolic shapes, so the
backward program is one of symbolic sizes too, instantiated at each call's sizes.

Not supported, each refused by name: create_graph=True through a compiled function, and a
hook or retain_grad() on a tensor inside it. Tensors a call stores into a state object
(a KV cache) carry no history, as before.
"""
import dataclasses
import functools

import numpy as np

from .. import random as _random
from ..core.engine import run_backward
from ..core.function import Function
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from . import absent, instantiate, interpret, state
from .api import _DynamicEntry, _Entry
from .errors import CaptureError, user_frame
from .pytree import flatten_tensors, own, owner, rebuild
from .ir import Value
from .passes import finish, is_random, rewire


# ----------------------------------------------------------------------------- capture
class Joint:
    """What record_backward recorded: which results are differentiable, which tensors
    they were differentiated against, and the gradient tensors (None where unused)."""

    def __init__(self, results, wrt, grads):
        self.results, self.wrt, self.grads = results, wrt, grads

    def add_outputs(self, builder, outputs):
        """Append the gradients to the program's outputs; meta.aot for the split."""
        n_forward = len(outputs)
        grad_outputs = []
        for g in self.grads:
            if g is None:
                grad_outputs.append(None)
            else:
                grad_outputs.append(len(outputs))
                outputs.append(builder.value(g))
        inputs = {v.id: k for k, v in enumerate(builder.inputs)}
        wrt = [inputs[builder.value(t).id] for t in self.wrt]
        return {"results": self.results, "wrt": wrt, "grad_outputs": grad_outputs,
                "n_forward": n_forward}


def record_backward(tape, result, name, dynamic=False):
    """Record the backward of `result`'s tensors that require grad onto `tape` (the
    capture in progress, grad mode as the call found it); a Joint, or None when nothing
    needs it: grad off, no result requiring grad, or a step that ran a backward or an
    optimizer of its own (its results stay without history, as before)."""
    if not STATE.grad_enabled:
        return None
    flat = flatten_tensors(result)
    outs = [(i, t) for i, t in enumerate(flat) if t.requires_grad]
    if not outs:
        return None
    if tape.assigns or tape.inputs or any(n.order for n in tape.nodes):
        return None
    for n in tape.nodes:
        if n.out_hooks or n.retained:
            raise CaptureError(
                f"tt.compile: {name}: a hook or retain_grad() on a tensor inside the compiled "
                f"function (op '{n.name}'" + (f" in {n.scope}" if n.scope else "") + ") is not "
                "replayed by its compiled backward; register it on an input or an output instead")
    in_tape = {id(n) for n in tape.nodes}
    wrt = {}       # key -> (the tensor, the leaf its gradient is collected on)
    swapped = []   # (node, input position, edge) taken out for the recording

    def stand_in(t, key):
        got = wrt.get(key)
        if got is None:
            # the gradient stops here: the user's own backward continues from this tensor
            # into the graph that made it, through the engine, after the compiled backward
            s = Tensor._make(t.data, t._device, True)
            got = wrt[key] = (t, s)
        return got[1]

    for n in tape.nodes:
        edges = n.edges
        for i, e in enumerate(edges):
            if e is None:
                continue
            if e.__class__ is tuple:
                if id(e[0]) in in_tape:
                    continue
                s = stand_in(n.inputs[i], (id(e[0]), e[1]))
                swapped.append((n, i, e))
                edges[i] = s
            else:
                wrt.setdefault(id(e), (e, e))
    starts = []
    for _, t in outs:
        if t.grad_fn is None:
            wrt.setdefault(id(t), (t, t))
            starts.append(t)
        elif id(t.grad_fn) not in in_tape:
            starts.append(stand_in(t, (id(t.grad_fn), t._out_index)))
        else:
            starts.append(t)
    leaves = [s for _, s in wrt.values()]
    hooks = [(s, s._hooks) for s in leaves if s._hooks]
    ups = []
    for k, (_, t) in enumerate(outs):
        u = Tensor._make(t._device.xp.ones(t.data.shape, dtype=t.data.dtype), t._device, False)
        u.name = f"grad of result {k}"
        ups.append(u)
        if tape.symbolic is not None:
            _like(tape.symbolic, u, t)
        tape.known.add(id(u))   # a backward reading it into Python must be refused, not frozen
    tape.upstream = ups
    try:
        for s, _ in hooks:   # the user's hooks run at the user's backward, not at this one
            s._hooks = None
        grads = run_backward(starts, ups, True, True, inputs=leaves, allow_unused=True, graph=False)
    finally:
        for s, h in hooks:
            s._hooks = h
        for n, i, e in swapped:
            n.edges[i] = e
    return Joint([i for i, _ in outs], [t for t, _ in wrt.values()], list(grads))


def _like(sym, u, t):
    """dynamic=True: the stand-in gradient `u` has the symbolic shape of its result `t`,
    and shadow arrays of ones wherever `t` has shadows (dynamic.py reruns each backward op
    at other sizes on its inputs' shadows)."""
    if id(t.data) in sym.shapes:
        sym.shapes[id(u.data)] = sym.shapes[id(t.data)]
    sym.keep.append(u)
    for shadows in list(sym.corners.values()) + [sym.checkpoint]:
        a = shadows.get(id(t.data))
        if a is not None:
            shadows[id(u.data)] = np.ones(a.shape, dtype=a.dtype)


# ----------------------------------------------------------------------------- split
class Split:
    """The forward and backward programs of a joint one, and how a call links them.

    saved: per backward input before the upstream gradients, ("out", j) for the forward
    program's output j or ("in", k) for its input k (the array this call read).
    fn_inputs: forward-program input indices that are CompiledCall's inputs (the tensors
    differentiated against, and those whose saved array the backward reads), and grad_of:
    per fn input, the backward program's output index of its gradient, or None."""

    def __init__(self, forward, backward, bindings, n_forward, saved, results, fn_inputs, grad_of):
        self.forward, self.backward, self.bindings = forward, backward, bindings
        self.n_forward, self.saved, self.results = n_forward, saved, results
        self.fn_inputs, self.grad_of = fn_inputs, grad_of


def split(program, meta):
    aot = meta.aot
    bindings = meta.bindings
    up = [k for k, b in enumerate(bindings) if b.kind == "upstream"]
    up_ids = {program.inputs[k].id for k in up}
    n_forward = aot["n_forward"]
    fwd_outs = program.outputs[:n_forward]
    grad_outs = [program.outputs[j] for j in aot["grad_outputs"] if j is not None]
    instrs = program.instrs

    depends = set(up_ids)   # values computed from an upstream gradient
    on_up = []
    for ins in instrs:
        d = any(v.id in depends for v in ins.inputs)
        on_up.append(d)
        if d:
            depends.update(v.id for v in ins.outputs)
    if any(v.id in depends for v in fwd_outs):
        raise AssertionError("tt.compile: a forward result depends on an upstream gradient")

    # forward: what its results need, and every random draw (its place in the generator's
    # stream is the forward's); backward: the rest of what the gradients need
    live = {v.id for v in fwd_outs}
    in_f = [False] * len(instrs)
    for k in range(len(instrs) - 1, -1, -1):
        ins = instrs[k]
        if not on_up[k] and (is_random(ins) or any(v.id in live for v in ins.outputs)):
            in_f[k] = True
            live.update(v.id for v in ins.inputs)
    live = {v.id for v in grad_outs}
    in_b = [False] * len(instrs)
    for k in range(len(instrs) - 1, -1, -1):
        ins = instrs[k]
        if not in_f[k] and any(v.id in live for v in ins.outputs):
            in_b[k] = True
            live.update(v.id for v in ins.inputs)
    b_instrs = [ins for ins, b in zip(instrs, in_b) if b]
    f_instrs = [ins for ins, f in zip(instrs, in_f) if f]

    defined_b = {v.id for ins in b_instrs for v in ins.outputs}
    defined_f = {v.id for ins in f_instrs for v in ins.outputs}
    input_index = {v.id: k for k, v in enumerate(program.inputs)}
    consts = {v.id: v for v in program.consts}
    needed = []     # values the backward reads but does not make, in first-read order
    seen = set()
    for v in [v for ins in b_instrs for v in ins.inputs] + grad_outs:
        if v.id not in defined_b and v.id not in seen and v.id not in consts and v.id not in up_ids:
            seen.add(v.id)
            needed.append(v)

    # forward program: the joint's inputs but the upstream gradients
    keep = [k for k in range(len(program.inputs)) if k not in set(up)]
    f_index = {k: n for n, k in enumerate(keep)}
    f_outputs = list(fwd_outs)
    out_pos = {}
    for j, v in enumerate(f_outputs):
        out_pos.setdefault(v.id, j)
    saved = []
    for v in needed:
        if v.id in input_index:
            saved.append(("in", f_index[input_index[v.id]]))
        elif v.id in defined_f:
            if v.id not in out_pos:
                out_pos[v.id] = len(f_outputs)
                f_outputs.append(v)
            saved.append(("out", out_pos[v.id]))
        else:
            raise AssertionError(f"tt.compile: the backward reads {v!r}, which nothing defines")
    forward = finish(program.replace(inputs=[program.inputs[k] for k in keep], outputs=f_outputs),
                     f_instrs, {}).verify()

    # backward program: saved values, then the upstream gradients, as fresh inputs
    canon = {}
    for n, v in enumerate(needed):
        canon[v.id] = _input_like(v, f"saved{n}")
    for k in up:
        v = program.inputs[k]
        canon[v.id] = _input_like(v, v.name)
    b_inputs = [canon[v.id] for v in needed] + [canon[program.inputs[k].id] for k in up]
    b_instrs = [rewire(ins, canon) for ins in b_instrs]
    backward = finish(program.replace(inputs=b_inputs, outputs=grad_outs), b_instrs, canon).verify()

    # the Function's inputs: tensors differentiated against, and tensors the backward reads
    fn_inputs, grad_of = [], []
    b_out = 0
    grads = {}
    for k, j in zip(aot["wrt"], aot["grad_outputs"]):
        if j is not None:
            grads[f_index[k]] = b_out
            b_out += 1
    tensor_kinds = ("arg", "param", "slot")
    for k in [f_index[k] for k in aot["wrt"]] + [n for how, n in saved if how == "in"]:
        if k not in fn_inputs and bindings[keep[k]].kind in tensor_kinds and \
                (k in grads or any(how == "in" and n == k for how, n in saved)):
            fn_inputs.append(k)
            grad_of.append(grads.get(k))
    return Split(forward, backward, [bindings[k] for k in keep], n_forward, saved,
                 aot["results"], fn_inputs, grad_of)


def _input_like(v, name):
    return Value(v.shape, v.dtype, kind="input", name=name)


class _Every:
    """A set holding every id: as guards' `cleared`, a signature without .grad parts."""

    def __contains__(self, item):
        return True


EVERY = _Every()


def reads_no_grad(meta):
    """True when a program reads no parameter's .grad (nor writes one): its replay is right
    whatever .grads a backward left, so api also keys it without them."""
    return not meta.grads and all(kind != "grad" for kind, _ in meta.bindings)


# ----------------------------------------------------------------------------- build
def entry(program, meta, backend, dynamic=False, name=""):
    """The cache entry of a joint program: its forward and backward programs, each built
    by `backend` (api._backend's function)."""
    parts = split(program, meta)
    f_meta = dataclasses.replace(meta, bindings=parts.bindings)
    f_runner = _build(backend, parts.forward, meta.write_back, dynamic)
    b_runner = _build(backend, parts.backward, {}, dynamic)
    cls = _DifferentiableDynamic if dynamic else _DifferentiableEntry
    e = cls(parts.forward, f_meta, f_runner)
    e.parts, e.backward_runner, e.name = parts, b_runner, name
    e.backward_without = functools.lru_cache(maxsize=None)(
        functools.partial(_backward_without, parts, backend, dynamic, name))
    e.program = program   # what explain and tt.viz show: forward and backward together
    return e


def _backward_without(parts, backend, dynamic, name, missing):
    """(runner, out_map) of the backward program without the upstream gradients of the
    results at positions `missing` (absent.py), built once per such set."""
    n_saved = len(parts.saved)
    program, _, out_map = absent.without(parts.backward, [n_saved + k for k in missing], name)
    return _build(backend, program, {}, dynamic), out_map


def _build(backend, program, write_back, dynamic):
    if not program.instrs:
        # nothing to compute (an output that is an input): the interpreter only routes arrays
        if dynamic:
            return instantiate.Instances(
                lambda env: functools.partial(interpret.run, instantiate.at(program, env)))
        return functools.partial(interpret.run, program)
    return backend(program, write_back, dynamic)


def rng_state():
    return {dev: _random.get_rng_state(dev) for dev in list(_random._generators)}


def set_rng_state(before):
    """Generators back to `before` (rng_state()); one made since, to its first state: the
    first call's forward draws again exactly what the capture drew."""
    for dev in list(_random._generators):
        _random.set_rng_state(dev, before[dev] if dev in before else _random.initial_rng_state(dev))


class _Differentiable:
    """A replay whose results come out of a CompiledCall node (mixed into api's entries)."""

    def _finish(self, args, kwargs, arrays, outs, env=None):
        parts = self.parts
        out = super()._finish(args, kwargs, arrays, outs[:parts.n_forward], env)
        tensors = None
        inputs = []
        for k in parts.fn_inputs:
            how, x = self._fetch[k]
            if how == 0:
                if tensors is None:
                    tensors = flatten_tensors((args, kwargs))
                inputs.append(tensors[x])
            elif how == 1:
                inputs.append(x)
            else:
                inputs.append(state.read(args, kwargs, x))
        flat = flatten_tensors(out)
        saved = [outs[j] if how == "out" else arrays[j] for how, j in parts.saved]
        call = _Call(self, [flat[i].data for i in parts.results], saved, env)
        made = CompiledCall.apply(*inputs, call=call)
        for i, t in zip(parts.results, made):
            flat[i] = t
        return rebuild(out, flat)


class _DifferentiableEntry(_Differentiable, _Entry):
    pass


class _DifferentiableDynamic(_Differentiable, _DynamicEntry):
    pass


class _Call:
    """One call's link from its CompiledCall node to the backward program: the results and
    saved arrays until the node takes them, then what running the backward needs."""

    def __init__(self, entry, results, saved, env):
        self.entry, self.results, self.saved, self.env = entry, results, saved, env

    def take(self):
        results, saved = self.results, self.saved
        self.results = self.saved = None
        return results, saved

    def backward(self, saved, grads):
        e = self.entry
        parts = e.parts
        missing = tuple(k for k, g in enumerate(grads) if g is None)
        runner, out_map = e.backward_runner, None
        if missing:   # results the user's backward did not reach: their terms left out
            runner, out_map = e.backward_without(missing)
            grads = [g for g in grads if g is not None]
        arrays = list(saved) + list(grads)
        if self.env is not None:
            runner = runner(tuple(self.env[s] for s in e._symbols), self.env)
        outs = runner(arrays)
        handed, inputs = set(), {id(owner(a)) for a in arrays}
        grad_of = parts.grad_of if out_map is None else \
            [None if j is None else out_map[j] for j in parts.grad_of]
        return tuple(None if j is None else own(outs[j], handed, inputs) for j in grad_of)

    def __repr__(self):
        return f"<compiled {self.entry.name}>"


class CompiledCall(Function):
    """One call of a compiled function, as an op: forward hands over the results the
    forward program computed; backward runs the backward program."""
    name = "compiled"
    materialize_grads = False   # a result without a gradient: its terms left out, not zeros

    @staticmethod
    def forward(ctx, *arrays, call):
        results, saved = call.take()
        ctx.save_for_backward(*saved)
        return tuple(results)

    @staticmethod
    def backward_arrays(ctx, *grads):
        return ctx.attrs["call"].backward(ctx.saved_arrays, grads)

    @staticmethod
    def jvp(ctx, *tangents):
        # the compiled programs compute values and gradients, no tangent: say so, instead of
        # the double-vjp fallback's create_graph refusal
        raise CaptureError(
            f"tt.func.jvp: a tangent reaches a call of a compiled function (at {user_frame()}); "
            "its program computes no tangents. Compile the transformed function instead "
            "(tt.compile(lambda x: tt.func.jvp(f, (x,), (t,)))) or call f uncompiled inside jvp")

    @staticmethod
    def backward(ctx, *grads):
        # the engine comes here, not to backward_arrays, with create_graph=True or while a
        # capture records the backward: the compiled backward is arrays in, arrays out, so it
        # can give neither a graph nor recorded ops (the capture would freeze its values)
        if STATE.capture is not None:
            raise CaptureError(
                f"tt.compile: a backward inside a compiled function (at {user_frame()}) reaches "
                "results of another compiled function's earlier call; call that compiled function "
                "inside this one instead (it is then recorded with it)")
        if STATE.grad_enabled:
            raise CaptureError(
                f"tt.compile: backward(create_graph=True) through a compiled function (at "
                f"{user_frame()}) is not supported: its backward program builds no graph of its "
                "own. Call the function uncompiled for higher-order gradients, or compute them "
                "inside it (tt.grad(..., create_graph=True) is captured)")
        arrays = CompiledCall.backward_arrays(ctx, *[None if g is None else g.data for g in grads])
        return tuple(None if a is None else Tensor._make(a, m[2], False)
                     for a, m in zip(arrays, ctx.in_meta))
