"""einsum with a subscript repeated within one operand (a diagonal: 'ii->i', the trace 'ii',
'iij->j') against torch in float64: values, gradients and double backward."""
import pytest

import tinytensor as tt
from .cases import case
from .oracle import check

CASES = [
    case("diag", lambda m, x: m.einsum("ii->i", x), [(4, 4)]),
    case("trace", lambda m, x: m.einsum("ii", x), [(4, 4)]),
    case("trace_explicit", lambda m, x: m.einsum("ii->", x), [(3, 3)]),
    case("iij_j", lambda m, x: m.einsum("iij->j", x), [(3, 3, 5)]),
    case("iij_ij", lambda m, x: m.einsum("iij->ij", x), [(3, 3, 2)]),
    case("jii_ji", lambda m, x: m.einsum("jii->ji", x), [(2, 3, 3)]),
    case("iji_ij", lambda m, x: m.einsum("iji->ij", x), [(3, 2, 3)]),
    case("iii", lambda m, x: m.einsum("iii->i", x), [(3, 3, 3)]),
    case("iijj", lambda m, x: m.einsum("iijj->ij", x), [(2, 2, 3, 3)]),
    case("diag_times_vector", lambda m, x, v: m.einsum("ii,i->i", x, v), [(4, 4), (4,)]),
    case("trace_of_product", lambda m, a, b: m.einsum("ij,ji", a, b) + m.einsum("ii,jj", a @ b, b @ a),
         [(3, 3), (3, 3)]),
    case("batched_diag", lambda m, x: m.einsum("bii->bi", x), [(2, 3, 3)]),
    case("ellipsis_diag", lambda m, x: m.einsum("...ii->...i", x), [(2, 2, 3, 3)]),
    case("diag_matmul", lambda m, x, y: m.einsum("iij,jk->ik", x, y), [(3, 3, 4), (4, 2)]),
    case("implicit_iij", lambda m, x: m.einsum("iij", x), [(3, 3, 2)]),
    case("both_operands", lambda m, x, y: m.einsum("ii,jj->ij", x, y), [(3, 3), (2, 2)]),
]


@pytest.mark.parametrize("fn,inputs,kw", CASES)
def test_against_torch(fn, inputs, kw):
    check(fn, inputs, **kw)


def test_float32():
    check(lambda m, x, y: m.einsum("iij,jk->ik", x, y), [(3, 3, 4), (4, 2)], dtype="float32")


def test_sizes_must_match_on_a_diagonal():
    with pytest.raises(ValueError, match=r"einsum: subscript 'i' is repeated in 'ii' \(a diagonal\) "
                                         r"but the operand's sizes there differ, shape \(2, 3\)"):
        tt.einsum("ii->i", tt.zeros(2, 3))
