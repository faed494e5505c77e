"""Symbolic shapes while a step is captured with `tt.compile(dynamic=True)`.

Which dims are dynamic: every dim of size >= 2 of every tensor argument (and of every tensor
an argument object holds, such as a KV cache); dims of one size share one symbol (a batch
of 8 and a sequence of 8 are both s0, and a later call where they differ is a new
signature). A dim the step ties to a fixed size (the 64 input features of a Linear) is
found out and specialized back to its number, guarded: see below.

How an op's output shape becomes a formula of the symbols without a shape rule per op: the
op's own forward is run again ("shadow" runs) on small arrays at other sizes of the
symbols, and each output dim is fitted as a multilinear polynomial with integer
coefficients. With symbols s_1..s_n at captured values c_k, the shadow sizes are the 2^n
corners of {c_k, a_k} (a_k small primes: cheap, and unlike any size a model fixes), which
determine a multilinear polynomial exactly (B*T, B*nh, S+T, ...), plus one check point
{b_k} that must agree with the fit, so a shape that is not multilinear (T*T) or that
depends on the data (nonzero) is refused, never guessed. Shadow arrays of arguments are the
argument's data cycled to the shadow size (np.resize: valid token ids stay valid).

When an op fails at the shadow sizes where one symbol moved (a (B, 64) input times a
(64, 10) weight: the 64 is not free), that symbol is specialized: a guard pins it to its
captured value, the corners where it moved are dropped and the check point is recomputed.
Any other failure at a shadow size is an error naming the op, its module path and the line.
"""
import itertools
from fractions import Fraction

import numpy as np

from .. import random as _random
from ..core.function import _Ctx
from ..core.node import SAVED_CELL, SAVED_DATA
from .. import symbolic
from ..symbolic import _OPS, Guards, Poly, SymInt

# shadow sizes: primes, so a shadow size rarely equals a size the model fixes
_PRIMES = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67)
MAX_SYMBOLS = 4   # 2^4 + 1 shadow runs of every symbolic op


class _SavingCtx(_Ctx):
    to_save = ()

    def save_for_backward(self, *arrays):
        self.to_save = arrays


class Symbolic:
    """The symbolic side of one capture: symbols, guards, and per tensor its symbolic shape
    and its shadow arrays. `tape.symbolic` while a dynamic capture runs."""

    def __init__(self, fn_name):
        self.fn_name = fn_name
        self.values = {}          # symbol name -> captured value
        self.origin = {}          # symbol name -> 'arg 0 dim 1' (for messages)
        self.guards = Guards()
        self.guards.on_pin = self.pin
        self._guards_seen = 0     # guards checked against the shadow sizes so far
        # keyed by id(array): a backward unpacks a saved tensor as a new Tensor around the
        # same array, and an index tensor reaches its op as an array in the attributes
        self.shapes = {}          # id(array) -> symbolic shape (a tuple with SymInts)
        self.saved_shapes = {}    # id(side array a forward saved) -> symbolic shape
        self.keep = []            # tensors whose ids are keys above stay alive
        self.active = []          # symbols not specialized
        self.alt, self.check, self.sq = {}, {}, {}   # shadow sizes of each symbol
        self.corners = {}         # frozenset of moved symbols -> {id(array): shadow array}
        self.checkpoint = {}      # {id(array): shadow array} at the check sizes
        self.history = []         # (node, results) of every symbolic op, in order
        self.args = []            # (tensor, symbolic shape) of every argument registered
        self.dims = []            # (tensor number, dim, symbol, role) of every dynamic dim given

    # ---------------------------------------------------------------- arguments
    def symbol_for(self, size, where):
        """The symbol of a dynamic dim of `size` (one per distinct size)."""
        for name, v in self.values.items():
            if v == size:
                return name
        if len(self.values) == MAX_SYMBOLS:
            return None   # beyond that, dims stay static (2^n shadow runs per op)
        name = f"s{len(self.values)}"
        self.values[name] = size
        self.origin[name] = where
        self.active.append(name)
        used = set(self.values.values())
        free = [p for p in _PRIMES if p not in used and p not in self.alt.values()
                and p not in self.check.values()]
        self.alt[name], self.check[name], self.sq[name] = free[0], free[1], free[2]
        return name

    def add_argument(self, t, where, static=(), number=None):
        """Make the dims of argument tensor `t` (the `number`-th of the call) symbols,
        except those in `static` and those of size 0 or 1."""
        if id(t.data) in self.shapes:
            return
        shape = []
        for d, n in enumerate(t.data.shape):
            name = self.symbol_for(int(n), f"{where} dim {d}") if n >= 2 and d not in static else None
            if name is not None:
                self.dims.append((number, d, name, (t.ndim, d)))
            shape.append(SymInt(int(n), Poly.symbol(name)) if name else int(n))
        shape = tuple(shape)
        if not any(isinstance(d, SymInt) for d in shape):
            return
        self.shapes[id(t.data)] = shape
        self.keep.append(t)
        self.args.append((t, shape))

    def begin(self):
        """After every argument is registered: the shadow arrays of the arguments. A symbol
        several dims share (a batch equal to the length) gets one more point, moving it
        alone to a third size, so that a dim that is its square (B*T flattened) fits too."""
        self.corners = {frozenset(m): {} for r in range(1, len(self.active) + 1)
                        for m in itertools.combinations(self.active, r)}
        uses = {}
        for _, _, name, _ in self.dims:
            uses[name] = uses.get(name, 0) + 1
        for name in self.active:
            if uses.get(name, 0) > 1:
                self.corners.update({key: {} for key in self._square_keys(name)})
        for moved, shadows in self.corners.items():
            shadows.update(self._argument_shadows(self.env(moved)))
        self.checkpoint = self._argument_shadows(self.env(None))

    def _argument_shadows(self, env):
        return {id(t.data): np.resize(t.data, _at(shape, env)) for t, shape in self.args}

    def env(self, moved):
        """Sizes of a corner (`moved`: the symbols at their shadow size) or, for None, the
        check point."""
        if moved is None:
            return {s: (self.check[s] if s in self.active else v) for s, v in self.values.items()}
        return {s: (self.alt[s] if s in moved else self.sq[s] if s + SQUARE in moved else v)
                for s, v in self.values.items()}

    numbers = staticmethod(symbolic.numbers)

    def pinned_dims(self):
        """(tensor number, dim) of the argument dims whose symbol the step pinned to its
        value (tied to a fixed size, or turned into a number): static at the next capture,
        so that a batch that happens to equal such a size (16 rows of 16 features) is not
        tied to it by duck sizing, and keeps one program."""
        pinned = {s for s in self.values if s not in self.active}
        for (poly, op), result in self.guards.items.items():
            syms = poly.symbols()
            if op == "==" and result is True and len(syms) == 1 and len(poly.terms) <= 2 \
                    and poly.terms.get((syms[0],)) == 1:
                pinned.add(syms[0])
        # a symbol that dims of different roles share (a batch of 2 and 2 heads) may be
        # pinned by one of them only: none of them is learned. A role is a dim's place in a
        # tensor of its rank: the heads dim of every cached key and value is one role
        roles = {}
        for _, _, s, role in self.dims:
            roles.setdefault(s, set()).add(role)
        return frozenset((k, d) for k, d, s, _ in self.dims
                         if s in pinned and len(roles[s]) == 1 and k is not None)

    def shape_of(self, t):
        return self.shapes.get(id(t.data), t.data.shape)

    # ---------------------------------------------------------------- ops
    def on_node(self, node, results):
        """Give the results of a recorded op their symbolic shapes (see the module doc)."""
        if not self.corners:
            return
        if not (any(id(t.data) in self.shapes for t in node.inputs) or symbolic.contains_symbolic(node.attrs)
                or any(id(a) in self.shapes for a in _arrays(node.attrs))):
            # no input's shape and no attribute is a formula, so neither is any output's (a
            # shape read off the data is refused elsewhere): the shadows of the outputs are
            # the real arrays, whose shapes are right at every size (an optimizer update,
            # a weight's gradient, ... run once, not once per shadow size)
            return
        self.history.append((node, results))
        self._respect_guards()
        self._shadow_all(node, results)

    def _respect_guards(self):
        """Shadow sizes where a guard recorded so far does not hold (x[:, -16:] at T = 4
        recorded T - 16 < 0; a shadow T of 13 is fine, but a check at 20 would not be)
        compute what the step would never run there: the symbols of such a guard are
        pinned, so every shadow size left answers the step's comparisons as it did."""
        items = self.guards.items
        if len(items) == self._guards_seen:
            return
        self._guards_seen = len(items)
        bad = self._violated()
        for s in sorted(bad):
            if s in self.active and not self._rechoose(s):
                self.pin([s], self.history[:-1])
        self._guards_seen = len(self.guards.items)

    def _violated(self):
        """The active symbols of the guards some shadow size breaks."""
        envs = [self.env(None)] + [self.env(m) for m in self.corners]
        bad = set()
        for (poly, op), result in self.guards.items.items():
            syms = set(poly.symbols()) & set(self.active)
            if syms and any(_OPS[op](poly(env), 0) is not result for env in envs):
                bad |= syms
        return bad

    def _rechoose(self, s):
        """New shadow sizes for symbol s next to its captured value (where the step's
        comparisons are likelier to answer the same), the shadows of the corners moving it
        made again; False if none near it keeps every guard."""
        c = self.values[s]
        taken = set(self.values.values()) | {v for table in (self.alt, self.check, self.sq)
                                             for k, v in table.items() if k != s}
        near = [c + d for k in range(1, 13) for d in (-k, k) if c + d >= 2 and c + d not in taken]
        old = self.alt[s], self.check[s], self.sq[s]
        for a, b in itertools.combinations(near[:8], 2):
            self.alt[s], self.check[s] = a, b
            self.sq[s] = next(x for x in near if x not in (a, b))
            if s not in self._violated():
                try:
                    history = self.history[:-1]
                    for m in [m for m in self.corners if s in _moved(m)]:
                        self.corners[m] = self._replay(self.env(m), history)
                    self._recompute_checkpoint(history)
                    return True
                except Exception:   # noqa: BLE001 - an op refusing these sizes: try no more
                    break
        self.alt[s], self.check[s], self.sq[s] = old
        return False

    def _shadow_all(self, node, results):
        runs, failed = {}, {}
        for moved, shadows in self.corners.items():
            try:
                runs[moved] = self._run(node, shadows, self.env(moved))
            except Exception as e:   # noqa: BLE001 - any failure at a shadow size is looked at
                failed[moved] = e
        if failed:
            self._specialize(node, failed)
            runs = {m: r for m, r in runs.items() if m in self.corners}
        try:
            check = self._run(node, self.checkpoint, self.env(None))
        except Exception as e:   # noqa: BLE001
            shapes = ", ".join(str(tuple(self.checkpoint.get(id(t.data), t.data).shape)) for t in node.inputs)
            raise self._error(node, f"fails at the check sizes {self._sizes(None)} (inputs there "
                                    f"{shapes}; now {', '.join(str(tuple(self.shape_of(t))) for t in node.inputs)}): "
                                    f"{e}") from e
        outs, saved = check
        from .capture import CaptureError
        try:
            shapes = [self._fit(node, [a.shape for a in (runs[m][0][k] for m in runs)],
                                list(runs), r.data.shape, outs[k].shape, f"output {k}")
                      for k, r in enumerate(results)]
        except CaptureError:
            # perhaps a square (T * T): with points at a third size for every symbol, once
            if self._add_squares():
                return self._shadow_all(node, results)
            raise
        for k, r in enumerate(results):
            shape = shapes[k]
            if any(isinstance(d, SymInt) for d in shape):
                self.shapes[id(r.data)] = shape
            self.keep.append(r)
            for m, (o, _) in runs.items():
                self.corners[m][id(r.data)] = o[k]
            self.checkpoint[id(r.data)] = outs[k]
        for j, e in enumerate(node.saved or ()):
            if e[SAVED_CELL] is not None or j >= len(saved):
                continue   # a tensor's value, not an intermediate array
            real = e[SAVED_DATA]
            shape = self._fit(node, [runs[m][1][j].shape for m in runs], list(runs), real.shape,
                              saved[j].shape, f"saved array {j}")
            self.saved_shapes[id(real)] = shape
            for m, (_, sv) in runs.items():
                self.corners[m][id(real)] = sv[j]
            self.checkpoint[id(real)] = saved[j]

    def _square_keys(self, name):
        """The points moving `name` to its third size, each with any set of the others at
        their shadow size."""
        others = [x for x in self.active if x != name]
        return [frozenset({name + SQUARE, *m}) for r in range(len(others) + 1)
                for m in itertools.combinations(others, r)]

    def _add_squares(self):
        """Points at a third size for the active symbols that have none (begin() gives them
        only to symbols several dims share), their shadows replayed over the ops so far;
        False if every symbol has them already or the replay fails."""
        missing = [s for s in self.active if not any(s + SQUARE in m for m in self.corners)]
        if not missing:
            return False
        history = self.history[:-1]
        added = {}
        try:
            for name in missing:
                for key in self._square_keys(name):
                    added[key] = self._replay(self.env(key), history)
        except Exception:   # noqa: BLE001 - an op refusing the third size: no squares then
            return False
        self.corners.update(added)
        return True

    def _run(self, node, shadows, env):
        """(outputs, saved arrays) of node's forward on the shadow arrays at sizes `env`."""
        arrays = [shadows.get(id(t.data), t.data) for t in node.inputs]
        attrs = symbolic.evaluate(_shadow_attrs(node.attrs, shadows), env)
        ctx = _SavingCtx()
        rng = _random_state() if getattr(node.fn, "random", False) else None
        try:
            with np.errstate(all="ignore"):
                out = node.fn.forward(ctx, *arrays, **attrs)
        finally:
            if rng is not None:
                for dev, state in rng.items():
                    _random.set_rng_state(dev, state)
        out = out if isinstance(out, tuple) else (out,)
        return [np.asarray(a) if isinstance(a, np.generic) else a for a in out], ctx.to_save

    def _specialize(self, node, failed):
        """Pin the symbols whose moving made `node` fail; raise if that does not explain it."""
        while failed:
            counts = {s: sum(s in _moved(m) for m in failed) for s in self.active}
            s = max(counts, key=lambda s: counts[s])
            if not counts[s]:
                break
            self._pin_one(s)
            failed = {m: e for m, e in failed.items() if s not in _moved(m)}
            self._recompute_checkpoint(self.history[:-1])
        if failed:
            m, e = next(iter(failed.items()))
            raise self._error(node, f"fails at the shadow sizes {self._sizes(m)}: {e}")

    def pin(self, symbols, history=None):
        """Guards.on_pin: sizes handed to Python as numbers (int(T), str(T)) hold only at
        their captured values, so the shadow runs stop moving them from here on."""
        moved = [s for s in symbols if s in self.active]
        for s in moved:
            self._pin_one(s)
        if moved:
            self._recompute_checkpoint(self.history if history is None else history)

    def _pin_one(self, s):
        self.guards.add(Poly.symbol(s) - Poly.const(self.values[s]), "==", True)
        self.active.remove(s)
        self.corners = {m: sh for m, sh in self.corners.items() if s not in _moved(m)}

    def _recompute_checkpoint(self, history):
        self.checkpoint = self._replay(self.env(None), history)

    def _replay(self, env, history):
        """The shadow arrays at sizes `env` of the arguments and of every op in `history`."""
        shadows = self._argument_shadows(env)
        for node, results in history:
            outs, saved = self._run(node, shadows, env)
            for r, o in zip(results, outs):
                shadows[id(r.data)] = o
            for j, e in enumerate(node.saved or ()):
                if e[SAVED_CELL] is None and j < len(saved):
                    shadows[id(e[SAVED_DATA])] = saved[j]
        return shadows

    def _fit(self, node, corner_shapes, corners, real, check, what):
        if any(len(s) != len(real) for s in corner_shapes) or len(check) != len(real):
            raise self._error(node, f"{what} has a different number of dims at other sizes")
        out = []
        for d, n in enumerate(real):
            samples = {frozenset(): int(n)}
            samples.update({m: int(s[d]) for m, s in zip(corners, corner_shapes)})
            poly = self._multilinear({m: v for m, v in samples.items() if not _squared(m)})
            for name in {x[:-len(SQUARE)] for m in samples for x in m if x.endswith(SQUARE)}:
                if poly is not None:
                    poly = self._plus_square(poly, name, samples)
            if poly is None or poly(self.env(None)) != check[d]:
                raise self._error(node, f"{what} dim {d} ({n} now) is not a multilinear formula of "
                                        f"the dynamic sizes {self._names()}, or depends on the data "
                                        f"(at the sizes {self._sizes(None)} it is {check[d]})")
            out.append(SymInt.make(int(n), poly))
        return tuple(out)

    def _plus_square(self, poly, name, samples):
        """poly + q * (s - c) * (s - a), q multilinear in the other symbols, through the
        points that move s to its third size (zero at the corners, which poly fits); None
        where no integer q does."""
        c, a, x = self.values[name], self.alt[name], self.sq[name]
        mark, qs = name + SQUARE, {}
        for m, v in samples.items():
            if mark in m:
                q, r = divmod(v - poly(self.env(m)), (x - c) * (x - a))
                if r:
                    return None
                qs[frozenset(m - {mark})] = q
        q = self._multilinear(qs, [o for o in self.active if o != name])
        if q is None:
            return None
        sym = Poly.symbol(name)
        return poly + q * (sym - Poly.const(c)) * (sym - Poly.const(a))

    def _multilinear(self, samples, names=None):
        """The multilinear polynomial in `names` (the active symbols) through the corner
        samples (Möbius inversion over the corners, then expanded), or None if not integral."""
        names = self.active if names is None else names
        total = {}
        for r in range(len(names) + 1):
            for S in itertools.combinations(names, r):
                d = 0
                for q in range(r + 1):
                    for U in itertools.combinations(S, q):
                        d += (-1) ** (r - q) * samples[frozenset(U)]
                if not d:
                    continue
                term = {(): Fraction(d)}
                for s in S:   # times (x_s - c_s) / (a_s - c_s)
                    c, a = self.values[s], self.alt[s]
                    new = {}
                    for mono, coef in term.items():
                        k = coef / (a - c)
                        up = tuple(sorted(mono + (s,)))
                        new[up] = new.get(up, 0) + k
                        new[mono] = new.get(mono, 0) - k * c
                    term = new
                for mono, coef in term.items():
                    total[mono] = total.get(mono, 0) + coef
        if any(Fraction(c).denominator != 1 for c in total.values()):
            return None
        return Poly({m: int(c) for m, c in total.items()})

    def _names(self):
        return ", ".join(f"{s} ({self.origin[s]})" for s in self.active)

    def _sizes(self, moved):
        return ", ".join(f"{s}={v}" for s, v in self.env(moved).items() if s in self.active)

    def _error(self, node, what):
        from .capture import CaptureError, user_frame
        scope = f" in module {node.scope}" if getattr(node, "scope", "") else ""
        return CaptureError(
            f"tt.compile(dynamic=True): {self.fn_name}: op {node.name}{scope} (recorded at "
            f"{user_frame()}) {what}. Sizes a program can follow are whole-number formulas of "
            "the dynamic sizes (B*T, S+1, 2*C): build shapes with integer arithmetic on "
            "x.shape and with tensor ops, or compile this function with dynamic=False (one "
            "program per shape)")


SQUARE = "^2"   # a corner key's mark: the symbol moved alone to its third size


def _moved(m):
    """The symbols a corner key moves."""
    return {x[:-len(SQUARE)] if x.endswith(SQUARE) else x for x in m}


def _squared(m):
    return any(x.endswith(SQUARE) for x in m)


def _at(shape, env):
    return tuple(symbolic.evaluate(d, env) for d in shape)


def _shadow_attrs(attrs, shadows):
    """attrs with each array a tensor's (an index) replaced by that tensor's shadow."""
    def go(o):
        if isinstance(o, np.ndarray):
            return shadows.get(id(o), o)
        if isinstance(o, (tuple, list)) and not isinstance(o, SymInt):
            return type(o)(go(x) for x in o)
        return o
    return {k: go(a) for k, a in attrs.items()}


def _arrays(attrs):
    """The arrays inside attrs (index tensors' arrays), nested in tuples and lists too."""
    stack = list(attrs.values())
    while stack:
        o = stack.pop()
        if isinstance(o, np.ndarray):
            yield o
        elif isinstance(o, (tuple, list)):
            stack.extend(o)


def _random_state():
    return {dev: _random.get_rng_state(dev) for dev in list(_random._generators)}


# ---------------------------------------------------------------- at each call
def sizes_of(inputs, arrays):
    """{symbol: size} read off the arrays of the program inputs whose shape has a dim that
    is one symbol (the capture gave each dynamic dim of an argument its own), or None when
    the arrays disagree with the formulas (a size one formula fixes differs)."""
    env = {}
    for v, a in zip(inputs, arrays):
        for d, n in zip(v.shape, a.shape):
            name = symbolic.bare_symbol(d)
            if name is not None and env.setdefault(name, int(n)) != n:
                return None
    return env


def shapes_agree(inputs, arrays, env):
    """Whether every input's array has the shape its formulas give for `env`."""
    for v, a in zip(inputs, arrays):
        if len(v.shape) != a.ndim:
            return False
        for d, n in zip(v.shape, a.shape):
            if (d.poly(env) if isinstance(d, SymInt) else d) != n:
                return False
    return True
