"""Runs one fuzz program (tools/lib/fuzz_programs.py) eager and compiled, call after call, and
says where they part: `check` raises a Mismatch naming the call, the result and the numbers.

The rule (issue 22 §7): an exactly rounded program gives eager's bits; any other is within 2x
eager's own error against a float64 reference, the same program run eagerly in float64 (for a
float64 program, eager's error is estimated from its float32 run, scaled by the two epsilons),
plus a floor of a few ulps of the largest value the result was computed from (its operands
and intermediate results, in the float64 run). Eager's error is its worst at the
values and at two draws of them one float32 ulp away; where eager itself has no two correct
digits (rounding noise: x - x, the sum of a normalised row) the factor is 8, not 2."""
import numpy as np

import tinytensor as tt
from tinytensor.core.function import Function

ULPS = 4     # the floor: within this many ulps of the call's largest result passes
NOISE = 8    # the factor over eager's error for a result that is rounding noise in eager


class Mismatch(AssertionError):
    """The compiled function and eager disagree (or only one of them raised)."""


class InvalidProgram(Exception):
    """Eager itself refuses the program: a fault of the generator, not of the compiler."""


def check(program, inputs, *, mode, dtype, exact, backend, calls):
    """Compile `program(*leaves)` on `backend` and call it once per entry of `calls`, each
    time against eager on the same values.

    inputs: name -> ("arg", shape, requires_grad) | ("param", shape) | ("index", shape, high)
    | ("scalar",); params are the leaves the step closes over (the compiled step keeps its
    own; eager gets fresh ones with the same values), the others its arguments, in order.
    exact: True (eager's bits on every call), "contiguous" (on calls with contiguous inputs;
    within 2x eager's error on the others) or False (within 2x eager's error).
    mode: "forward" | "backward" (the step calls loss.backward(); leaves' .grads compared) |
    "grad" (the step returns tt.grad's) | "outer" (.backward() on the compiled result).
    calls: dicts with "seed" (the values), and optionally "layout" ("strided" or
    "transposed": non-contiguous inputs), "grads" (leaves hold a .grad first), "alias" ((a,
    b): a's tensor passed for b too), "scalar" (the value of scalar arguments), "nan" (NaN
    among the float values)."""
    leaves = {n: tt.tensor(np.zeros(s[1], dtype), requires_grad=True)
              for n, s in inputs.items() if s[0] == "param"}
    compiled = tt.compile(program(*leaves.values()), backend=backend)
    held = []    # results of earlier calls, which later calls must leave alone
    for n, call in enumerate(calls):
        values = draw(inputs, call, dtype)
        where = f"call {n} ({describe(call)})"
        try:
            want = run(program, None, inputs, values, call, mode)
        except Exception as e:
            raise InvalidProgram(f"{where}: eager raised {type(e).__name__}: {e}") from e
        try:
            got = run(compiled, leaves, inputs, values, call, mode)
        except Exception as e:
            raise Mismatch(f"{where}: the compiled function raised {type(e).__name__}: {e}") from e
        _same_structure(where, got, want)
        if exact is True or (exact == "contiguous" and not call.get("layout")):
            for (label, g), (_, w) in zip(got, want):
                _bitwise(where, label, g, w)
        else:
            with _Magnitudes() as mags:
                ref = run(program, None, inputs, _cast(values, np.float64), call, mode, mags)
            # eager's error: its worst over these values and two draws of them one ulp away
            # in float32 (a result that is rounding noise, x - x or the sum of a normalised
            # row, is as noisy one ulp away), scaled to float64 for a float64 program
            runs = [] if dtype == "float64" else [want]
            for k in range(3 if dtype == "float64" else 2):
                near = _cast(values, np.float32) if k == 0 and dtype == "float64" else \
                    _nudge(values, call.get("seed", 0) * 3 + k)
                runs.append(run(program, None, inputs, near, call, mode))
            scale = 1.0 if dtype == "float32" else \
                np.finfo(np.float64).eps / np.finfo(np.float32).eps
            # the floor's scale, per result: the largest value it was computed from, so that
            # a result whose true value is ~0 (kl_div of a row with itself, the gradient of a
            # softmax's sum) may carry an ulp or two of what cancelled, and no more
            for k, ((label, g), (_, w), (_, r)) in enumerate(zip(got, want, ref)):
                err_e = max(_error(e[k][1], r) for e in runs) * scale
                _close(where, label, g, w, r, err_e, dtype, mags.sizes[k])
        for label, kept, copy in held:
            if kept.tobytes() != copy.tobytes():
                raise Mismatch(f"{where}: changed {label} of an earlier call, which the caller "
                               f"still holds")
        held = [(f"{label} of {where}", g, g.copy()) for label, g in got if g is not None]


def draw(inputs, call, dtype):
    """name -> this call's value: NumPy arrays in `dtype` (int64 for indices), or floats."""
    rng = np.random.default_rng(call.get("seed", 0))
    out = {}
    for name, spec in inputs.items():
        kind = spec[0]
        if kind in ("arg", "param"):
            a = rng.standard_normal(spec[1]).astype(dtype)
            if call.get("nan") and a.size:
                a.reshape(-1)[rng.integers(0, a.size)] = np.nan
            out[name] = a
        elif kind == "index":
            out[name] = rng.integers(0, spec[2], spec[1]).astype(np.int64)
        else:
            out[name] = call["scalar"] if "scalar" in call else float(np.round(rng.uniform(-2, 2), 2))
    return out


def describe(call):
    parts = [f"seed {call.get('seed', 0)}"]
    if call.get("layout"):
        parts.append(f"{call['layout']} inputs")
    if call.get("grads"):
        parts.append("leaves holding a .grad")
    if call.get("alias"):
        parts.append("{} passed for {} too".format(*call["alias"]))
    if "scalar" in call:
        parts.append(f"scalar {call['scalar']!r}")
    if call.get("nan"):
        parts.append("NaN inputs")
    return ", ".join(parts)


def run(fn, leaves, inputs, values, call, mode, mags=None):
    """[(label, array or None)]: the results of one call, then the leaves' .grads. `leaves`
    None: eager, `fn` is the program and gets fresh leaves; else fn is the compiled step and
    `leaves` the ones it closes over, given this call's values. `mags`, a `_Magnitudes`
    active during the call, is given each result's floor scale (`mags.sizes`)."""
    layout = call.get("layout")
    grad_rng = np.random.default_rng(call.get("seed", 0) + 7919)
    if leaves is None:
        made = {n: tt.from_numpy(_layout(values[n], layout)).requires_grad_()
                for n, s in inputs.items() if s[0] == "param"}
        fn = fn(*made.values())
    else:
        made = leaves
        for n, p in made.items():
            p.data = _layout(values[n], layout)
            p.grad = None
    args, tracked = {}, dict(made)
    for n, s in inputs.items():
        if s[0] == "arg":
            args[n] = tt.from_numpy(_layout(values[n], layout))
            if s[2]:
                args[n].requires_grad_()
                tracked[n] = args[n]
        elif s[0] == "index":
            args[n] = tt.from_numpy(values[n].copy())
        elif s[0] == "scalar":
            args[n] = values[n]
    if call.get("alias"):
        a, b = call["alias"]
        args[b] = args[a]
        tracked.pop(b, None)
    if call.get("grads"):
        for n, t in tracked.items():
            t.grad = tt.from_numpy(grad_rng.standard_normal(t.shape).astype(t.data.dtype))
    out = fn(*args.values())
    out = out if isinstance(out, tuple) else (out,)
    if mode == "outer":
        out[0].backward()
    results = [(f"result {k}", None if t is None else np.array(t.data)) for k, t in enumerate(out)]
    if mags is not None:   # a result: what it was computed from; a .grad: the whole call
        mags.sizes = [mags.result(t) if t is not None else 0.0 for t in out]
    if mode in ("backward", "outer"):
        results += [(f"{n}.grad", None if t.grad is None else np.array(t.grad.data))
                    for n, t in tracked.items()]
        if mags is not None:
            mags.sizes += [max(mags.everything, _largest(t.grad.data) if t.grad is not None else 0.0)
                           for t in tracked.values()]
    return results


class _Magnitudes:
    """While active (a `with` block), follows the ops tinytensor runs: `of(t)` is the largest
    finite |value| among tensor t, the tensors it was computed from and theirs, back to the
    inputs; `everything` the largest over every op (a backward's too)."""

    def __enter__(self):
        self.up, self.everything, self.sizes = {}, 0.0, []
        self._apply = Function.__dict__["apply"]
        real = self._apply.__func__

        def apply(cls, *inputs, **attrs):
            out = real(cls, *inputs, **attrs)
            above = max([self.of(t) for t in inputs], default=0.0)
            for r in out if isinstance(out, tuple) else (out,):
                m = max(above, _largest(r.data))
                self.up[id(r)] = (r, m)      # the tensor kept, so that its id stays its own
                self.everything = max(self.everything, m)
            return out
        Function.apply = classmethod(apply)
        return self

    def __exit__(self, *exc):
        Function.apply = self._apply
        return False

    def of(self, t):
        found = self.up.get(id(t))
        return found[1] if found is not None and found[0] is t else _largest(t.data)

    def result(self, t):
        """A result's scale: `of(t)`, or for a tensor no op made (tt.grad's, made by the
        backward on arrays) the largest value of the call."""
        found = self.up.get(id(t))
        return found[1] if found is not None and found[0] is t else max(self.everything, _largest(t.data))


def _largest(a):
    """The largest finite |value| of a float array (0 for any other)."""
    a = np.asarray(a)
    if a.dtype.kind != "f" or not a.size:
        return 0.0
    a = np.abs(a[np.isfinite(a)])
    return float(a.max()) if a.size else 0.0


def _layout(a, layout):
    """A copy of `a` in the layout asked for: contiguous, a strided view into a buffer twice
    as wide, or the transpose of a contiguous array of the reversed shape."""
    a = np.array(a)
    if layout == "strided" and a.ndim:
        buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        buf[..., ::2] = a
        return buf[..., ::2]
    if layout == "transposed" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T
    return a


def _nudge(values, seed):
    """The float values in float32, each moved one ulp up or down at random."""
    rng = np.random.default_rng(seed)
    out = {}
    for n, v in values.items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            v = v.astype(np.float32)
            v = np.nextafter(v, np.where(rng.random(v.shape) < 0.5, -np.inf, np.inf)).astype(np.float32)
        out[n] = v
    return out


def _error(e, r):
    """max |e - r| over the elements finite in both (0 for no such element or no array)."""
    if e is None or e.dtype.kind != "f":
        return 0.0
    mask = np.isfinite(e) & np.isfinite(r)
    return float(np.abs(e.astype(np.float64)[mask] - r.astype(np.float64)[mask]).max()) if mask.any() else 0.0


def _cast(values, dtype):
    return {n: v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
            for n, v in values.items()}


def _same_structure(where, got, want):
    if [label for label, _ in got] != [label for label, _ in want]:
        raise Mismatch(f"{where}: compiled returned {[label for label, _ in got]}, eager "
                       f"{[label for label, _ in want]}")
    for (label, g), (_, w) in zip(got, want):
        if (g is None) != (w is None):
            raise Mismatch(f"{where}: {label} is {'None' if g is None else 'set'} compiled, "
                           f"{'None' if w is None else 'set'} eager")
        if g is not None and (g.shape != w.shape or g.dtype != w.dtype):
            raise Mismatch(f"{where}: {label} is {g.dtype}{list(g.shape)} compiled, "
                           f"{w.dtype}{list(w.shape)} eager")


def _bits(a):
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                         8: np.uint64}[a.dtype.itemsize])


def _bitwise(where, label, g, w):
    if g is None:
        return
    diff = _bits(g.reshape(-1)) != _bits(w.reshape(-1))
    if diff.any() and g.dtype.kind == "f":
        # which nan an op of two nans returns (sign, payload) is not even NumPy's own: its
        # vector loop and its scalar tail differ on one array; a nan must stay a nan
        diff &= ~(np.isnan(g.reshape(-1)) & np.isnan(w.reshape(-1)))
    if diff.any():
        at = np.unravel_index(int(diff.argmax()), g.shape)
        raise Mismatch(f"{where}: {label} is not eager's bits (an exactly rounded program) at "
                       f"{int(diff.sum())} of {diff.size} elements; at {tuple(map(int, at))}: "
                       f"compiled {g[at]!r}, eager {w[at]!r}")


def _close(where, label, g, w, r, err_e, dtype, size=0.0):
    """g (compiled) within 2x eager's error `err_e` against r (float64) plus the floor,
    ULPS ulps of the larger of r's largest magnitude and `size` (the largest value r was
    computed from)."""
    if g is None or g.dtype.kind != "f":
        if g is not None and not np.array_equal(g, w):
            raise Mismatch(f"{where}: {label} differs (integers): compiled {g!r}, eager {w!r}")
        return
    same = (np.isnan(g) == np.isnan(w)) & (np.isinf(g) == np.isinf(w))
    same &= ~np.isinf(w) | (np.sign(g) == np.sign(w))
    if not same.all():
        at = tuple(int(i) for i in np.argwhere(~same)[0]) if same.ndim else ()
        raise Mismatch(f"{where}: {label}: non-finite values differ; at {at}: compiled "
                       f"{g[at]!r}, eager {w[at]!r}")
    mask = np.isfinite(w) & np.isfinite(r)
    if not mask.any():
        return
    r64 = r.astype(np.float64)[mask]
    err_g = np.abs(g.astype(np.float64)[mask] - r64)
    scale = float(np.abs(r64).max())
    floor = ULPS * np.finfo(dtype).eps * max(scale, size)
    # a result eager gets without two correct digits is rounding noise (x - x, a normalised
    # row's sum): its error is as random as the rounding, so 2x is only a coin toss there
    bound = (NOISE if err_e >= 0.01 * scale else 2) * err_e + floor
    if err_g.max() > bound:
        k = int(err_g.argmax())
        raise Mismatch(f"{where}: {label}: compiled error {err_g.max():.3g} against the float64 "
                       f"reference, over 2x eager's error {err_e:.3g} + {ULPS} ulps ({floor:.3g}); "
                       f"worst element: compiled {g.astype(np.float64)[mask][k]!r}, eager "
                       f"{w.astype(np.float64)[mask][k]!r}, reference {r64[k]!r}")
