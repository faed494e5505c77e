"""matmul and einsum against PyTorch: forward, gradient and gradient-of-gradient in float64.

Each case is `fn(m, *inputs)` with `m` the library (tinytensor or torch); inputs are shapes
of random float64 tensors that require grad.
"""
import numpy as np
import pytest

import tinytensor as tt
from .cases import table_tests
from .oracle import check




def mm(m, a, b):
    return a @ b


def es(eq):
    return lambda m, *xs: m.einsum(eq, *xs)


CASES = {
    # matmul, every rank combination torch.matmul accepts
    "1d@1d": (mm, [(4,), (4,)]),
    "1d@2d": (mm, [(4,), (4, 3)]),
    "2d@1d": (mm, [(3, 4), (4,)]),
    "2d@2d": (mm, [(3, 4), (4, 5)]),
    "batched@2d": (mm, [(2, 3, 4), (4, 5)]),
    "2d@batched": (mm, [(3, 4), (2, 4, 5)]),
    "batched@batched": (mm, [(2, 3, 4), (2, 4, 5)]),
    "bcast_batch": (mm, [(2, 1, 3, 4), (5, 4, 6)]),
    "bcast_batch_both": (mm, [(2, 1, 3, 4), (1, 5, 4, 6)]),
    "1d@batched": (mm, [(4,), (2, 4, 5)]),
    "batched@1d": (mm, [(2, 3, 4), (4,)]),
    "1d@4d": (mm, [(4,), (2, 3, 4, 5)]),
    "outer_like": (mm, [(3, 1), (1, 4)]),
    "size1_all": (mm, [(1, 1), (1, 1)]),
    "empty_k": (mm, [(3, 0), (0, 4)]),
    "empty_batch": (mm, [(0, 3, 4), (4, 5)]),
    "matmul_fn": (lambda m, a, b: m.matmul(a, b), [(2, 3, 4), (2, 4, 2)]),
    "matmul_method": (lambda m, a, b: a.matmul(b), [(3, 4), (4,)]),
    "matmul_mT": (lambda m, a, b: a @ b.mT, [(2, 3, 4), (2, 5, 4)]),
    "matmul_tanh": (lambda m, a, b: (a @ b).tanh() @ b.mT, [(3, 4), (4, 4)]),
    "matmul_self": (lambda m, a: a @ a, [(3, 3)]),
    # einsum: the contractions Transformers use
    "attn_scores": (es("bhqd,bhkd->bhqk"), [(2, 2, 3, 4), (2, 2, 5, 4)]),
    "attn_values": (es("bhqk,bhkd->bhqd"), [(2, 2, 3, 5), (2, 2, 5, 4)]),
    "bmm": (es("bij,bjk->bik"), [(2, 3, 4), (2, 4, 5)]),
    "transpose": (es("ij->ji"), [(3, 4)]),
    "dot": (es("i,i->"), [(5,), (5,)]),
    "matvec": (es("ij,j->i"), [(3, 4), (4,)]),
    "batch_outer": (es("bi,bj->bij"), [(2, 3), (2, 4)]),
    "ellipsis_mm": (es("...ij,...jk->...ik"), [(2, 3, 3, 4), (2, 3, 4, 5)]),
    "ellipsis_bcast": (es("...ij,...jk->...ik"), [(2, 1, 3, 4), (5, 4, 2)]),
    "ellipsis_2d": (es("...ij,...jk->...ik"), [(3, 4), (4, 5)]),
    "implicit": (es("ij,jk"), [(3, 4), (4, 5)]),
    "implicit_transpose": (es("ba"), [(3, 4)]),
    "row_sum": (es("ij->i"), [(3, 4)]),
    "sum_all": (es("ij->"), [(3, 4)]),
    "sum_in_one": (es("ij,k->ik"), [(3, 4), (5,)]),
    "three_operands": (es("ij,jk,kl->il"), [(2, 3), (3, 4), (4, 2)]),
    "spaces": (es("b i , b j -> b i j"), [(2, 3), (2, 4)]),
    "einsum_list": (lambda m, a, b: m.einsum("ij,jk->ik", [a, b]), [(3, 4), (4, 5)]),
    "size1_bcast": (es("bij,bjk->bik"), [(1, 3, 4), (2, 4, 5)]),
    "size1_bcast_summed": (es("bij,bk->bi"), [(1, 3, 4), (2, 5)]),
    "size1_contracted": (es("ij,jk->ik"), [(3, 4), (1, 5)]),
    "size1_both": (es("bij,bjk->bik"), [(2, 3, 1), (1, 4, 5)]),
    "empty_sum": (es("ij,jk->ik"), [(3, 0), (0, 4)]),
}


FLOAT32 = ["1d@2d", "bcast_batch", "1d@batched", "2d@batched", "attn_scores", "attn_values",
           "ellipsis_bcast", "implicit", "row_sum", "three_operands"]
test_linalg, test_linalg_float32, test_linalg_cuda = table_tests(CASES, FLOAT32, check)


def test_matmul_mixed_dtypes_promote():
    a = tt.ones(2, 3, dtype=tt.float32)
    b = tt.ones(3, 2, dtype=tt.float64)
    assert (a @ b).dtype == tt.float64
    assert (tt.ones(2, 3, dtype=tt.int64) @ tt.ones(3, dtype=tt.int64)).tolist() == [3, 3]


def test_matmul_numpy_operand():
    a = tt.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose((np.ones((4, 2)) @ a).numpy(), np.ones((4, 2)) @ np.arange(6.0).reshape(2, 3))


# ---------------------------------------------------------------- bad input
ERRORS = {
    "mm_mismatch": (lambda: tt.zeros(3, 4) @ tt.zeros(5, 6), ValueError, r"matmul.*\(3, 4\).*\(5, 6\)"),
    "mm_batched": (lambda: tt.zeros(4, 16, 64) @ tt.zeros(32, 64), ValueError,
                   r"matmul: shapes \(4, 16, 64\) and \(32, 64\)"),
    "mm_1d": (lambda: tt.zeros(3) @ tt.zeros(4), ValueError, r"matmul.*\(3,\).*\(4,\)"),
    "mm_batch_bcast": (lambda: tt.zeros(2, 3, 4) @ tt.zeros(3, 4, 5), ValueError,
                       r"matmul.*\(2, 3, 4\).*\(3, 4, 5\)"),
    "mm_0d": (lambda: tt.zeros(()) @ tt.zeros(3), ValueError, "matmul"),
    "einsum_count": (lambda: tt.einsum("ij,jk->ik", tt.zeros(3, 4)), ValueError, "einsum"),
    "einsum_rank": (lambda: tt.einsum("ijk->i", tt.zeros(3, 4)), ValueError, r"einsum.*'ijk'.*\(3, 4\)"),
    "einsum_size": (lambda: tt.einsum("ij,jk->ik", tt.zeros(3, 4), tt.zeros(5, 2)), ValueError,
                    r"einsum.*'j'.*4.*5"),
    "einsum_output": (lambda: tt.einsum("ij->k", tt.zeros(3, 4)), ValueError, "einsum.*'k'"),
    "einsum_output_repeat": (lambda: tt.einsum("ij->ii", tt.zeros(3, 4)), ValueError, "einsum"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_linalg_errors(name):
    fn, exc, match = ERRORS[name]
    with pytest.raises(exc, match=match):
        fn()


def test_einsum_module_path_in_error():
    with tt.module_scope("blocks.0.attn"), pytest.raises(ValueError, match="in blocks.0.attn"):
        tt.zeros(4, 16, 64) @ tt.zeros(32, 64)


def test_mm_and_bmm_match_torch_and_refuse_broadcasting():
    check(lambda m, a, b: m.mm(a, b), [(3, 4), (4, 5)])
    check(lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 5)])
    with pytest.raises(ValueError, match="mm: expects two 2-d tensors"):
        tt.mm(tt.zeros(2, 3, 4), tt.zeros(4, 5))
    with pytest.raises(ValueError, match="bmm: expects .* the same B"):
        tt.bmm(tt.zeros(2, 3, 4), tt.zeros(3, 4, 5))
