"""kernels/c_reduce.py: the sum of a whole float array on the C pool is NumPy's pairwise sum,
bit for bit, at one and two threads, whatever the layout (a transposed input is summed in
index order, as `summand` makes NumPy add it)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.kernels import c_eager
from tests.eager_c import needs_cc

pytestmark = needs_cc

# past MIN_ELEMENTS; sizes whose recursion ends above and at the unrolled depth, odd tails
SHAPES = [(64, 128, 256), (1000, 37), (33333,), (7, 9, 1001), (32768,), (2, 3, 50001)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_sum_is_numpy_s_bits(dt, shape):
    x = (np.random.default_rng(0).standard_normal(shape) * 100).astype(dt)
    before = c_eager.calls.get("sum_all", 0)
    got = tt.tensor(x).sum().numpy()
    kept = tt.tensor(x).sum(dim=tuple(range(x.ndim)), keepdim=True).numpy()
    assert c_eager.calls.get("sum_all", 0) == before + 2
    assert got.dtype == dt and got.tobytes() == x.sum().tobytes()
    assert kept.shape == (1,) * x.ndim and kept.tobytes() == x.sum(keepdims=True).tobytes()


def test_a_transposed_input_is_summed_in_index_order():
    x = np.random.default_rng(1).standard_normal((300, 400)).astype(np.float32)
    got = tt.tensor(x).t().sum().numpy()
    assert got.tobytes() == np.ascontiguousarray(x.T).sum().tobytes()


def test_the_bits_do_not_depend_on_the_thread_count_and_the_gradient_is_torch_s():
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the kernels follow) and two cores")
    x = np.random.default_rng(2).standard_normal(3 * threads.SPLIT_ELEMENTS + 11).astype(np.float32)
    before = blas.get()
    outs = []
    try:
        for n in (1, 2):
            blas.set(n)
            X = tt.tensor(x, requires_grad=True)
            s = X.sum()
            s.backward()
            outs.append((s.detach().numpy().tobytes(), X.grad.numpy()))
    finally:
        blas.set(before)
    assert outs[0][0] == outs[1][0] == x.sum().tobytes()
    T = torch.tensor(x, requires_grad=True)
    T.sum().backward()
    for _, g in outs:
        assert np.array_equal(g, T.grad.numpy())
