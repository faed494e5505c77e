"""Sibling (horizontal) fusion: kernels of one elementwise loop shape that read a common
input, with no path from one to the other, are one kernel (one sweep over the input), and
an expression both compute is computed once. Every output keeps its bits."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler.codegen import c
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import dce, fuse

from ._programs import fused_instrs, interpreted, program_of
from .helpers import assert_bitwise, captured

rng = np.random.default_rng(0)
X = (rng.standard_normal((4, 8)) * 3).astype(np.float32)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def body_ops(kernel):
    return [i.op for i in kernel.attrs["body"].instrs]


def alone(program, inputs):
    """Each output of `program` computed by the kernels of a program of its own (no
    siblings to fuse with): the bits a sibling kernel must reproduce (tanh, exp are not
    NumPy's bits, only within twice its error: compare kernels with kernels)."""
    return [c.build(pipeline.lower(dce.run(program.replace(outputs=[v])), "c"))(inputs)[0]
            for v in program.outputs]


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_gelu_forward_and_backward_are_one_kernel_with_numpys_bits(dtype):
    x = tt.tensor(X.astype(dtype), requires_grad=True)
    g = tt.tensor(rng.standard_normal((4, 8)).astype(dtype))

    def step(x, g):
        y = F.gelu(x, approximate="tanh")
        y.backward(g)
        return y
    program, outs, arrays = captured(step, (x, g))
    fused = fuse.run(program).verify()
    assert [i.op for i in fused.instrs] == ["fused"]
    assert len(fused.instrs[0].outputs) == 2          # y and x.grad
    # the backward's tanh is the forward's expression (ops/elementwise.py Gelu._slope): one
    assert body_ops(fused.instrs[0]).count("tanh") == 1
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(arrays), alone(program, arrays))
    # the kernel's GELU, written as the ops of its NumPy forward, is eager's on NumPy
    assert_bitwise(interpreted(fused, arrays), outs)


def test_an_expression_both_siblings_compute_is_computed_once():
    def f(x, g):
        t = (0.7978846 * (x + 0.044715 * x * x * x)).tanh()   # the tanh GELU computes
        return F.gelu(x, approximate="tanh"), (1.0 - t * t) * g
    program, inputs = program_of(f, X, X * 0.5)
    fused = fuse.run(program).verify()
    [kernel] = fused_instrs(fused)
    assert body_ops(kernel).count("tanh") == 1
    assert body_ops(kernel).count("mul") == 8 and body_ops(kernel).count("add") == 2
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), alone(program, inputs))


def test_a_constant_product_is_shared_either_way_round_but_a_nan_constant_is_not():
    def f(x):
        return (x * 0.5).exp(), (0.5 * x).tanh(), (x * float("nan")).abs(), (float("nan") * x).sqrt()
    program, inputs = program_of(f, X)
    fused = fuse.run(program).verify()
    [kernel] = fused_instrs(fused)
    assert body_ops(kernel) == ["mul", "exp", "tanh", "mul", "abs", "mul", "sqrt"]
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), alone(program, inputs))


def test_siblings_with_a_path_between_them_stay_apart():
    w = rng.standard_normal((8, 8)).astype(np.float32)

    def f(x, w):
        a = (x * 2.0).exp()
        return a, (x * 3.0).tanh() + a @ w   # reads x, and a through the matmul
    program, inputs = program_of(f, X, w)
    fused = fuse.run(program).verify()
    assert [i.op if i.op != "fused" else body_ops(i) for i in fused.instrs] == \
        [["mul", "exp"], "matmul", ["mul", "tanh", "add"]]
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), alone(program, inputs))


def test_siblings_of_other_shapes_or_through_a_broadcast_stay_apart():
    b = rng.standard_normal(8).astype(np.float32)

    def f(x, b):
        # both read b, but as a (4, 8) broadcast and as an (8,) loop: no common sweep
        return (x * b).exp(), (b * 2.0).tanh(), (x * 2.0).sigmoid()
    program, inputs = program_of(f, X, b)
    fused = fuse.run(program).verify()
    assert sorted(body_ops(k) for k in fused_instrs(fused)) == [["mul", "exp", "mul", "sigmoid"],
                                                                ["mul", "tanh"]]
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), alone(program, inputs))


def test_a_path_back_through_a_later_kernel_keeps_siblings_apart():
    w = rng.standard_normal((8, 8)).astype(np.float32)

    def f(x, y, w):
        a = (x * 2.0).exp()
        c1 = y.sigmoid() * 2.0                # one kernel with c2, scheduled after b...
        b = (x * 3.0).tanh() + c1 @ w         # ...which reads c1 through a matmul
        c2 = c1 + a @ w                       # and c2 reads a through one: a, b cannot merge
        return a, b, c2
    program, inputs = program_of(f, X, X * 0.5, w)
    fused = fuse.run(program).verify()
    kernels = sorted(body_ops(k) for k in fused_instrs(fused))
    assert kernels == [["mul", "exp"], ["mul", "tanh", "add"], ["sigmoid", "mul", "add"]]
    assert_bitwise(c.build(pipeline.after_fusion(fused, "c"))(inputs), alone(program, inputs))
