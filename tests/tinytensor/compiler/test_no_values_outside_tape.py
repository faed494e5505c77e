"""The rule that keeps a compiled program honest (docs/ARCHITECTURE.md, "Values stay on the
tape"): outside a Function's array code (forward, forward_into, backward_arrays), op
wrappers, nn/ and models/ read a tensor's shape, dtype and device, never its values. A
tensor built from another tensor's array (`Tensor._make(x.data ...)`, `tt.tensor(...)`,
`tt.as_tensor(...)`) is no recorded op: tt.compile would keep the first call's array as a
constant and replay it for every later call, silently.

This test reads the source (AST) of every module outside tinytensor/core and
tinytensor/compiler and follows, inside each function, which names hold something computed
from a `.data` (not its `.shape`, `.dtype`, ... nor a `zeros_like` of it); it fails on a
tensor built from such a value. The few places that may do it are listed below, each with
the reason it cannot freeze a value into a program."""
import ast
import functools
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCANNED = ["tinytensor", "nn", "models"]
NOT_SCANNED = [os.path.join("tinytensor", "core"),       # the tape itself (detach, _make's home)
               os.path.join("tinytensor", "compiler")]   # builds and replays programs
# attributes of an array that are its shape, not its values
SHAPE_ATTRS = {"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "flags", "strides", "device"}
SHAPE_CALLS = {"zeros_like", "ones_like", "empty_like", "full_like", "result_type", "len",
               "isinstance", "type", "id", "device_of_array"}
# functions whose work is arrays by contract: a Function's forward runs again at every replay
ARRAY_CODE = {"forward", "forward_into", "backward_arrays"}
SINKS = {"_make", "Tensor", "tensor", "as_tensor", "from_numpy", "_const", "asarray_tensor"}

# (file, function) -> why a tensor built there from another's values is not frozen
ALLOWED = {
    ("tinytensor/ops/scatter.py", "nonzero"):
        "a data-dependent output shape: refused under capture first (read_value 'nonzero')",
    ("tinytensor/ops/search_ops.py", "_unique"):
        "unique's data-dependent length: refused under capture first (read_value 'unique')",
    ("tinytensor/creation.py", "multinomial"):
        "a draw on the host from probs' values: refused under capture first (read_value)",
    ("nn/positions.py", "relative_position_bucket"):
        "T5's buckets of a position Tensor on arrays: refused under capture first (read_value)",
}


def _modules():
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            rel_dir = os.path.relpath(dirpath, ROOT)
            if any(rel_dir == d or rel_dir.startswith(d + os.sep) for d in NOT_SCANNED):
                continue
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.join(rel_dir, f).replace(os.sep, "/")


def _name(func):
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


class _Taint(ast.NodeVisitor):
    """Whether an expression's value depends on a `.data`, a tainted name, or a call of a
    function of the module that returns such a value."""

    def __init__(self, tainted, returns, data=True):
        self.tainted, self.returns, self.data, self.found = tainted, returns, data, False

    def visit_Attribute(self, node):
        if node.attr in SHAPE_ATTRS:
            return        # x.data.shape: a shape
        if node.attr == "data" and self.data:
            self.found = True
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _name(node.func)
        if name in SHAPE_CALLS:
            return
        if name in self.returns and self.data:
            self.found = True
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.tainted:
            self.found = True

    def visit_Lambda(self, node):
        return   # a deferred computation is checked where it is called


def _targets(node):
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            yield from _targets(e)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    elif isinstance(node, ast.Subscript):   # table[..., 0::2] = sin fills `table`
        yield from _targets(node.value)


def _array_code(fn):
    """A Function's array code: forward(ctx, ...) (not a Module's forward(self, ...)),
    forward_into, backward_arrays."""
    if fn.name == "forward":
        return "ctx" in _params(fn)[:2]
    return fn.name in ARRAY_CODE


def _params(fn):
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args]


class _Function:
    """One function's flow: which names hold values (from the seeds, to a fixed point)."""

    def __init__(self, fn):
        self.fn = fn
        nodes = list(ast.walk(fn))
        self.flows = []    # (target names, value expression) of each assignment or loop
        for n in nodes:
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                targets, value = (n.targets if isinstance(n, ast.Assign) else [n.target]), n.value
            elif isinstance(n, (ast.For, ast.comprehension)):
                targets, value = [n.target], n.iter
            else:
                continue
            self.flows.append(([x for t in targets for x in _targets(t)], value))
        for n in nodes:   # coords.append(c), parts.extend(...): the container holds the value
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args \
                    and n.func.attr in ("append", "extend", "insert", "add", "update"):
                self.flows.append((list(_targets(n.func.value)), n.args[-1]))
        self.calls = [n for n in nodes if isinstance(n, ast.Call)]
        self.returns = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]

    def tainted(self, seeds, returns, data):
        def hit(expr, names):
            v = _Taint(names, returns, data)
            v.visit(expr)
            return v.found
        names = set(seeds)
        flows = list(self.flows)
        changed = True
        while changed:   # names assigned from tainted values, to a fixed point
            changed = False
            for k, (targets, value) in enumerate(flows):
                if targets is not None and hit(value, names):
                    names.update(targets)
                    flows[k] = (None, None)
                    changed = True
        return names, hit


def _sink_args(call, sinks):
    """The argument expressions of `call` that reach a tensor built by the callee."""
    spec = sinks.get(_name(call.func))
    if spec is None:
        return []
    out = [a for i, a in enumerate(call.args) if i in spec or "*" in spec]
    out += [k.value for k in call.keywords if k.arg in spec or k.arg is None]
    return out


def violations_in(source, path):
    """(function name, line, source line) of every tensor built from another's values.

    Within the module, a function whose return value comes from `.data` taints its callers'
    names, and a function that builds a tensor from one of its parameters is a sink for
    that parameter (`_take(x, flat)` making a tensor of `flat`), to a fixed point."""
    tree = ast.parse(source)
    lines = source.splitlines()
    funcs = [_Function(n) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and not _array_code(n)]
    sinks = {name: {0, "data"} for name in SINKS}
    returns = set()
    changed = True
    while changed:
        changed = False
        for f in funcs:
            name = f.fn.name
            if name not in returns and f.returns:
                names, hit = f.tainted((), returns, True)
                if any(hit(r, names) for r in f.returns):
                    returns.add(name)
                    changed = True
            if name in sinks or not any(_name(c.func) in sinks for c in f.calls):
                continue
            for i, p in enumerate(_params(f.fn)):
                names, hit = f.tainted({p}, returns, False)
                if any(hit(a, names) for c in f.calls for a in _sink_args(c, sinks)):
                    sinks.setdefault(name, set()).update({i, p})
                    changed = True
    out = []
    for f in funcs:
        names, hit = f.tainted((), returns, True)
        for c in f.calls:
            if any(hit(a, names) for a in _sink_args(c, sinks)):
                out.append((f.fn.name, c.lineno, lines[c.lineno - 1].strip()))
    return out


@functools.lru_cache(maxsize=None)
def _scan():
    """{path: violations} of every scanned module (read once for both tests)."""
    out = {}
    for path in _modules():
        with open(os.path.join(ROOT, path)) as f:
            out[path] = violations_in(f.read(), path)
    return out


def test_no_tensor_is_built_from_another_tensors_values_outside_the_tape():
    found = []
    for path, violations in _scan().items():
        for fn, line, src in violations:
            if (path, fn) not in ALLOWED:
                found.append(f"{path}:{line} in {fn}(): {src}")
    assert not found, ("tensors built from another tensor's values outside a Function's forward "
                       "(tt.compile would freeze them; make them a recorded op, or refuse under "
                       "capture and add the place to ALLOWED with the reason):\n" + "\n".join(found))


def test_every_allowed_place_still_exists():
    """An entry whose function no longer builds such a tensor is stale: drop it."""
    seen = {(path, fn) for path, violations in _scan().items() for fn, _, _ in violations}
    assert not set(ALLOWED) - seen, sorted(set(ALLOWED) - seen)


@pytest.mark.parametrize("code", [
    # the shapes of the bugs this rule was written after (issue 22)
    "def argmax(x):\n    r = xp.argmax(x.data, axis=1)\n    return Tensor._make(r, x.device, False)\n",
    "def backward(ctx, g):\n    a, b = ctx.saved_tensors\n"
    "    q = Tensor._make(xp.floor(a.data / b.data), g._device, False)\n    return g * q\n",
    "def f(mask):\n    live = mask.data.any(axis=-1)\n    live = tt.as_tensor(live)\n    return live\n",
    "def f(x):\n    for a in (x.data, x.data):\n        return _const(a * 2, x)\n",
    # through helpers of the module: a value returned, a tensor built from a parameter
    "def _pos(p):\n    return p.data\ndef f(p):\n    return tt.as_tensor(_pos(p) + 1)\n",
    "def _take(x, flat):\n    idx = _const(flat, x)\n    return idx\n"
    "def pool(x):\n    flat = x.data.argmax(-1)\n    return _take(x, flat)\n",
    # a Module's forward is not a Function's: it is checked
    "class M(Module):\n    def forward(self, pos):\n        return tt.as_tensor(pos.data + 1)\n",
])
def test_the_scan_catches_a_value_built_outside_the_tape(code):
    assert violations_in(code, "x.py")


@pytest.mark.parametrize("code", [
    "def f(x):\n    return Tensor._make(xp.zeros(x.data.shape, x.data.dtype), x.device, False)\n",
    "def f(x):\n    return Tensor._make(xp.zeros_like(x.data), x.device, False)\n",
    "class A(Function):\n    def forward(ctx, x):\n        return Tensor._make(x.data, 0, False)\n",
])
def test_the_scan_lets_shapes_through(code):
    assert not violations_in(code, "x.py")
