"""Each composite op's `decompose` (in tinytensor ops, beside its forward) is what the
compiler computes for it (passes/lower.py records it): held here to the op's NumPy forward,
bit for bit, in float32 and float64, both run eagerly and as the recorded program the
compiler splices in (run by the interpreter)."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.compiler.passes import lower
from tinytensor.core.rules import rule_of
from tinytensor.kernels import c_eager
from tinytensor.ops.elementwise import Gelu, GeluErfSlope
from tinytensor.ops.norms import LayerNormCore, RMSNormCore
from tinytensor.ops.softmax import LogSoftmax, Softmax

from ._programs import bits, interpreted, program_of

CASES = [
    (Softmax, {"dim": 2}), (Softmax, {"dim": 1}), (LogSoftmax, {"dim": 2}), (LogSoftmax, {"dim": 0}),
    (LayerNormCore, {"dims": (2,), "eps": 1e-5}), (LayerNormCore, {"dims": (1, 2), "eps": 1e-5}),
    (RMSNormCore, {"dims": (2,), "eps": 1e-6}), (RMSNormCore, {"dims": (1, 2), "eps": 0.25}),
    (Gelu, {"approximate": "tanh"}),
]
SHAPE = (5, 6, 33)   # small: the ops' NumPy forwards (no eager C kernel at this size)


def _x(dtype, seed=3):
    r = np.random.default_rng(seed)
    x = r.standard_normal(SHAPE) * 4.0
    x[0, 0, :] = 1e-3 * r.standard_normal(SHAPE[-1]) + 2.0   # a nearly constant row
    return x.astype(dtype)


@pytest.fixture(autouse=True)
def _numpy_path():
    prev = c_eager.set_enabled(False)
    yield
    c_eager.set_enabled(prev)


def _id(case):
    fn, attrs = case
    return fn.__name__ + "-" + "-".join(f"{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_decompose_is_the_forward_bit_for_bit(case, dtype):
    fn, attrs = case
    x = _x(dtype)
    want = fn.apply(tt.tensor(x), **attrs).data
    got = fn.decompose(tt.tensor(x), **attrs).data
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_compiler_computes_the_recorded_decomposition(case, dtype):
    fn, attrs = case
    x = _x(dtype, seed=4)
    program, inputs = program_of(lambda t: fn.apply(t, **attrs), x)
    (ins,) = program.instrs
    consts = dict(program.consts)
    steps = lower.steps(ins, consts)
    assert steps is not None and len(steps) > 1 and steps[-1].outputs == ins.outputs
    lowered = program.replace(instrs=steps, consts=consts).verify()
    want = fn.apply(tt.tensor(x), **attrs).data
    np.testing.assert_array_equal(bits(interpreted(lowered, inputs)[0]), bits(want))
    trailing = attrs.get("dims", (attrs.get("dim"),))[-1] == 2
    if rule_of(fn).lower and trailing:   # the lowering pass takes it: a row kernel's reductions
        assert [i.op for i in lower.run(program).instrs] == [i.op for i in steps]


def test_a_softmax_over_a_leading_dim_is_left_to_its_forward():
    program, _ = program_of(lambda t: Softmax.apply(t, dim=0), _x(np.float32))
    assert [i.op for i in lower.run(program).instrs] == ["softmax"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn, attrs", [(Gelu, {"approximate": "none"}), (GeluErfSlope, {})])
def test_the_exact_gelu_in_a_kernel_agrees_with_its_forward(fn, attrs, dtype):
    # x cdf(x), the cdf as erfc(-x / sqrt 2) / 2 in float64 shared with the slope's: not the
    # forward's (1 + erf) / 2, which loses every digit of a small result far left (x ~ -8.5:
    # -0.0 where gelu is -5e-17), so not its bits (compiler/codegen/c.py says so): the two
    # agree to a few epsilons of the dtype, absolute where the result is tiny
    x = _x(dtype)
    want = fn.apply(tt.tensor(x), **attrs).data
    got = fn.decompose(tt.tensor(x), **attrs).data
    assert got.dtype == want.dtype
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps)


@pytest.mark.parametrize("approximate, ops", [("none", ["gelu_cdf", "gelu_erf_from_cdf"]),
                                               ("tanh", ["mul"] * 3 + ["add", "mul", "tanh", "mul", "add", "mul"])])
def test_a_0d_gelu_is_written_as_its_steps_in_a_kernel(approximate, ops):
    # a lone GELU is a kernel (worth one alone), of a 0-d value too (fuzz seed 130018)
    from tinytensor.compiler.passes import fuse
    import tinytensor.functional as F
    program, inputs = program_of(lambda t: F.gelu(t, approximate=approximate), np.float32(0.75))
    (k,) = fuse.run(program).instrs
    assert [i.op for i in k.attrs["body"].instrs] == ops
