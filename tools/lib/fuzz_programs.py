"""Random tinytensor programs for the differential fuzzer of `tt.compile` (tools/fuzz_compile.py,
tests/tinytensor/compiler/test_fuzz.py): a program is drawn from a seed, written out as a
runnable Python script (the very text the fuzzer executes, so a printed failure is what ran),
and shrunk by dropping ops, outputs, inputs and calls while it still fails.

Each op belongs to a feature; a feature can be switched off, so a family of known compiler
bugs can stay out of CI until its fix lands (KNOWN_BUGS: the one list of what is off)."""
import dataclasses
import random

# feature -> what it adds to the programs
FEATURES = {
    "elementwise": "unary and broadcasting binary ops (+ - * / max min where clamp exp tanh ...)",
    "reduce": "sum, mean, amax, var, logsumexp, cumsum over a dim or all",
    "softnorm": "softmax, log_softmax, layer_norm, rms_norm",
    "movement": "transpose, permute, reshape, slices, expand, cat, stack, chunk, flip, roll, tril",
    "matmul": "@ with a weight, x @ x.T, F.linear",
    "indexing": "index_select, gather, advanced indexing, embedding, masked_fill, scatter_add",
    "loss": "mse, l1, smooth_l1, cross_entropy, nll, bce_with_logits, kl_div",
    "float64": "float64 programs beside float32 ones",
    "backward": "loss.backward() inside the step, the leaves' .grad compared",
    "grad": "tt.grad(loss, leaves) inside the step",
    "noncontig": "calls with inputs in another layout (strided, transposed)",
    "grad_preset": "a call whose leaves already hold a .grad (eager accumulates)",
    "scalar_arg": "a Python float argument, a new value on each call",
    # the families of known bugs of issue 22 (see KNOWN_BUGS)
    "outside_tape": "argmax, max(dim), min(dim), sort, topk, cummax, max_pool1d",
    "arg_grads": "tensor arguments that require grad under .backward() inside the step",
    "alias": "a call with one tensor passed for two arguments, then distinct tensors again",
    "neg_zero": "a Python float argument of 0.0, then -0.0",
    "neg_const": "negative Python constants (x * -1.5)",
    "nan": "a call with NaN among the input values",
    "outer_backward": "the compiled function returns the loss; .backward() runs outside it",
    "layout_bits": "exactly rounded programs held to eager's bits on non-contiguous inputs and "
                   "after index_select over a dim > 0 too (else within 2x eager's error there)",
}

# Off by default, each with why: feature -> the finding. The issue-22 families that were
# here (outside_tape, arg_grads, alias, neg_zero, neg_const, nan, outer_backward) are fixed
# and on, and so is layout_bits (eager's sums read C-contiguous arrays: core/primitives.py
# `summand`). A feature stays switchable: `--disable layout_bits` holds exactly rounded
# programs to eager's bits on contiguous inputs only.
KNOWN_BUGS = {}

DEFAULT = frozenset(FEATURES) - frozenset(KNOWN_BUGS)

_SIZES = (1, 1, 2, 3, 3, 4, 5, 7, 8, 16)
_MAX_NUMEL = 2048
_BIG = 1e4      # a value bound past which no op may grow it further (float32 stays finite)


@dataclasses.dataclass
class Input:
    name: str
    kind: str            # "arg" (tensor argument), "param" (a leaf the step closes over),
    shape: tuple = ()    # "index" (int64 argument), "scalar" (Python float argument)
    high: int = 0        # index: values in [0, high)
    grad: bool = False   # arg: requires grad

    def spec(self):
        if self.kind == "arg":
            return ("arg", self.shape, self.grad)
        if self.kind == "index":
            return ("index", self.shape, self.high)
        if self.kind == "param":
            return ("param", self.shape)
        return ("scalar",)


@dataclasses.dataclass
class Op:
    out: str
    fmt: str             # a Python expression; {0}, {1}, ... are `args`
    args: tuple
    exact: bool          # exactly rounded, forward and backward (+ - * / max where, moves)
    feature: str
    kind: str = "f"      # of the result: "f" float, "i" int64
    shape: tuple = ()    # of the result

    def line(self):
        return f"{self.out} = {self.fmt.format(*self.args)}"


@dataclasses.dataclass
class Program:
    seed: int
    dtype: str           # "float32" or "float64"
    mode: str            # "forward", "backward", "grad" or "outer"
    inputs: list
    ops: list
    outputs: list        # value names returned (float ones enter the loss)
    calls: list          # dicts, see fuzz_check.check
    layout_bits: bool = True    # bitwise on non-contiguous inputs too (feature layout_bits)

    @property
    def exact(self):
        """True: bitwise on every call; "contiguous" (feature layout_bits off): on calls
        with contiguous inputs only."""
        if not all(op.exact for op in self.ops):
            return False
        return True if self.layout_bits else "contiguous"

    def kinds(self):
        kinds = {i.name: ("f" if i.kind in ("arg", "param") else "i" if i.kind == "index" else "s")
                 for i in self.inputs}
        kinds.update({op.out: op.kind for op in self.ops})
        return kinds

    def leaves(self):
        """Inputs requiring grad that reach a float output along differentiable edges (an
        int result, argmax's, carries no gradient)."""
        kinds = self.kinds()
        reach = {o for o in self.outputs if kinds.get(o) == "f"}
        for op in reversed(self.ops):
            if op.out in reach and op.kind == "f":
                reach |= {a for a in op.args if kinds.get(a) == "f"}
        return [i.name for i in self.inputs if i.name in reach
                and (i.kind == "param" or (i.kind == "arg" and i.grad))]

    def source(self, backend, run=True):
        """The program as a script that checks `backend` on these calls; run=False: without
        that last check (what the fuzzer itself executes before calling it)."""
        params = [i.name for i in self.inputs if i.kind == "param"]
        args = [i.name for i in self.inputs if i.kind != "param"]
        inputs = ",\n".join(f"    {i.name!r}: {i.spec()!r}" for i in self.inputs)
        body = [f"        {op.line()}" for op in self.ops]
        kinds = self.kinds()
        floats = [o for o in self.outputs if kinds.get(o) == "f"]
        loss = " + ".join(f"({o} * {o}).sum()" for o in floats)
        outs = ", ".join(self.outputs)
        if self.mode == "forward":
            body.append(f"        return ({outs},)")
        elif self.mode == "backward":
            body += [f"        loss = {loss}", "        loss.backward()",
                     f"        return (loss, {outs})"]
        elif self.mode == "grad":
            leaves = ", ".join(self.leaves())
            body += [f"        loss = {loss}",
                     f"        return (loss, {outs}) + tuple(tt.grad(loss, [{leaves}]))"]
        else:   # outer: check() calls result[0].backward() after the compiled call
            body += [f"        loss = {loss}", f"        return (loss, {outs})"]
        calls = ",\n".join(f"    {c!r}" for c in self.calls)
        return (f"# tt.compile fuzz program (seed {self.seed}): run it from the repository root\n"
                "import numpy as np  # noqa: F401\n"
                "import tinytensor as tt  # noqa: F401\n"
                "import tinytensor.functional as F  # noqa: F401\n"
                "from tinytensor.tools.lib.fuzz_check import check\n\n"
                f"INPUTS = {{\n{inputs},\n}}\n\n\n"
                f"def program({', '.join(params)}):\n"
                f"    def fn({', '.join(args)}):\n" + "\n".join(body) + "\n    return fn\n\n\n"
                f"CALLS = [\n{calls},\n]\n" + (
                    "\n"
                    f"check(program, INPUTS, mode={self.mode!r}, dtype={self.dtype!r}, "
                    f"exact={self.exact!r}, backend={backend!r}, calls=CALLS)\n"
                    "print(\"compiled == eager\")\n" if run else ""))


@dataclasses.dataclass
class _Val:
    shape: tuple
    kind: str = "f"
    bound: float = 4.0    # a rough bound on |value|, so that exp and products stay finite
    high: int = 0         # kind "i": values in [0, high)


class Generator:
    """Draws one Program from a seed with the ops of `features`."""

    def __init__(self, seed, features=DEFAULT, max_ops=8):
        self.rng = random.Random(seed)
        self.seed, self.features, self.max_ops = seed, frozenset(features), max_ops
        unknown = self.features - set(FEATURES)
        if unknown:
            raise ValueError(f"fuzz: unknown features {sorted(unknown)}; known: {sorted(FEATURES)}")
        self.vals, self.inputs, self.ops = {}, [], []
        self.counts = {}
        modes = ["forward"] + [m for m in ("backward", "grad", "outer_backward") if m in self.features]
        self.mode = self.rng.choice(modes)
        if self.mode == "outer_backward":
            self.mode = "outer"

    # names and inputs
    def _name(self, prefix):
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def new_input(self, shape, kind=None):
        r = self.rng
        if kind is None:
            p_param = 0.3 if self.mode == "forward" else 0.5
            kind = "param" if r.random() < p_param else "arg"
        grad = False
        if kind == "arg" and self.mode != "forward":
            grad = self.mode == "grad" or "arg_grads" in self.features
            grad = grad and r.random() < 0.5
        name = self._name("p" if kind == "param" else "x")
        self.inputs.append(Input(name, kind, tuple(shape), grad=grad))
        self.vals[name] = _Val(tuple(shape))
        return name

    def new_index(self, shape, high):
        name = self._name("i")
        self.inputs.append(Input(name, "index", tuple(shape), high=high))
        self.vals[name] = _Val(tuple(shape), "i", 0.0, high)
        return name

    def scalar(self):
        found = [i.name for i in self.inputs if i.kind == "scalar"]
        if found:
            return found[0]
        name = self._name("s")
        self.inputs.append(Input(name, "scalar"))
        self.vals[name] = _Val((), "s", 2.0)
        return name

    def shape(self, rank=None):
        r = self.rng
        if rank is None:
            rank = r.choice((0, 1, 1, 2, 2, 2, 3, 3, 4))
        while True:
            s = tuple(r.choice(_SIZES) for _ in range(rank))
            if _numel(s) <= _MAX_NUMEL:
                return s

    def const(self):
        pool = [0.5, 2.0, 3.0, 0.25, 1.5]
        if "neg_const" in self.features:
            pool += [-1.5, -0.5, -2.0]
        return self.rng.choice(pool)

    # values
    def floats(self):
        return [n for n, v in self.vals.items() if v.kind == "f"]

    def pick(self, ok=lambda v: True):
        """A float value: the latest one most often, so that ops chain."""
        names = [n for n in self.floats() if ok(self.vals[n])]
        if not names:
            return None
        if self.rng.random() < 0.55:
            return names[-1]
        return self.rng.choice(names)

    def partner(self, shape):
        """A second operand broadcasting against `shape`: an existing value, or a new input
        of that shape or of a broadcast form of it."""
        r = self.rng
        roll = r.random()
        if roll < 0.3:
            same = [n for n in self.floats() if _broadcast(self.vals[n].shape, shape) == shape]
            if same:
                return r.choice(same)
        if roll < 0.6 or not shape:
            twins = [i.name for i in self.inputs if i.kind == "arg" and i.shape == shape]
            if twins and "alias" in self.features and r.random() < 0.5:
                return self.new_input(shape, "arg")   # a pair for the f(x, x) call
            return self.new_input(shape)
        s = list(shape)
        s = [1 if r.random() < 0.35 else n for n in s]
        if r.random() < 0.3:
            s = s[r.randint(1, len(s)):] if len(s) > 1 else s
        return self.new_input(tuple(s))

    def emit(self, fmt, args, shape, exact, feature, bound=None, kind="f", high=0):
        name = self._name("v")
        if bound is None:
            bound = max([self.vals[a].bound for a in args if a in self.vals] + [1.0])
        self.ops.append(Op(name, fmt, tuple(args), exact, feature, kind, tuple(shape)))
        self.vals[name] = _Val(tuple(shape), kind, bound, high)
        return name

    # drawing
    def draw(self):
        r = self.rng
        self.dtype = "float64" if "float64" in self.features and r.random() < 0.3 else "float32"
        pair = "alias" in self.features and r.random() < 0.4
        first = self.new_input(self.shape(), "arg" if pair else None)
        if pair:   # two arguments of one shape meeting at once, for the f(x, x) call
            twin = self.new_input(self.vals[first].shape, "arg")
            self.inputs[-1].grad = self.inputs[-2].grad
            fmt = r.choice(("({0} - {1})", "({0} * {1})", "tt.where({0} > {1}, {0}, {1})"))
            self.emit(fmt, (first, twin), self.vals[first].shape, True, "alias")
        if "neg_zero" in self.features and r.random() < 0.4:
            # x * s with s = 0.0, then -0.0: zeros of the other sign
            self.emit("({0} * {1})", (self.pick(), self.scalar()), self.vals[first].shape, True,
                      "neg_zero")
        families = [f for f in ("elementwise", "reduce", "softnorm", "movement", "matmul",
                                "indexing", "loss", "outside_tape") if f in self.features]
        if not families:
            raise ValueError("fuzz: no op family among the features")
        weights = {"elementwise": 5, "movement": 3, "reduce": 2, "softnorm": 1.5, "matmul": 1.5,
                   "indexing": 1.5, "loss": 0.7, "outside_tape": 1}
        n_ops = r.randint(1, self.max_ops)
        tries = 0
        while len(self.ops) < n_ops and tries < 20 * n_ops:
            tries += 1
            family = r.choices(families, [weights[f] for f in families])[0]
            OPS[family](self)
        if not self.ops:
            OPS["elementwise"](self)
        return self.finish()

    def finish(self):
        # every op's result reaches an output: the sinks (results nothing later reads) are
        # returned, and the float ones enter the loss
        used = {a for op in self.ops for a in op.args}
        outputs = [op.out for op in self.ops if op.out not in used]
        if all(self.vals[o].kind != "f" for o in outputs):
            outputs.append(self.pick())
        prog = Program(self.seed, self.dtype, self.mode, self.inputs, self.ops, outputs, [],
                       "layout_bits" in self.features)
        if prog.mode != "forward" and not prog.leaves():
            # nothing to differentiate: a leaf the step closes over instead of an argument
            for i in prog.inputs:
                if i.kind == "arg":
                    i.kind = "param"
            if not prog.leaves():
                prog.mode = "forward"
        prog.calls = self.calls(prog)
        return prog

    def calls(self, prog):
        """Capture, then replays: the same values in fresh tensors, new values, new values in
        another layout, leaves already holding a .grad, one tensor for two arguments."""
        r, f = self.rng, self.features
        seeds = iter(range(1000 * (self.seed % 1000), 1000 * (self.seed % 1000) + 100))
        first = {"seed": next(seeds)}
        if "noncontig" in f and r.random() < 0.25:
            first["layout"] = "strided"
        scalar = any(i.kind == "scalar" for i in prog.inputs)
        if scalar and "neg_zero" in f:
            first["scalar"] = 0.0
        calls = [first, dict(first), {"seed": next(seeds)}]
        if "noncontig" in f:
            calls.append({"seed": next(seeds), "layout": r.choice(("strided", "transposed"))})
        if "grad_preset" in f and prog.mode != "forward":
            calls.append({"seed": next(seeds), "grads": True})
        if scalar and "neg_zero" in f:
            calls.append({"seed": first["seed"], "scalar": -0.0})
        if "nan" in f:
            calls.append({"seed": next(seeds), "nan": True})
        args = [i for i in prog.inputs if i.kind == "arg"]
        pairs = [(a.name, b.name) for k, a in enumerate(args) for b in args[k + 1:]
                 if a.shape == b.shape and a.grad == b.grad]
        if "alias" in f and pairs:
            calls.append({"seed": next(seeds), "alias": r.choice(pairs)})
            calls.append({"seed": next(seeds)})
        return calls


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _broadcast(a, b):
    """The broadcast shape of a and b, or None."""
    out = []
    for k in range(max(len(a), len(b))):
        x = a[len(a) - 1 - k] if k < len(a) else 1
        y = b[len(b) - 1 - k] if k < len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def _dim(g, shape, at_least=1):
    dims = [d for d, n in enumerate(shape) if n >= at_least]
    return g.rng.choice(dims) if dims else None


def _grow(bound, factor):
    b = bound * factor
    return b if b <= _BIG else None


# op families: each takes the Generator, appends at most one op (or none, when it cannot
# apply to what it drew)

def _on_a_tensor(gen):
    """An op generator that needs a value of rank >= 1: gen(g, a, g.vals[a]) on one picked
    as pick() does, or nothing this turn when there is none."""
    def generate(g):
        a = g.pick(lambda v: len(v.shape) >= 1)
        if a is not None:
            gen(g, a, g.vals[a])
    generate.__name__ = gen.__name__
    return generate


def _elementwise(g):
    r = g.rng
    a = g.pick()
    v = g.vals[a]
    shape, b0 = v.shape, v.bound
    if r.random() < 0.45:   # binary, broadcasting
        b = g.partner(shape)
        out = _broadcast(g.vals[b].shape, shape)
        bb = g.vals[b].bound
        x, y = (a, b) if r.random() < 0.7 else (b, a)
        op = r.choice(("add", "sub", "mul", "div", "maximum", "minimum", "where", "where0"))
        if op == "mul":
            bound = _grow(b0, bb)
            if bound is None:
                return
            g.emit("({0} * {1})", (x, y), out, True, "elementwise", bound)
        elif op == "div":
            g.emit("({0} / ({1}.abs() + 1))", (x, y), out, True, "elementwise", g.vals[x].bound)
        elif op in ("add", "sub"):
            g.emit("({0} %s {1})" % ("+" if op == "add" else "-"), (x, y), out, True,
                   "elementwise", b0 + bb)
        elif op in ("maximum", "minimum"):
            g.emit(f"tt.{op}({{0}}, {{1}})", (x, y), out, True, "elementwise", max(b0, bb))
        elif op == "where":
            g.emit("tt.where({0} > {1}, {0}, {1})", (x, y), out, True, "elementwise", max(b0, bb))
        else:
            g.emit("tt.where({0} > 0, {0}, {1} * 0.5)", (x, y), out, True, "elementwise",
                   max(b0, bb))
        return
    choices = ["neg", "relu", "abs", "square", "scale", "shift", "rsub", "clamp", "recip",
               "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "sin", "gelu", "silu",
               "softplus", "pow", "erf", "gelu_tanh"]
    if "scalar_arg" in g.features:
        choices += ["scalar", "scalar"]
    op = r.choice(choices)
    exact_unary = {"neg": "(-{0})", "relu": "{0}.relu()", "abs": "{0}.abs()",
                   "clamp": "{0}.clamp(-0.5, 0.75)", "recip": "({0}.abs() + 1).reciprocal()"}
    if op in exact_unary:
        bound = 1.0 if op in ("clamp", "recip") else b0
        g.emit(exact_unary[op], (a,), shape, True, "elementwise", bound)
    elif op == "square":
        bound = _grow(b0, b0)
        if bound is not None:
            g.emit("({0} * {0})", (a,), shape, True, "elementwise", bound)
    elif op in ("scale", "shift", "rsub"):
        c = g.const()
        fmt = {"scale": "({0} * %r)", "shift": "({0} + %r)", "rsub": "(%r - {0})"}[op] % c
        bound = b0 * abs(c) if op == "scale" else b0 + abs(c)
        g.emit(fmt, (a,), shape, True, "elementwise", bound)
    elif op == "scalar":
        s = g.scalar()
        g.emit("({0} * {1})", (a, s), shape, True, "scalar_arg", b0 * 2)
    elif op == "exp":
        if b0 <= 8:
            g.emit("{0}.exp()", (a,), shape, False, "elementwise", 2.0 ** (1.5 * b0))
    else:
        fmts = {"tanh": ("{0}.tanh()", 1.0), "sigmoid": ("{0}.sigmoid()", 1.0),
                "log": ("({0}.abs() + 1).log()", b0), "sqrt": ("({0} * {0} + 1).sqrt()", b0 + 1),
                "rsqrt": ("({0} * {0} + 1).rsqrt()", 1.0), "sin": ("{0}.sin()", 1.0),
                "gelu": ("F.gelu({0})", b0), "silu": ("F.silu({0})", b0),
                "erf": ("tt.erf({0})", 1.0), "gelu_tanh": ("F.gelu({0}, approximate='tanh')", b0),
                "softplus": ("F.softplus({0})", b0 + 1), "pow": ("{0}.abs().pow(1.5)", b0 ** 1.5)}
        fmt, bound = fmts[op]
        if op == "sqrt" and b0 * b0 > _BIG:
            return
        if bound <= _BIG:
            g.emit(fmt, (a,), shape, False, "elementwise", bound)


def _reduce(g):
    r = g.rng
    a = g.pick()
    v = g.vals[a]
    shape = v.shape
    op = r.choice(("sum", "sum", "mean", "amax", "var", "logsumexp", "cumsum", "all"))
    if op == "all" or not shape:
        how = r.choice(("sum", "mean"))
        bound = _grow(v.bound, _numel(shape)) if how == "sum" else v.bound
        if bound is not None:
            g.emit("{0}.%s()" % how, (a,), (), True, "reduce", bound)
        return
    d = r.randrange(len(shape))
    keep = r.random() < 0.3
    out = shape[:d] + ((1,) if keep else ()) + shape[d + 1:]
    dd = d - len(shape) if r.random() < 0.5 else d
    # bitwise claim: sums over the last dim follow NumPy's pairwise order
    last = d == len(shape) - 1
    if op in ("sum", "mean"):
        bound = _grow(v.bound, shape[d]) if op == "sum" else v.bound
        if bound is not None:
            g.emit("{0}.%s(dim=%d, keepdim=%r)" % (op, dd, keep), (a,), out, last, "reduce", bound)
    elif op == "amax":
        g.emit("{0}.amax(dim=%d, keepdim=%r)" % (dd, keep), (a,), out, True, "reduce", v.bound)
    elif op == "var":
        if shape[d] >= 2:
            g.emit("{0}.var(dim=%d, keepdim=%r)" % (dd, keep), (a,), out, False, "reduce",
                   _grow(v.bound, v.bound) or _BIG)
    elif op == "logsumexp":
        g.emit("{0}.logsumexp(dim=%d, keepdim=%r)" % (dd, keep), (a,), out, False, "reduce",
               v.bound + 4)
    else:
        bound = _grow(v.bound, shape[d])
        if bound is not None:
            g.emit("tt.cumsum({0}, %d)" % dd, (a,), shape, False, "reduce", bound)


@_on_a_tensor
def _softnorm(g, a, v):
    r = g.rng
    shape = v.shape
    op = r.choice(("softmax", "log_softmax", "layer_norm", "layer_norm_affine", "rms_norm"))
    if op in ("softmax", "log_softmax"):
        d = r.randrange(len(shape)) - (len(shape) if r.random() < 0.5 else 0)
        bound = 1.0 if op == "softmax" else g.vals[a].bound * 2 + 8
        g.emit("{0}.%s(dim=%d)" % (op, d), (a,), shape, False, "softnorm", bound)
    elif op == "layer_norm":
        g.emit("F.layer_norm({0}, (%d,))" % shape[-1], (a,), shape, False, "softnorm", 50.0)
    elif op == "layer_norm_affine":
        w, b = g.new_input((shape[-1],)), g.new_input((shape[-1],))
        g.emit("F.layer_norm({0}, (%d,), {1}, {2})" % shape[-1], (a, w, b), shape, False,
               "softnorm", 250.0)
    else:
        w = g.new_input((shape[-1],))
        g.emit("F.rms_norm({0}, (%d,), {1})" % shape[-1], (a, w), shape, False, "softnorm", 250.0)


def _movement(g):
    r = g.rng
    a = g.pick()
    v = g.vals[a]
    shape, rank = v.shape, len(v.shape)
    op = r.choice(("transpose", "permute", "flatten", "split_dim", "unsqueeze", "squeeze",
                   "expand", "step_slice", "slice", "narrow", "flip", "roll", "cat", "stack",
                   "chunk", "t", "tril", "select", "movedim", "repeat", "contiguous", "diagonal"))
    emit = lambda fmt, out, args=(a,): g.emit(fmt, args, out, True, "movement")  # noqa: E731
    if op == "transpose" and rank >= 2:
        d0, d1 = r.sample(range(rank), 2)
        out = list(shape)
        out[d0], out[d1] = out[d1], out[d0]
        emit("{0}.transpose(%d, %d)" % (d0, d1), tuple(out))
    elif op == "permute" and rank >= 2:
        p = list(range(rank))
        r.shuffle(p)
        emit("{0}.permute(%s)" % ", ".join(map(str, p)), tuple(shape[k] for k in p))
    elif op == "flatten" and rank >= 1:
        emit("{0}.reshape(-1)", (_numel(shape),))
    elif op == "split_dim" and rank >= 1:
        d = r.randrange(rank)
        n = shape[d]
        factors = [f for f in range(2, n) if n % f == 0]
        if factors:
            f = r.choice(factors)
            out = shape[:d] + (f, n // f) + shape[d + 1:]
            emit("{0}.reshape(%s)" % ", ".join(map(str, out)), out)
        elif rank >= 2:   # merge the last two dims
            out = shape[:-2] + (shape[-2] * shape[-1],)
            emit("{0}.reshape(%s)" % ", ".join(map(str, out)) + ("" if len(out) > 1 else ""), out)
    elif op == "unsqueeze" and rank < 4:
        d = r.randint(0, rank)
        emit("{0}.unsqueeze(%d)" % d, shape[:d] + (1,) + shape[d:])
    elif op == "squeeze" and 1 in shape:
        d = r.choice([k for k, n in enumerate(shape) if n == 1])
        emit("{0}.squeeze(%d)" % d, shape[:d] + shape[d + 1:])
    elif op == "expand" and 1 in shape:
        d = r.choice([k for k, n in enumerate(shape) if n == 1])
        n = r.choice((2, 3, 5))
        out = shape[:d] + (n,) + shape[d + 1:]
        if _numel(out) <= _MAX_NUMEL:
            emit("{0}.expand(%s)" % ", ".join(map(str, out)), out)
    elif op == "step_slice" and rank >= 1 and shape[-1] >= 2:
        emit("{0}[..., ::2]", shape[:-1] + ((shape[-1] + 1) // 2,))
    elif op == "slice" and rank >= 1 and shape[0] >= 3:
        emit("{0}[1:-1]", (shape[0] - 2,) + shape[1:])
    elif op == "narrow" and rank >= 1:
        d = _dim(g, shape, 2)
        if d is not None:
            start = r.randrange(shape[d] - 1)
            length = r.randint(1, shape[d] - start)
            emit("{0}.narrow(%d, %d, %d)" % (d, start, length),
                 shape[:d] + (length,) + shape[d + 1:])
    elif op == "flip" and rank >= 1:
        emit("{0}.flip(%d)" % r.randrange(rank), shape)
    elif op == "roll" and rank >= 1:
        emit("{0}.roll(%d, %d)" % (r.choice((1, 2, -1)), r.randrange(rank)), shape)
    elif op in ("cat", "stack") and rank >= 1:
        d = r.randrange(rank + (op == "stack"))
        if op == "stack" or r.random() < 0.5:
            roll = r.random()
            same = [n for n in g.floats() if g.vals[n].shape == shape]
            b = a if roll < 0.25 else r.choice(same) if roll < 0.6 else g.new_input(shape)
            out = (shape[:d] + (shape[d] * 2,) + shape[d + 1:] if op == "cat"
                   else shape[:d] + (2,) + shape[d:])
        else:
            m = r.choice((1, 2, 3))
            b = g.new_input(shape[:d] + (m,) + shape[d + 1:])
            out = shape[:d] + (shape[d] + m,) + shape[d + 1:]
        if _numel(out) <= _MAX_NUMEL:
            g.emit("tt.%s([{0}, {1}], dim=%d)" % (op, d), (a, b), out, True, "movement",
                   max(v.bound, g.vals[b].bound))
    elif op == "chunk" and rank >= 1:
        d = _dim(g, shape, 2)
        if d is not None:
            n = shape[d]
            size = -(-n // 2)
            k = r.randrange(2 if n > size else 1)
            emit("{0}.chunk(2, dim=%d)[%d]" % (d, k), shape[:d] + (min(size, n - k * size),)
                 + shape[d + 1:])
    elif op == "t" and rank == 2:
        emit("{0}.t()", shape[::-1])
    elif op == "tril" and rank >= 2:
        emit("{0}.%s(%d)" % (r.choice(("tril", "triu")), r.choice((0, 1, -1))), shape)
    elif op == "select" and rank >= 1:
        d = r.randrange(rank)
        emit("{0}.select(%d, %d)" % (d, r.randrange(shape[d])), shape[:d] + shape[d + 1:])
    elif op == "movedim" and rank >= 2:
        s, t = r.sample(range(rank), 2)
        out = list(shape)
        out.insert(t, out.pop(s))
        emit("{0}.movedim(%d, %d)" % (s, t), tuple(out))
    elif op == "repeat" and rank >= 1:
        reps = tuple(r.choice((1, 2)) for _ in range(rank))
        out = tuple(n * k for n, k in zip(shape, reps))
        if _numel(out) <= _MAX_NUMEL:
            emit("{0}.repeat(%s)" % ", ".join(map(str, reps)), out)
    elif op == "contiguous":
        emit("{0}.contiguous()", shape)
    elif op == "diagonal" and rank >= 2:
        emit("{0}.diagonal(dim1=-2, dim2=-1)", shape[:-2] + (min(shape[-2:]),))


@_on_a_tensor
def _matmul(g, a, v):
    r = g.rng
    shape = v.shape
    k = shape[-1]
    op = r.choice(("weight", "weight", "gram", "linear"))
    if op == "gram" and len(shape) >= 2:
        out = shape[:-1] + (shape[-2],)
        bound = _grow(v.bound, v.bound * k)
        if bound is not None:
            g.emit("({0} @ {0}.transpose(-1, -2))", (a,), out, False, "matmul", bound)
        return
    n = r.choice((1, 2, 3, 5, 8))
    if op == "linear":
        w, b = g.new_input((n, k)), g.new_input((n,))
        bound = _grow(v.bound, 4 * k + 1)
        if bound is not None:
            g.emit("F.linear({0}, {1}, {2})", (a, w, b), shape[:-1] + (n,), False, "matmul", bound)
        return
    w = g.new_input((k, n))
    bound = _grow(v.bound, 4 * k)
    if bound is not None:
        g.emit("({0} @ {1})", (a, w), shape[:-1] + (n,), False, "matmul", bound)


def _index_for(g, shape, high):
    """An int64 value of `shape` with values in [0, high): an existing one (an argmax) or a
    new index argument."""
    found = [n for n, v in g.vals.items() if v.kind == "i" and v.shape == shape and 0 < v.high <= high]
    if found and g.rng.random() < 0.7:
        return g.rng.choice(found)
    return g.new_index(shape, high)


@_on_a_tensor
def _indexing(g, a, v):
    r = g.rng
    shape, rank = v.shape, len(v.shape)
    op = r.choice(("index_select", "gather", "advanced", "embedding", "masked_fill", "scatter_add"))
    d = r.randrange(rank)
    if op == "index_select":
        m = r.choice((1, 2, 3, 5))
        i = _index_for(g, (m,), shape[d])
        exact = d == 0 or "layout_bits" in g.features
        g.emit("{0}.index_select(%d, {1})" % d, (a, i), shape[:d] + (m,) + shape[d + 1:], exact,
               "indexing")
    elif op == "gather":
        ishape = tuple(r.randint(1, n) if k == d or r.random() < 0.3 else n
                       for k, n in enumerate(shape))
        i = _index_for(g, ishape, shape[d])
        g.emit("{0}.gather(%d, {1})" % d, (a, i), ishape, True, "indexing")
    elif op == "advanced":
        m = r.choice((1, 2, 4))
        i = _index_for(g, (m,), shape[0])
        g.emit("{0}[{1}]", (a, i), (m,) + shape[1:], True, "indexing")
    elif op == "embedding" and rank == 2:
        ishape = g.shape(r.choice((1, 2)))
        i = _index_for(g, ishape, shape[0])
        g.emit("F.embedding({1}, {0})", (a, i), ishape + (shape[1],), True, "indexing")
    elif op == "masked_fill":
        g.emit("{0}.masked_fill({0} > 0.5, 0.25)", (a,), shape, True, "indexing")
    elif op == "scatter_add":
        ishape = tuple(r.randint(1, n) for n in shape)
        i = _index_for(g, ishape, shape[d])
        src = g.new_input(ishape)
        g.emit("{0}.scatter_add(%d, {1}, {2})" % d, (a, i, src), shape, False, "indexing",
               v.bound + g.vals[src].bound * _numel(ishape))


@_on_a_tensor
def _loss(g, a, v):
    r = g.rng
    shape = v.shape
    op = r.choice(("mse", "l1", "smooth_l1", "huber", "bce", "kl", "cross_entropy", "nll"))
    reduction = r.choice(("mean", "mean", "sum", "none"))
    out = shape if reduction == "none" else ()
    if op in ("mse", "l1", "smooth_l1", "huber", "bce"):
        b = g.partner(shape) if r.random() < 0.2 else (
            g.pick(lambda v: v.shape == shape) if r.random() < 0.4 else g.new_input(shape))
        if g.vals[b].shape != shape:
            b = g.new_input(shape)
        name = {"mse": "mse_loss", "l1": "l1_loss", "smooth_l1": "smooth_l1_loss",
                "huber": "huber_loss", "bce": "binary_cross_entropy_with_logits"}[op]
        target = "{1}.sigmoid()" if op == "bce" else "{1}"
        g.emit("F.%s({0}, %s, reduction=%r)" % (name, target, reduction), (a, b), out, False,
               "loss", _BIG)
    elif op == "kl" and len(shape) >= 1:
        b = g.pick(lambda v: v.shape == shape)
        g.emit("F.kl_div({0}.log_softmax(dim=-1), {1}.softmax(dim=-1), reduction='batchmean')",
               (a, b), (), False, "loss", _BIG)
    elif len(shape) == 2 and shape[1] >= 1:
        t = _index_for(g, (shape[0],), shape[1])
        smooth = ", label_smoothing=0.1" if op == "cross_entropy" and r.random() < 0.3 else ""
        out = (shape[0],) if reduction == "none" else ()
        fmt = ("F.cross_entropy({0}, {1}, reduction=%r%s)" % (reduction, smooth)
               if op == "cross_entropy" else
               "F.nll_loss({0}.log_softmax(dim=-1), {1}, reduction=%r)" % reduction)
        g.emit(fmt, (a, t), out, False, "loss", _BIG)


@_on_a_tensor
def _outside_tape(g, a, v):
    r = g.rng
    shape = v.shape
    rank = len(shape)
    d = r.randrange(rank)
    op = r.choice(("max", "min", "sort", "topk", "cummax", "argmax", "max_pool"))
    if op in ("max", "min"):
        g.emit("{0}.%s(dim=%d).values" % (op, d), (a,), shape[:d] + shape[d + 1:], False,
               "outside_tape")
    elif op == "sort":
        g.emit("{0}.sort(dim=%d).values" % d, (a,), shape, False, "outside_tape")
    elif op == "topk":
        k = r.randint(1, shape[-1])
        g.emit("{0}.topk(%d).values" % k, (a,), shape[:-1] + (k,), False, "outside_tape")
    elif op == "cummax":
        g.emit("tt.cummax({0}, %d).values" % d, (a,), shape, False, "outside_tape")
    elif op == "argmax":
        g.emit("{0}.argmax(dim=%d, keepdim=True)" % d, (a,), shape[:d] + (1,) + shape[d + 1:],
               True, "outside_tape", 0.0, "i", shape[d])
    elif op == "max_pool" and rank == 3 and shape[-1] >= 2:
        g.emit("F.max_pool1d({0}, 2)", (a,), shape[:-1] + (shape[-1] // 2,), False, "outside_tape")


OPS = {"elementwise": _elementwise, "reduce": _reduce, "softnorm": _softnorm,
       "movement": _movement, "matmul": _matmul, "indexing": _indexing, "loss": _loss,
       "outside_tape": _outside_tape}


def generate(seed, features=DEFAULT, max_ops=8):
    return Generator(seed, features, max_ops).draw()
