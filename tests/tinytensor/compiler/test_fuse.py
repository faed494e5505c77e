"""Vertical fusion: chains become one kernel, the program stays valid and computes the
same values (bitwise, through the interpreter), and no fusion makes a cycle."""
import numpy as np

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler.capture import capture
from tinytensor.compiler.passes import fuse

from ._programs import bits, fused_instrs, interpreted, program_of

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 8)).astype(np.float32)
B = rng.standard_normal(8).astype(np.float32)


def fused_and_checked(fn, *arrays):
    program, inputs = program_of(fn, *arrays)
    fused = fuse.run(program).verify()
    for ins in fused_instrs(fused):
        ins.attrs["body"].verify()
    for a, b in zip(interpreted(program, inputs), interpreted(fused, inputs)):
        np.testing.assert_array_equal(bits(a), bits(b))
    return program, fused


def test_a_chain_with_a_broadcast_bias_becomes_one_kernel():
    program, fused = fused_and_checked(lambda x, b: ((x * 2.0 + b).exp() * x - 0.5).tanh(), X, B)
    (k,) = fused.instrs
    assert k.op == "fused" and k.fn is None
    assert k.attrs["name"] == "fused_mul_add_exp_mul_sub_tanh"
    assert [v.name for v in k.inputs] == ["arg0", "arg1"]   # 0-d constants went into the body
    assert len(k.attrs["body"].consts) == 2 and len(k.attrs["body"].instrs) == len(program.instrs)


def test_a_value_used_outside_the_group_stays_an_output():
    def f(x):
        a = (x * 3.0).exp()
        return a.transpose(0, 1), (a + 1.0).relu()

    program, fused = fused_and_checked(f, X)
    (k,) = fused_instrs(fused)
    a = next(ins.outputs[0] for ins in program.instrs if ins.op == "exp")
    assert a in k.outputs and len(k.outputs) == 2   # a (read by the transpose) and the relu result


def test_a_row_reduction_joins_its_producers_and_the_consumers_it_broadcasts_to():
    def f(x):
        a = x.exp() * 2.0           # (4, 8)
        s = a.sum(1, keepdim=True)  # per row, broadcast back by the division
        return (a / s).tanh()

    program, fused = fused_and_checked(f, X)
    (k,) = fused.instrs
    assert [i.op for i in k.attrs["body"].instrs] == ["exp", "mul", "sum", "div", "tanh"]


def test_no_fusion_through_a_reduction_that_would_make_a_cycle():
    w = rng.standard_normal((1, 1)).astype(np.float32)

    def f(x, w):
        a = x.exp() * 2.0
        t = a.sum(1, keepdim=True) @ w   # the row sums leave through a matmul...
        return (a / t).tanh()            # ...and come back: this cannot join a's kernel

    program, fused = fused_and_checked(f, X, w)
    ops = [ins.op if ins.op != "fused" else [i.op for i in ins.attrs["body"].instrs]
           for ins in fused.instrs]
    assert ops == [["exp", "mul", "sum"], "matmul", ["div", "tanh"]]


def test_a_sum_over_leading_dims_or_of_another_row_shape_does_not_join():
    def f(x):
        a = x.exp() * 2.0                          # (4, 8)
        return a.sum(0, keepdim=True) + 1.0, (a.sum(1) * 3.0).tanh()

    program, fused = fused_and_checked(f, X)
    kernels = sorted([i.op for i in k.attrs["body"].instrs] for k in fused_instrs(fused))
    # the column sum is no member of a group (passes/columns.py compiles it afterwards, for the C
    # backend: test_fuse_reductions.py); the non-keepdim row sum (shape (4,)) cannot broadcast
    # back over (4, 8), but its own per-row consumers join it
    assert kernels == [["exp", "mul", "sum", "mul", "tanh"]]
    assert [i.op for i in fused.instrs if i.op != "fused"] == ["sum", "add"]


def test_matmul_and_shape_changes_split_kernels():
    def f(x, w):
        h = (x * 0.5 + 1.0) @ w            # (4, 8) @ (8, 3)
        return (h * h).sigmoid() * 2.0

    program, fused = fused_and_checked(f, X, rng.standard_normal((8, 3)).astype(np.float32))
    assert [ins.op for ins in fused.instrs] == ["fused", "matmul", "fused"]
    assert [v.shape for v in fused.instrs[-1].outputs] == [(4, 3)]


def test_only_ops_numpy_computes_exactly_are_fused_and_a_lone_cheap_op_is_left_alone():
    # three inputs, so that no two kernels read a common one (test_fuse_siblings.py)
    program, fused = fused_and_checked(
        lambda x, y, z: (x ** 3, x.abs() ** 0.5 + 1.0, F.gelu(x), F.gelu(y, approximate="tanh"), z + 1.0),
        X, X * 2.0, X - 1.0)
    kernels = {k.attrs["name"]: [i.op for i in k.attrs["body"].instrs] for k in fused_instrs(fused)}
    # the tanh GELU's kernel computes it as the ops of its NumPy forward (Gelu.decompose);
    # the exact one is x cdf(x), cdf(x) = erfc(-x/sqrt 2)/2 a float64 (tt_math.h), in a
    # sibling of the others reading x
    assert kernels == {"fused_abs_pow_add_gelu": ["abs", "pow", "add", "gelu_cdf", "gelu_erf_from_cdf"],
                       "fused_gelu": ["mul", "mul", "mul", "add", "mul", "tanh", "mul", "add", "mul"]}
    assert {i.op for i in fused.instrs} == {"pow", "add", "fused"}


def test_a_lone_cheap_op_of_a_large_result_is_a_kernel():
    # NumPy would hand it a fresh array per call (page faults); a kernel writes the arena
    big = rng.standard_normal((fuse.LONE_BYTES // 4 // 256, 256)).astype(np.float32)
    _, fused = fused_and_checked(lambda x, b: x + b, big, rng.standard_normal(256).astype(np.float32))
    assert [i.op for i in fused.instrs] == ["fused"]
    _, fused = fused_and_checked(lambda x, b: x + b, big[:-1], rng.standard_normal(256).astype(np.float32))
    assert [i.op for i in fused.instrs] == ["add"]


def test_scope_and_role_are_kept():
    program, inputs = program_of(lambda x: (x * 2.0).exp() + 1.0, X)
    for ins in program.instrs:
        ins.scope = "h.0.mlp" if ins.op != "add" else "h.0.mlp.act"
    (k,) = fuse.run(program).instrs
    assert k.scope == "h.0.mlp" and k.role == "forward"


def test_a_weight_gradient_is_the_same_blas_product_as_eagers():
    # a Linear's weight gradient is (x.mT @ g).mT. Computing it as g.mT @ x instead (the
    # weight's own layout) is a different BLAS call: the same bits on Zen 4's kernels, 1 ulp
    # off on OpenBLAS's Haswell ones (found there, 116 of 512 elements). Fusion keeps eager's.
    r = np.random.default_rng(7)
    x = r.standard_normal((8, 16)).astype(np.float32)
    w = r.standard_normal((32, 16)).astype(np.float32)

    def step(x, w):
        (x @ w.mT).tanh().sum().backward()

    tensors = [tt.tensor(x), tt.tensor(w, requires_grad=True)]
    program, _, meta = capture(step, tuple(tensors))
    arrays = [t.data for t in tensors]
    fused = fuse.run(program).verify()
    want, got = interpreted(program, arrays), interpreted(fused, arrays)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(bits(a), bits(b))
