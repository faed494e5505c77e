"""Every case of the op test tables (the one-line-per-case files that `oracle.check` and
`cases.check_double` compare with torch), run through tt.compile at two different inputs
of one signature and compared with eager: outputs, and the gradient of every float input
(taken with tt.grad inside the compiled step, so the captured backward is checked too).

The second call replays the program captured on the first: an op that computed part of
its result from values outside the tape (the bug class of issue 22) answers with the
first call's values there. The second inputs keep the first ones' domain: random inputs
are redrawn from another seed in the same range, and fixed arrays (ties, zeros, infinities,
index arrays) are permuted, so every special value lands somewhere else. A case whose
capture refuses (CaptureError: the op reads values into Python, or has a data-dependent
size) passes when the refusal names the user's line; anything else must equal eager.

Cases are gathered from the tables of the test modules themselves, so a case added there
is compiled here too. All run on backend="numpy" (~880 cases, 5-10 s); every C_EVERY-th on
backend="c" (gcc takes ~0.5 s a program there; the C runner executes the same NumPy
forwards for every op it does not fuse, and test_replay_values.py runs each value-dependent
op on "c")."""
import importlib
import re

import numpy as np
import pytest
from _pytest.mark.structures import ParameterSet

import tinytensor as tt
from tinytensor.compiler import CaptureError
from tinytensor.compiler.capture import flatten_tensors

# the table modules (tests/tinytensor/test_*.py) and their tables: name -> how to read it
MODULES = ["test_activations", "test_conv", "test_cumulative", "test_diagonal", "test_einsum_repeated",
           "test_elementwise", "test_indexing", "test_interpolate", "test_linalg", "test_losses_more",
           "test_math_functions", "test_movement", "test_pooling", "test_reduce", "test_scatter",
           "test_shape_ops", "test_stats"]
C_EVERY = 80   # gcc takes ~0.5 s a program on a busy 2-core machine


def _cases():
    """(id, fn(m, *xs), input specs, compare_with_torch keywords) of every table case."""
    out = []
    for mod_name in MODULES:
        mod = importlib.import_module(f"tests.tinytensor.{mod_name}")
        for attr, table in vars(mod).items():
            if attr.startswith("_") or attr in ("ERRORS", "BAD"):
                continue
            if isinstance(table, list):
                for p in table:
                    if isinstance(p, ParameterSet) and len(p.values) >= 2 and callable(p.values[0]) \
                            and isinstance(p.values[1], list):
                        kw = p.values[2] if len(p.values) > 2 and isinstance(p.values[2], dict) else {}
                        out.append((f"{mod_name}.{p.id}", p.values[0], p.values[1], kw))
            elif isinstance(table, dict):
                for name, v in table.items():
                    if isinstance(v, tuple) and len(v) == 2 and callable(v[0]) and isinstance(v[1], list):
                        out.append((f"{mod_name}.{name}", v[0], v[1], {}))
                    elif attr == "UNARY" and isinstance(v, tuple) and callable(v[0]):
                        out.append((f"{mod_name}.{name}", v[0], [(3, 4)], dict(low=v[1], high=v[2])))
                    elif attr == "BINARY" and callable(v):
                        out.append((f"{mod_name}.{name}", v, [(3, 1, 4), (2, 4)], {}))
                    elif attr == "SWEEP" and callable(v):
                        for dim, keep in ((None, False), (1, True), ((0, 2), False)):
                            out.append((f"{mod_name}.{name}-{dim}-{keep}",
                                        (lambda f, d, k: lambda m, x: f(m, x, d, k))(v, dim, keep),
                                        [(3, 4, 5)], dict(low=0.2)))
    return out


CASES = _cases()


def _arrays(specs, kw, call):
    """The arrays (or other arguments) of one call: call 0 as the table says, call 1 new
    values of the same kind."""
    rng = np.random.default_rng(100 + call)
    low, high = kw.get("low", -2.0), kw.get("high", 2.0)
    out = []
    for spec in specs:
        if isinstance(spec, tuple) and all(isinstance(s, int) for s in spec):
            out.append(rng.uniform(low, high, size=spec))
        elif isinstance(spec, np.ndarray):
            a = spec.astype(np.float64) if spec.dtype.kind == "f" else spec
            if call and a.size > 1:
                a = rng.permutation(a.reshape(-1)).reshape(a.shape)
            out.append(a.copy())
        else:
            out.append(spec)
    return out


def _tensors(arrays):
    return [tt.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
            for a in arrays]


def _step(fn):
    """fn's outputs, then d(sum of output * cos-pattern cotangent)/d(each float input)."""
    def step(*xs):
        outs = fn(tt, *xs)
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        outs = tuple(o for o in outs if isinstance(o, tt.Tensor))
        diff = [x for x in xs if isinstance(x, tt.Tensor) and x.requires_grad]
        floats = [o for o in outs if o.requires_grad]
        if not diff or not floats:
            return outs
        loss = sum((o * tt.cos(tt.arange(o.numel(), dtype=o.dtype).reshape(o.shape))).sum() for o in floats)
        grads = tt.grad(loss, diff, allow_unused=True)
        return outs + tuple(g if g is not None else tt.zeros_like(x) for g, x in zip(grads, diff))
    return step


def _same(got, want, what):
    got, want = flatten_tensors(got), flatten_tensors(want)
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert (g.dtype, tuple(g.shape)) == (w.dtype, tuple(w.shape)), f"{what}: output {k}"
        a, b = g.data, w.data
        if a.tobytes() == b.tobytes():   # the common case, and cheap
            continue
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True,
                                       err_msg=f"{what}: output {k}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: output {k}")


def _eager(step, arrays):
    try:
        return step(*_tensors(arrays)), None
    except Exception as e:   # noqa: BLE001 (an input the op refuses: the compiled run must too)
        return None, e


def check_compiled(fn, specs, kw, backend):
    """The first call captures (it runs eagerly and returns eager's result, which the
    interpreter tests check); the second replays and must equal eager on its inputs."""
    step = _step(fn)
    calls = [_arrays(specs, kw, 0), _arrays(specs, kw, 1)]
    want1, err = _eager(step, calls[1])
    if err is not None:   # the permuted index arrays broke a rule (sorted offsets): keep them
        calls[1] = [b if isinstance(b, np.ndarray) and b.dtype.kind == "f" else a
                    for a, b in zip(calls[0], calls[1])]
        want1, err = _eager(step, calls[1])
        if err is not None:
            pytest.skip(f"eager refuses the table's inputs here: {err}")
    compiled = tt.compile(step, backend=backend)
    try:
        compiled(*_tensors(calls[0]))
    except CaptureError as e:   # refused: it must say where, in the user's code
        assert re.search(r"test_\w+\.py:\d+", str(e)), str(e)
        return
    got1 = compiled(*_tensors(calls[1]))
    assert len(compiled.programs) == 1, "the second call compiled again instead of replaying"
    _same(got1, want1, "second call (a replay)")


@pytest.mark.parametrize("name,fn,specs,kw", [pytest.param(*c, id=c[0]) for c in CASES])
def test_table_case_compiled_numpy(name, fn, specs, kw):
    check_compiled(fn, specs, kw, "numpy")


@pytest.mark.parametrize("name,fn,specs,kw", [pytest.param(*c, id=c[0]) for c in CASES[::C_EVERY]])
def test_table_case_compiled_c(name, fn, specs, kw):
    check_compiled(fn, specs, kw, "c")


def test_the_tables_are_found():
    """The gathering still sees the tables (a renamed table would silently drop out)."""
    mods = {c[0].split(".")[0] for c in CASES}
    assert mods == set(MODULES), set(MODULES) - mods
    assert len(CASES) > 400
