"""Each op's compiler knowledge is one record beside its Function (core/rules.py): the
checks that the readers (fusion, remat, codegen, viz) can rely on it."""
import pathlib

import tinytensor
from tinytensor.compiler.ir import Instr, Value
from tinytensor.compiler.passes import lower
from tinytensor.core.function import Function
from tinytensor.core.rules import NONE, rule_of
from tinytensor.dtypes import float32
from tinytensor.viz.annotate import op_flops

ROOT = pathlib.Path(tinytensor.__file__).parent


def _functions():
    seen, todo = [], [Function]
    while todo:
        c = todo.pop()
        todo += c.__subclasses__()
        seen.append(c)
    return seen


def test_every_op_a_kernel_may_hold_has_c_or_is_written_as_steps_that_have():
    fusible = [fn for fn in _functions() if rule_of(fn).fuses]
    assert len(fusible) >= 35
    for fn in fusible:
        rule = rule_of(fn)
        if rule.c is not None:
            continue
        assert rule.in_kernel, f"{fn.__name__}: fusible, with neither C nor in-kernel steps"
        x = Value((4, 8), float32)
        attrs = {"approximate": "tanh"} if fn.__name__ == "Gelu" else {}
        for a in ([attrs, {"approximate": "none"}] if attrs else [attrs]):
            steps = lower.steps(Instr(op=fn.name, fn=fn, inputs=[x], outputs=[Value((4, 8), float32)],
                                      attrs=a), {})
            assert steps and all(rule_of(i.fn).c is not None for i in steps), (fn.__name__, a)


def test_ops_of_one_name_count_the_same_flops():
    # tt.viz counts a node by its Function's rule, op_flops(name, ...) by the name's: equal
    meta_in, meta_out = [((2, 3, 4), float32.np), ((2, 3, 4), float32.np)], [((2, 3, 4), float32.np)]
    by_name = {}
    for fn in _functions():
        if fn.name is None or rule_of(fn) is NONE:
            continue
        try:
            n = op_flops(fn.name, {}, meta_in, meta_out, fn)
        except (IndexError, KeyError, TypeError, ValueError):
            continue   # a rule of another arity of inputs
        by_name.setdefault(fn.name, set()).add(n)
    assert {k: v for k, v in by_name.items() if len(v) > 1} == {}
    assert by_name["softmax"] == {5 * 24} and by_name["reshape"] == {0}


def test_the_tanh_gelus_constant_is_written_once():
    hits = [str(p.relative_to(ROOT.parent)) for d in ("tinytensor", "nn", "models")
            for p in sorted((ROOT.parent / d).rglob("*.py")) if "0.044715" in p.read_text()]
    assert hits == ["tinytensor/ops/elementwise.py"]
    assert (ROOT / "ops" / "elementwise.py").read_text().count("0.044715") == 1


def test_every_op_with_c_renders_it_for_each_dtype_it_fuses_for():
    # (the former keep-alive `set(FUSIBLE) == set(EMIT)`: now the expression is the rule's)
    from tinytensor.compiler.codegen import emit
    from tinytensor.dtypes import from_any
    attrs = {"PowScalar": [{"exponent": p} for p in (1, 2, 0.5, -1)]}
    n = 0
    for fn in _functions():
        rule = rule_of(fn)
        if rule.c is None:
            continue
        for name in rule.fuses or ("float32", "float64"):
            dt = from_any(name)
            for a in attrs.get(fn.__name__, [{}]):
                ins = Instr(op=fn.name, fn=fn, inputs=[Value((3,), dt) for _ in range(3)],
                            outputs=[Value((3,), dt)], attrs=a)
                got = emit.expr(ins, ["x0", "x1", "x2"], emit.CTYPE[name])
                assert "x0" in got and "{" not in got, (fn.__name__, name, got)
                n += 1
    assert n > 100
