"""The differential fuzzer of tt.compile (issue 22 §7): a seeded slice of random programs must
pass on both backends, and the fuzzer itself must catch a wrong compiler, shrink what it
catches and print it as a script that fails the same way.

The long run: `python tools/fuzz_compile.py --programs 2000` (README, Tests). Features off by
default are in one place, tools/lib/fuzz_programs.py KNOWN_BUGS, each with why."""
import dataclasses

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.tools.lib import fuzz_check
from tinytensor.tools.lib.fuzz_check import Mismatch
from tinytensor.tools.lib.fuzz_programs import DEFAULT, FEATURES, KNOWN_BUGS, Input, Op, Program, generate
from tinytensor.tools.lib.fuzz_run import fuzz, run_program, shrink

CI_PROGRAMS = 24     # about 1 s each on 2 cores, both backends


@pytest.mark.parametrize("seed", range(CI_PROGRAMS))
def test_a_random_program_compiled_is_eager(seed):
    failures = fuzz([seed], DEFAULT, ("numpy", "c"))
    assert not failures, "\n\n".join(f.report() for f in failures)


def test_known_bugs_name_features_and_stay_out_of_the_default():
    assert set(KNOWN_BUGS) <= set(FEATURES)
    assert not DEFAULT & set(KNOWN_BUGS)
    assert all(why.startswith("found by") for why in KNOWN_BUGS.values())


def test_a_feature_switched_off_draws_none_of_its_ops():
    drawn = set()
    for seed in range(300):
        prog = generate(seed, DEFAULT - {"matmul"})
        drawn |= {op.feature for op in prog.ops}
        assert all(op.feature != "matmul" and "@" not in op.fmt for op in prog.ops)
        assert all(op.feature in DEFAULT for op in prog.ops)
    assert {"elementwise", "reduce", "softnorm", "movement", "indexing", "loss", "scalar_arg",
            "outside_tape", "alias", "neg_zero"} <= drawn
    everything = {op.feature for s in range(300) for op in generate(s, frozenset(FEATURES)).ops}
    assert "outside_tape" in everything


def test_the_calls_cover_the_issue_s_list():
    calls = [c for s in range(100) for c in generate(s, frozenset(FEATURES)).calls]
    assert {c.get("layout") for c in calls} == {None, "strided", "transposed"}
    assert any(c.get("grads") for c in calls) and any(c.get("alias") for c in calls)
    modes = {generate(s).mode for s in range(100)}
    assert modes == {"forward", "backward", "grad", "outer"}


def _program(ops, outputs, mode="forward", calls=None):
    return Program(seed=0, dtype="float32", mode=mode,
                   inputs=[Input("x0", "arg", (3, 4)), Input("p0", "param", (4,))],
                   ops=ops, outputs=outputs,
                   calls=calls or [{"seed": 1}, {"seed": 1}, {"seed": 2}])


_CHAIN = [Op("v0", "({0} * {1})", ("x0", "p0"), True, "elementwise", shape=(3, 4)),
          Op("v1", "{0}.relu()", ("v0",), True, "elementwise", shape=(3, 4)),
          Op("v2", "({0} + 0.5)", ("v1",), True, "elementwise", shape=(3, 4)),
          Op("v3", "{0}.tanh()", ("x0",), False, "elementwise", shape=(3, 4))]


def _frozen_compile(fn, backend="numpy", **_):
    """A compiler that keeps its first call's results, as a value computed outside the tape
    is kept: what the fuzzer exists to catch."""
    first = []

    def call(*args):
        if not first:
            first.append(fn(*args))
        return first[0]
    return call


def test_a_frozen_result_is_caught_at_the_call_with_new_values_and_shrunk(monkeypatch):
    monkeypatch.setattr(tt, "compile", _frozen_compile)
    prog = _program(_CHAIN, ["v2", "v3"])
    kind, message = run_program(prog, "numpy")
    assert kind == "mismatch" and message.startswith("call 2 (seed 2)"), message
    small, message = shrink(prog, "numpy", kind, message)
    assert len(small.ops) <= 1 and len(small.outputs) == 1 and len(small.calls) == 2, small
    # the report is a script that fails the same way when run
    source = small.source("numpy")
    with pytest.raises(Mismatch, match="call 1 "):
        exec(compile(source, "<report>", "exec"), {})


def test_an_exactly_rounded_program_must_be_bitwise(monkeypatch):
    real = tt.compile

    def one_ulp_off(fn, backend="numpy", **kw):
        compiled = real(fn, backend=backend, **kw)

        def call(*args):
            out = compiled(*args)
            nudged = np.nextafter(out[0].data, np.inf).astype(out[0].data.dtype)
            return (tt.tensor(nudged),) + tuple(out[1:])
        return call
    monkeypatch.setattr(tt, "compile", one_ulp_off)
    exact = _program(_CHAIN[:3], ["v2"])
    kind, message = run_program(exact, "numpy")
    assert kind == "mismatch" and "not eager's bits" in message, message
    # on non-contiguous inputs too (feature layout_bits, on by default); off, only the 2x rule
    strided = dataclasses.replace(exact, calls=[{"seed": 1, "layout": "strided"}])
    assert exact.exact is True
    kind, message = run_program(strided, "numpy")
    assert kind == "mismatch" and "not eager's bits" in message, message
    loose = dataclasses.replace(strided, layout_bits=False)
    assert loose.exact == "contiguous" and run_program(loose, "numpy") is None
    # one ulp is within an inexact program's bound (2x eager's error + 4 ulps)
    assert run_program(_program(_CHAIN[3:], ["v3"]), "numpy") is None


def test_the_bound_is_twice_eager_s_error_against_float64():
    r = np.array([1.0, 2.0, 3.0])
    w = (r + [1e-3, 0, 0]).astype(np.float32)      # eager: 1e-3 off
    ok = (r + [0, 1.9e-3, 0]).astype(np.float32)
    bad = (r + [0, 0, 2.2e-3]).astype(np.float32)
    err = fuzz_check._error(w, r)
    fuzz_check._close("call 0", "result 0", ok, w, r, err, "float32")
    with pytest.raises(Mismatch, match="over 2x eager's error"):
        fuzz_check._close("call 0", "result 0", bad, w, r, err, "float32")
    nan = w.copy()
    nan[0] = np.nan
    with pytest.raises(Mismatch, match="non-finite values differ"):
        fuzz_check._close("call 0", "result 0", nan, w, r, err, "float32")


def test_a_compiled_function_that_raises_is_a_failure_and_names_the_call(monkeypatch):
    real = tt.compile

    def raises_on_replay(fn, backend="numpy", **kw):
        compiled, calls = real(fn, backend=backend, **kw), []

        def call(*args):
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("replay broke")
            return compiled(*args)
        return call
    monkeypatch.setattr(tt, "compile", raises_on_replay)
    kind, message = run_program(_program(_CHAIN[:1], ["v0"]), "c")
    assert kind == "raised"
    assert message.startswith("call 1 (seed 1): the compiled function raised RuntimeError")


def test_an_invalid_program_blames_the_generator_not_the_compiler():
    bad = _program([Op("v0", "({0} @ {1})", ("x0", "p0"), False, "matmul", shape=(3,)),
                    Op("v1", "({0} + {1})", ("v0", "x0"), True, "elementwise", shape=(3,))],
                   ["v1"])
    kind, message = run_program(bad, "numpy")
    assert kind == "invalid program" and "eager raised" in message


def test_leaves_held_across_calls_keep_their_values():
    prog = _program(_CHAIN[:2], ["v1"], mode="backward",
                    calls=[{"seed": 1}, {"seed": 2, "grads": True}, {"seed": 3, "layout": "strided"}])
    assert prog.leaves() == ["p0"]
    assert run_program(prog, "numpy") is None
    assert run_program(dataclasses.replace(prog, mode="grad"), "c") is None


def test_the_long_run_program_fuzzes_and_lists_its_features(capsys):
    from tinytensor.tools import fuzz_compile
    assert fuzz_compile.main(["--programs", "2", "--seed", "3", "--backends", "numpy",
                              "--progress-every", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 programs x 1 backends" in out
    # stdout is not a terminal here (a log): a plain progress line per program asked for
    assert "fuzz: 1/2 programs (seeds 3-3), 0 failures" in out
    assert "fuzz: 2/2 programs (seeds 3-4), 0 failures" in out
    assert fuzz_compile.main(["--list-features"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in FEATURES) and listed.count("off by default") == len(KNOWN_BUGS)
    with pytest.raises(SystemExit, match="unknown features"):
        fuzz_compile.main(["--enable", "no_such_feature"])


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_a_bitwise_difference_is_reported_at_its_element(shape):
    w = np.zeros(shape, np.float32)
    g = w.copy()
    g.reshape(-1)[-1] = -0.0
    with pytest.raises(Mismatch, match=r"at 1 of \d+ elements; at \(%s\): compiled" % (
            "" if not shape else "1, 2")):
        fuzz_check._bitwise("call 0", "result 0", g, w)


# seed 100157: kl_div of a row with itself, ~0 (-5.5e-17), which C's exp and log (an ulp
# from NumPy's) put at 3e-8: the floor counts ulps of the values it was computed from
_KL = Program(seed=100157, dtype="float32", mode="forward",
              inputs=[Input("p0", "param", (1,)), Input("x0", "arg", (1, 3)),
                      Input("x1", "arg", (3, 2))],
              ops=[Op("v0", "({0} @ {1})", ("p0", "x0"), False, "matmul", shape=(3,)),
                   Op("v1", "F.kl_div({0}.log_softmax(dim=-1), {0}.softmax(dim=-1), "
                            "reduction='batchmean')", ("v0",), False, "loss", shape=()),
                   Op("v2", "(({1} * 1000.0) @ {2})", ("v0", "x0", "x1"), False, "matmul",
                      shape=(1, 2))],
              outputs=["v1", "v2"], calls=[{"seed": 157000}])


def test_the_floor_counts_the_values_a_result_was_computed_from(monkeypatch):
    assert run_program(dataclasses.replace(_KL, ops=_KL.ops[:2], outputs=["v1"]), "c") is None
    real = tt.compile

    def off_by(delta, k):      # a compiler whose result k is `delta` away from the truth
        def compile_(fn, backend="numpy", **kw):
            compiled = real(fn, backend=backend, **kw)

            def call(*args):
                out = list(compiled(*args))
                out[k] = tt.tensor(out[k].detach().numpy() + np.float32(delta))
                return tuple(out)
            return call
        return compile_
    # 1e-5 on a result whose inputs are O(1) is no rounding: caught, although the call's
    # other result is O(1e3) (its floor is its own: the floor is not the call's largest value)
    monkeypatch.setattr(tt, "compile", off_by(1e-5, 0))
    kind, message = run_program(_KL, "numpy")
    assert kind == "mismatch" and "result 0" in message and "over 2x eager's error" in message
    # an ulp or two of what it was computed from passes
    monkeypatch.setattr(tt, "compile", off_by(3e-7, 0))
    assert run_program(_KL, "numpy") is None
