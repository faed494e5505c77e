"""Exactly rounded programs give eager's bits whatever the layout of eager's arrays (issue 22,
fuzz finding #4, `layout_bits`): NumPy adds a non-contiguous array in memory order, which a
compiled kernel (adding in index order) cannot follow, so eager's sums read a C-contiguous
array (a copy where it is not one): its order is then the indices', a function of the shape
alone, on eager's side and the compiled side (kernels, and NumPy where a sum stays NumPy's)."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.core.primitives import sum_to_array
from tinytensor.tools.lib.fuzz_programs import Input, Op, Program
from tinytensor.tools.lib.fuzz_run import run_program


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dim", [None, -1, 0, (0, 1)])
def test_eager_sums_do_not_depend_on_the_layout(dim):
    x = np.random.default_rng(1).standard_normal((37, 45)).astype(np.float32) * 100
    c, t = tt.tensor(x), tt.from_numpy(np.ascontiguousarray(x.T).T)     # same values, transposed
    s = tt.from_numpy(np.repeat(x, 2, axis=1)[:, ::2])                  # a strided view
    want = c.sum(dim=dim).numpy()
    assert np.array_equal(_bits(t.sum(dim=dim).numpy()), _bits(want))
    assert np.array_equal(_bits(s.sum(dim=dim).numpy()), _bits(want))
    assert np.array_equal(_bits(t.mean(dim=dim).numpy()), _bits(c.mean(dim=dim).numpy()))
    # the sum of a broadcast's gradient, too
    assert np.array_equal(_bits(sum_to_array(x.T, (45, 1))), _bits(sum_to_array(np.ascontiguousarray(x.T), (45, 1))))


def _prog(inputs, ops, outputs, mode, dtype, calls):
    return Program(seed=0, dtype=dtype, mode=mode, inputs=inputs, ops=ops, outputs=outputs,
                   calls=calls, layout_bits=True)


# the two minimal programs of finding #4 (docs: /work/notes/old/fuzz.md), each 1 ulp off before
SQUARES = _prog([Input("x0", "arg", (4, 7), grad=True)],
                [Op("v0", "({0} * {0})", ("x0",), True, "elementwise", shape=(4, 7)),
                 Op("v1", "{0}.sum()", ("v0",), True, "reduce", shape=())],
                ["v1"], "grad", "float32",
                [{"seed": 1149000}, {"seed": 1149001, "layout": "transposed"},
                 {"seed": 1149002, "layout": "strided"}])
SELECTED = _prog([Input("p0", "param", (16, 3, 5)), Input("i0", "index", (3,), high=3)],
                 [Op("v0", "{0}.index_select(1, {1})", ("p0", "i0"), True, "indexing", shape=(16, 3, 5)),
                  Op("v1", "(3.0 - {0})", ("v0",), True, "elementwise", shape=(16, 3, 5))],
                 ["v1"], "backward", "float32", [{"seed": 1076000 + k} for k in range(6)])


@pytest.mark.parametrize("prog", [SQUARES, SELECTED], ids=["transposed_input", "index_select_dim1"])
@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_exactly_rounded_programs_are_bitwise_on_every_layout(prog, backend):
    assert prog.exact is True
    assert run_program(prog, backend) is None


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_a_compiled_reference_norm_gives_eagers_bits_on_a_transposed_input(op):
    # the compiler writes these as their NumPy ops (their `decompose`, passes/lower.py: sums,
    # divisions, a correctly rounded 1/sqrt), exactly rounded: C kernels give their bits
    # when the reference ops' own sums read C-contiguous arrays, as Sum's do
    import tinytensor.functional as F
    norm = F.layer_norm if op == "layer_norm" else F.rms_norm
    x = np.random.default_rng(2).standard_normal((16, 37)).astype(np.float32) * 3
    xt = np.ascontiguousarray(x.T).T
    with tt.kernels.use_fusion(False):      # the reference op, which a capture records
        want = norm(tt.tensor(x) * 1.0, (37,)).numpy()
        want_t = norm(tt.from_numpy(xt) * 1.0, (37,)).numpy()
    compiled = tt.compile(lambda a: norm(a * 1.0, (37,)), backend="c")
    assert np.array_equal(_bits(compiled(tt.tensor(x)).numpy()), _bits(want))
    assert np.array_equal(_bits(compiled(tt.from_numpy(xt)).numpy()), _bits(want_t))
