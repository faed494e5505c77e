"""Symbolic sizes for `tt.compile(dynamic=True)`: a size that is a formula of the call's
dynamic dimensions (s0, s1, ...), not a number baked into the program.

`SymInt` is an `int` (its value at the call being captured, so every line of Python that
computes with sizes still runs: NumPy shapes, ranges, error messages) that also carries its
formula, a polynomial in the symbols with integer coefficients (`Poly`). Arithmetic on it
(+, -, *, exact // and %) keeps the formula; `/` gives a `SymFloat` (a float that remembers
how to recompute itself, e.g. mean's 1/n). Captured ops record SymInts in their attributes,
Values carry them in their shapes, and a replay evaluates them for the sizes of each call.

While a step is being captured (`capturing()`), a comparison of a SymInt (`T > 1024`,
`S == T`, `if past:`) answers for the captured sizes and is recorded as a guard: a later
call whose sizes answer differently is a new signature, captured again, because the Python
branch it takes may differ. Inside `formulas()` (the passes, code generation) `==`
compares formulas (a dynamic size never equals a number, s0*s1 equals s1*s0) and ordering
compares the captured values (heuristics only: which fusion saves more bytes). Anywhere
else a SymInt is the number it holds.

Symbols are at least 2 (sizes 0 and 1 are specialized, as a broadcast of size 1 behaves
differently from any other size), which is what lets `s != 1` be answered without a guard
outside a capture.
"""
import contextlib
import functools
import math
import operator



class Poly:
    """sum(coef * prod(symbols)) with integer coefficients; immutable and hashable.
    terms: {monomial (sorted tuple of symbol names, () for the constant): coef}."""
    __slots__ = ("terms", "_hash")

    def __init__(self, terms):
        self.terms = {m: c for m, c in terms.items() if c}
        self._hash = hash(frozenset(self.terms.items()))

    @staticmethod
    def symbol(name):
        return Poly({(name,): 1})

    @staticmethod
    def const(c):
        return Poly({(): c} if c else {})

    def is_const(self):
        return all(not m for m in self.terms)

    def constant(self):
        return self.terms.get((), 0)

    def symbols(self):
        return sorted({s for m in self.terms for s in m})

    def __add__(self, other):
        t = dict(self.terms)
        for m, c in other.terms.items():
            t[m] = t.get(m, 0) + c
        return Poly(t)

    def __neg__(self):
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other):
        return self + (-other)

    def __mul__(self, other):
        t = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Poly(t)

    def divide(self, other):
        """self / other when other is one term (3*s0, 24) dividing every term exactly, else None."""
        if len(other.terms) != 1:
            return None
        (m2, c2), = other.terms.items()
        out = {}
        for m, c in self.terms.items():
            rest = list(m)
            for s in m2:
                if s not in rest:
                    return None
                rest.remove(s)
            if c % c2:
                return None
            out[tuple(rest)] = c // c2
        return Poly(out)

    def __call__(self, env):
        """The value for `env` ({symbol name: int})."""
        total = 0
        for m, c in self.terms.items():
            p = c
            for s in m:
                p *= env[s]
            total += p
        return total

    def __eq__(self, other):
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return self._hash

    def __str__(self):
        """A C (and Python) expression: '(2*s0*s1 + s1 + 3)'."""
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda mc: (-len(mc[0]), mc[0])):
            if m and c in (1, -1):
                parts.append(("-" if c < 0 else "") + "*".join(m))
            else:
                parts.append("*".join([str(c)] + list(m)))
        text = " + ".join(parts).replace("+ -", "- ")
        return text if text.isidentifier() or text.lstrip("-").isdigit() else f"({text})"

    __repr__ = __str__


class DynamicSizeError(RuntimeError):
    """A dynamic size used in a way a compiled program cannot recompute per call."""


# ------------------------------------------------------------------ the capture's guards
class Guards:
    """The comparisons of symbolic sizes a captured step made: (poly, op, result) meaning
    `op(poly(sizes), 0) is result`; and the symbols specialized to their captured value."""

    def __init__(self):
        self.items = {}
        self.on_pin = None   # dynamic.Symbolic: stop moving a pinned symbol in shadow runs

    def pin(self, poly, value):
        """A size handed to Python as a number (int(T), str(T), ...): valid only at `value`."""
        self.add(poly - Poly.const(value), "==", True)
        if self.on_pin is not None:
            self.on_pin(poly.symbols())

    def add(self, poly, op, result):
        if not poly.is_const():
            self.items[(poly, op)] = result

    def hold(self, env):
        return all(_OPS[op](p(env), 0) is r for (p, op), r in self.items.items())

    def describe(self):
        return "; ".join(f"{p} {op} 0 is {r}" for (p, op), r in self.items.items())


_OPS = {"==": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}

_active = []   # the Guards of the captures in progress (innermost last)


_formulas = [0]   # > 0 inside formulas(): the passes and code generation


@contextlib.contextmanager
def formulas():
    """Inside, `==` on SymInts compares formulas (s0 != 8 even where s0 is 8 now): what the
    passes and the code generators must see. Elsewhere (user code after a capture, a size
    kept in a list) a SymInt compares as the number it holds."""
    _formulas[0] += 1
    try:
        yield
    finally:
        _formulas[0] -= 1


def with_formulas(fn):
    """`fn` run inside formulas() (a pass or code generator called on its own)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with formulas():
            return fn(*args, **kwargs)
    return run


@contextlib.contextmanager
def capturing(guards):
    """Comparisons of SymInts inside are answered concretely and recorded into `guards`."""
    _active.append(guards)
    try:
        yield guards
    finally:
        _active.pop()


def _poly(x):
    if isinstance(x, SymInt):
        return x.poly
    if isinstance(x, int):
        return Poly.const(_val(x))
    return None


# ------------------------------------------------------------------ SymInt
class SymInt(int):
    """An int that is also a formula of the dynamic sizes (see the module docstring)."""
    _recompute = True   # a tensor made from it is recomputed per call (ops/elementwise.py)

    def __new__(cls, value, poly):
        self = int.__new__(cls, value)
        self.poly = poly
        self._v = int.__int__(self)   # the value, read without the guard __int__ records
        return self

    # int(T) and float(T) hand the number to code the capture cannot follow (an op's
    # wrapper that converts its arguments, math.sqrt): while capturing, the program is
    # then valid only at this size, and a guard says so (a later size captures anew)
    def __int__(self):
        if _active:
            _active[-1].pin(self.poly, self._v)
        return self._v

    def __float__(self):
        return float(self.__int__())

    def __divmod__(self, o):
        return self // o, self % o

    def __rdivmod__(self, o):
        return o // self, o % self

    @staticmethod
    def make(value, poly):
        """A SymInt, or a plain int when the formula is a constant."""
        return int(value) if poly.is_const() else SymInt(value, poly)

    def _arith(self, other, op, pop):
        if isinstance(other, float):   # T * 0.5: a float of the sizes, recomputed per call
            return SymFloat.of(op, self, other)
        p = _poly(other)
        if p is None:
            return NotImplemented
        return SymInt.make(op(self._v, _val(other)), pop(self.poly, p))

    def __add__(self, o):
        return self._arith(o, operator.add, Poly.__add__)

    def __radd__(self, o):
        return self._arith(o, lambda a, b: b + a, lambda a, b: b + a)

    def __sub__(self, o):
        return self._arith(o, operator.sub, Poly.__sub__)

    def __rsub__(self, o):
        return self._arith(o, lambda a, b: b - a, lambda a, b: b - a)

    def __mul__(self, o):
        return self._arith(o, operator.mul, Poly.__mul__)

    def __rmul__(self, o):
        return self._arith(o, lambda a, b: b * a, lambda a, b: b * a)

    def __neg__(self):
        return SymInt.make(-self._v, -self.poly)

    def __pos__(self):
        return self

    def __abs__(self):
        return self if self > 0 else -self

    def _quotient(self, o, op):
        """self / o as a formula when o is one term dividing every term of self exactly
        (B*T*8 // 8); else None."""
        p = _poly(o)
        return self.poly.divide(p) if p is not None and _val(o) > 0 else None

    def _inexact(self, a, o, op, value):
        """An integer division the formulas cannot follow (T // 2 of an odd T, T % 3): while
        capturing, the sizes involved are pinned (valid at these sizes only, a guard) and
        the number is the answer; elsewhere it is an error."""
        if not _active:
            raise DynamicSizeError(
                f"{a} {op} {o}: only an exact division by one term (a number, a size, a "
                "product of them) stays a formula of the dynamic sizes")
        for x in (a, o):
            if isinstance(x, SymInt):
                _active[-1].pin(x.poly, x._v)
        return value

    def __floordiv__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        q = self._quotient(o, "//")
        value = self._v // _val(o)
        return self._inexact(self, o, "//", value) if q is None else SymInt.make(value, q)

    def __rfloordiv__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        q = _as_sym(o)._quotient(self, "//")
        value = _val(o) // self._v
        return self._inexact(o, self, "//", value) if q is None else SymInt.make(value, q)

    def __mod__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        value = self._v % _val(o)
        return self._inexact(self, o, "%", value) if self._quotient(o, "%") is None else 0

    def __rmod__(self, o):
        if not isinstance(o, int):
            return NotImplemented
        value = _val(o) % self._v
        return self._inexact(o, self, "%", value) if _as_sym(o)._quotient(self, "%") is None else 0

    def __truediv__(self, o):
        return SymFloat.of(lambda a, b: a / b, self, o)

    def __rtruediv__(self, o):
        return SymFloat.of(lambda a, b: a / b, o, self)

    def __pow__(self, o):
        if isinstance(o, int) and not isinstance(o, SymInt) and o >= 0:
            return math.prod([self] * o) if o else 1
        return SymFloat.of(lambda a, b: a ** b, self, o)

    # comparisons: recorded as guards while capturing, formulas inside formulas(), values
    # elsewhere
    def _compare(self, o, op):
        p = _poly(o)
        if p is None:
            return NotImplemented
        a, b = self._v, _val(o)
        result = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if _active:
            diff = self.poly - p
            if op in ("==", "!="):
                _active[-1].add(diff, "==", a == b)
            elif op in ("<", ">="):
                _active[-1].add(diff, "<", a < b)
            else:
                _active[-1].add(diff, "<=", a <= b)
            return result
        if _formulas[0] and op == "==":
            return self.poly == p
        if _formulas[0] and op == "!=":
            return self.poly != p
        return result

    __eq__ = functools.partialmethod(_compare, op="==")
    __ne__ = functools.partialmethod(_compare, op="!=")
    __lt__ = functools.partialmethod(_compare, op="<")
    __le__ = functools.partialmethod(_compare, op="<=")
    __gt__ = functools.partialmethod(_compare, op=">")
    __ge__ = functools.partialmethod(_compare, op=">=")

    def __bool__(self):
        if _active:
            _active[-1].add(self.poly, "==", self._v == 0)
        return self._v != 0

    __hash__ = int.__hash__

    def __str__(self):
        # the number to the step's own code while it is captured (f"{T}", a dict keyed by
        # str(T): then valid at this size only, a guard), the formula elsewhere (the IR's
        # text, the generated C)
        if _active:
            _active[-1].pin(self.poly, self._v)
            return str(self._v)
        return str(self.poly)

    def __repr__(self):
        # the number while capturing, without a pin: the repr of a shape tuple in a message
        # (f"query {tuple(q.shape)}") is built before it is known whether it is raised
        return str(self._v) if _active else str(self.poly)

    def __format__(self, spec):
        return format(self._v, spec) if spec else str(self)

    def __reduce__(self):
        return (SymInt, (self._v, self.poly))


class SymFloat(float):
    """A float computed from sizes (1/n of a mean): its value now, and the function of the
    sizes that recomputes it per call with the same Python arithmetic (the same bits)."""

    _recompute = True

    def __new__(cls, value, fn, polys=()):
        self = float.__new__(cls, value)
        self.fn = fn
        self.polys = tuple(polys)   # (formula, value) of the sizes it was computed from
        return self

    @staticmethod
    def of(op, *args):
        if not all(isinstance(a, (int, float)) for a in args):
            return NotImplemented
        value = op(*(_plain(a) for a in args))
        polys = [(a.poly, a._v) for a in args if isinstance(a, SymInt)]
        polys += [pv for a in args if isinstance(a, SymFloat) for pv in a.polys]
        return SymFloat(value, lambda env: op(*(evaluate(a, env) for a in args)), polys)

    def _pinned(self):
        """This float handed to Python as a number (int(), round(), math.floor, float()):
        the sizes it comes from are pinned while capturing."""
        if _active:
            for poly, v in self.polys:
                _active[-1].pin(poly, v)
        return float.__float__(self)

    def __float__(self):
        return self._pinned()

    def __int__(self):
        return int(self._pinned())

    __trunc__ = __int__

    def __floor__(self):
        return math.floor(self._pinned())

    def __ceil__(self):
        return math.ceil(self._pinned())

    def __round__(self, n=None):
        return round(self._pinned(), n)

    def __str__(self):
        return str(self._pinned())

    # a branch on a float of sizes (T / 2 > 3) holds at these sizes only: pinned
    def __lt__(self, o):
        return self._pinned() < o

    def __le__(self, o):
        return self._pinned() <= o

    def __gt__(self, o):
        return self._pinned() > o

    def __ge__(self, o):
        return self._pinned() >= o

    def __eq__(self, o):
        return self._pinned() == o

    def __ne__(self, o):
        return self._pinned() != o

    def __bool__(self):
        return bool(self._pinned())

    __hash__ = float.__hash__

    def _bin(op, swap=False):
        def f(self, o):
            return SymFloat.of((lambda a, b: op(b, a)) if swap else op, self, o)
        return f

    __add__ = _bin(operator.add)
    __radd__ = _bin(operator.add, swap=True)
    __sub__ = _bin(operator.sub)
    __rsub__ = _bin(operator.sub, swap=True)
    __mul__ = _bin(operator.mul)
    __rmul__ = _bin(operator.mul, swap=True)
    __truediv__ = _bin(operator.truediv)
    __rtruediv__ = _bin(operator.truediv, swap=True)
    __pow__ = _bin(operator.pow)
    __rpow__ = _bin(operator.pow, swap=True)
    del _bin

    def __neg__(self):
        return SymFloat.of(lambda a: -a, self)

    def __repr__(self):
        return f"SymFloat({float.__float__(self)!r})"


def _val(x):
    return x._v if isinstance(x, SymInt) else int(x)


def _as_sym(x):
    """x as a SymInt even when it is a plain int (for the reflected divisions)."""
    return x if isinstance(x, SymInt) else SymInt(_val(x), Poly.const(_val(x)))


def _plain(a):
    return a._v if isinstance(a, SymInt) else float.__float__(a) if isinstance(a, SymFloat) else a


def evaluate(x, env):
    """x for the sizes `env`: SymInts and SymFloats inside tuples, lists, dicts and slices
    become numbers; anything else is returned as it is."""
    if isinstance(x, SymInt):
        return x.poly(env)
    if isinstance(x, SymFloat):
        return x.fn(env)
    t = x.__class__
    if t is tuple or t is list:
        return t(evaluate(a, env) for a in x)
    if t is dict:
        return {k: evaluate(a, env) for k, a in x.items()}
    if t is slice:
        return slice(evaluate(x.start, env), evaluate(x.stop, env), evaluate(x.step, env))
    return x


def numbers(x):
    """x with every SymInt / SymFloat inside (nested as for `evaluate`) as its plain value
    now: what an op's NumPy forward is handed while a capture records the formulas."""
    if isinstance(x, SymInt):
        return x._v
    if isinstance(x, SymFloat):
        return float.__float__(x)
    t = x.__class__
    if t is tuple or t is list:
        return t(numbers(a) for a in x)
    if t is dict:
        return {k: numbers(a) for k, a in x.items()}
    if t is slice:
        return slice(numbers(x.start), numbers(x.stop), numbers(x.step))
    return x


def contains_symbolic(x):
    if isinstance(x, (SymInt, SymFloat)):
        return True
    t = x.__class__
    if t is tuple or t is list:
        return any(contains_symbolic(a) for a in x)
    if t is dict:
        return any(contains_symbolic(a) for a in x.values())
    if t is slice:
        return any(contains_symbolic(a) for a in (x.start, x.stop, x.step))
    return False


def symbols_in(x, out=None):
    """The symbol names SymInts inside `x` (nested as for `evaluate`) use."""
    out = set() if out is None else out
    if isinstance(x, SymInt):
        out.update(x.poly.symbols())
    elif isinstance(x, (tuple, list)):
        for a in x:
            symbols_in(a, out)
    elif isinstance(x, dict):
        for a in x.values():
            symbols_in(a, out)
    elif isinstance(x, slice):
        symbols_in((x.start, x.stop, x.step), out)
    return out


def bare_symbol(d):
    """The symbol name when size d is one symbol alone (s0, not 2*s0 or s0 + 1), else None:
    the dims a call's sizes are read off."""
    if isinstance(d, SymInt) and len(d.poly.terms) == 1:
        (mono, coef), = d.poly.terms.items()
        if len(mono) == 1 and coef == 1:
            return mono[0]
    return None


def program_symbols(program):
    """The symbol names the shapes and attributes of `program` (a kernel body) use, sorted:
    the size arguments its generated code takes, in this order."""
    out = set()
    for v in program.defined():
        symbols_in(tuple(v.shape), out)
    for ins in program.instrs:
        symbols_in(ins.attrs, out)
    return sorted(out, key=lambda s: (len(s), s))
