"""The fuzz loop: draw programs, check each backend, shrink what fails to a minimal program
(fewer ops, outputs, inputs and calls, float32 and forward where it still fails the same
way) and report it as the runnable script it is."""
import copy
import dataclasses
import time

from .fuzz_check import InvalidProgram, Mismatch, check
from .fuzz_programs import DEFAULT, generate


@dataclasses.dataclass
class Failure:
    seed: int
    backend: str
    kind: str            # "mismatch", "raised", "invalid program"
    message: str
    program: object      # the shrunk Program
    original_ops: int

    def report(self):
        return (f"tt.compile fuzz: seed {self.seed}, backend {self.backend!r}: {self.kind} "
                f"(shrunk from {self.original_ops} ops to {len(self.program.ops)})\n"
                f"{self.message}\n\n--- minimal program ---\n{self.program.source(self.backend)}")


def run_program(prog, backend):
    """None if `prog` passes on `backend`, else (kind, message)."""
    namespace = {}
    exec(compile(prog.source(backend, run=False), f"<fuzz program {prog.seed}>", "exec"), namespace)
    try:
        check(namespace["program"], namespace["INPUTS"], mode=prog.mode, dtype=prog.dtype,
              exact=prog.exact, backend=backend, calls=namespace["CALLS"])
    except InvalidProgram as e:
        return "invalid program", str(e)
    except Mismatch as e:
        kind = "raised" if "compiled function raised" in str(e) else "mismatch"
        return kind, str(e)
    return None


def fuzz(seeds, features=DEFAULT, backends=("numpy", "c"), shrink_failures=True, max_ops=8,
         on_program=None):
    """[Failure] of the programs of `seeds` on each of `backends`."""
    failures = []
    for seed in seeds:
        prog = generate(seed, features, max_ops)
        for backend in backends:
            found = run_program(prog, backend)
            if found is not None:
                kind, message = found
                small = prog
                if shrink_failures and kind != "invalid program":
                    small, message = shrink(prog, backend, kind, message)
                failures.append(Failure(seed, backend, kind, message, small, len(prog.ops)))
        if on_program is not None:
            on_program(seed, failures)
    return failures


def shrink(prog, backend, kind, message, budget_s=60.0):
    """The smallest program found that still fails on `backend` with the same kind of
    failure, and its message: greedy, one candidate edit at a time, until none applies."""
    start = time.perf_counter()
    improved = True
    while improved and time.perf_counter() - start < budget_s:
        improved = False
        for cand in _candidates(prog):
            if _size(cand) >= _size(prog):   # every step makes it smaller: no cycles
                continue
            found = run_program(cand, backend)
            if found is not None and found[0] == kind:
                prog, message, improved = cand, found[1], True
                break
    named = _renamed(prog)
    found = run_program(named, backend)   # the same program under tidy names fails alike
    return (named, found[1]) if found is not None and found[0] == kind else (prog, message)


def _size(prog):
    return (len(prog.ops), len(prog.calls), len(prog.outputs), len(prog.inputs),
            prog.mode != "forward", prog.dtype != "float32", sum(len(c) for c in prog.calls),
            sum(i.kind == "param" for i in prog.inputs))


def _renamed(prog):
    """prog with its inputs named by kind (x arguments, p closed-over leaves, i indices,
    s scalars) and its values v0, v1, ... in order."""
    counts, names = {}, {}
    for i in prog.inputs:
        prefix = {"arg": "x", "param": "p", "index": "i", "scalar": "s"}[i.kind]
        names[i.name] = f"{prefix}{counts.setdefault(prefix, 0)}"
        counts[prefix] += 1
    for k, op in enumerate(prog.ops):
        names[op.out] = f"v{k}"
    inputs = [dataclasses.replace(i, name=names[i.name]) for i in prog.inputs]
    ops = [dataclasses.replace(op, out=names[op.out], args=tuple(names.get(a, a) for a in op.args))
           for op in prog.ops]
    calls = [dict(c, alias=tuple(names[n] for n in c["alias"])) if c.get("alias") else c
             for c in prog.calls]
    return dataclasses.replace(prog, inputs=inputs, ops=ops, calls=calls,
                               outputs=[names[o] for o in prog.outputs])


def _candidates(prog):
    """Smaller or simpler variants of prog, the most reducing first."""
    # drop a call (the first, the capture, stays)
    for k in range(len(prog.calls) - 1, 0, -1):
        yield _with(prog, calls=prog.calls[:k] + prog.calls[k + 1:])
    # drop an op: its uses take one of its operands of the same shape, or it was unused
    for k in range(len(prog.ops) - 1, -1, -1):
        for cand in _drop_op(prog, k):
            yield cand
    if len(prog.outputs) > 1:
        for k in range(len(prog.outputs)):
            yield _with(prog, outputs=prog.outputs[:k] + prog.outputs[k + 1:])
    if prog.mode != "forward":
        yield _with(prog, mode="forward")
    if prog.dtype != "float32":
        yield _with(prog, dtype="float32")
    # simpler calls: contiguous, no preset .grads
    for k, call in enumerate(prog.calls):
        for key in ("layout", "grads", "nan"):
            if key in call and (k or key != "layout" or len(prog.calls) == 1):
                simpler = dict(call)
                del simpler[key]
                yield _with(prog, calls=prog.calls[:k] + [simpler] + prog.calls[k + 1:])
    # an argument in place of a leaf the step closes over
    for k, i in enumerate(prog.inputs):
        if i.kind == "param":
            inputs = copy.deepcopy(prog.inputs)
            inputs[k].kind = "arg"
            yield _with(prog, inputs=inputs)


def _with(prog, **changes):
    new = dataclasses.replace(prog, **changes)
    return _prune(new)


def _prune(prog):
    """Without the inputs nothing reads any more."""
    used = {a for op in prog.ops for a in op.args} | set(prog.outputs)
    inputs = [i for i in prog.inputs if i.name in used]
    names = {i.name for i in inputs}
    calls = [c for c in prog.calls
             if not c.get("alias") or all(n in names for n in c["alias"])]
    return dataclasses.replace(prog, inputs=inputs, calls=calls or prog.calls[:1])


def _drop_op(prog, k):
    op = prog.ops[k]
    shapes = _shapes(prog)
    kinds = prog.kinds()
    users = [o for o in prog.ops[k + 1:] if op.out in o.args]
    subs = [a for a in dict.fromkeys(op.args) if kinds.get(a) == op.kind and
            shapes.get(a) == shapes.get(op.out)]
    if not users and op.out not in prog.outputs:
        subs = [None]
    elif not users and len(prog.outputs) > 1:
        subs = subs + [None]
    for sub in subs:
        ops = []
        for o in prog.ops[:k] + prog.ops[k + 1:]:
            if sub is not None and op.out in o.args:
                o = dataclasses.replace(o, args=tuple(sub if a == op.out else a for a in o.args))
            ops.append(o)
        if sub is None:
            outputs = [o for o in prog.outputs if o != op.out]
        else:
            outputs = list(dict.fromkeys(sub if o == op.out else o for o in prog.outputs))
        if outputs:
            yield _with(prog, ops=ops, outputs=outputs)


def _shapes(prog):
    """name -> shape, found by running nothing: the inputs' shapes are known, an op's result
    shape was recorded when it was drawn (kept on the Op as `shape`)."""
    shapes = {i.name: i.shape for i in prog.inputs}
    shapes.update({op.out: op.shape for op in prog.ops})
    return shapes
