"""diagonal, diag_embed and diag against PyTorch: values, gradients and double backward in
float64 (each case is fn(m, *inputs), m tinytensor or torch; shapes are random inputs)."""
import pytest

import tinytensor as tt
from .cases import error_tests, table_tests
from .oracle import check

CASES = {
    "diagonal": (lambda m, x: x.diagonal(), [(3, 4)]),
    "diagonal_offset": (lambda m, x: x.diagonal(1), [(3, 4)]),
    "diagonal_offset_neg": (lambda m, x: m.diagonal(x, -2), [(4, 3)]),
    "diagonal_offset_past": (lambda m, x: x.diagonal(5), [(3, 4)]),
    "diagonal_dims": (lambda m, x: x.diagonal(0, 2, 0), [(3, 2, 4)]),
    "diagonal_neg_dims": (lambda m, x: x.diagonal(-1, dim1=-1, dim2=-3), [(4, 2, 3)]),
    "diagonal_batched": (lambda m, x: x.diagonal(dim1=-2, dim2=-1), [(2, 3, 3)]),
    "diag_embed": (lambda m, x: m.diag_embed(x), [(3,)]),
    "diag_embed_batched": (lambda m, x: x.diag_embed(), [(2, 3)]),
    "diag_embed_offset": (lambda m, x: x.diag_embed(1), [(2, 3)]),
    "diag_embed_offset_neg_dims": (lambda m, x: x.diag_embed(-2, 0, 2), [(2, 3)]),
    "diag_embed_dims_swapped": (lambda m, x: m.diag_embed(x, 0, -1, 0), [(2, 4, 3)]),
    "diag_vector": (lambda m, x: x.diag(), [(4,)]),
    "diag_vector_offset": (lambda m, x: m.diag(x, -1), [(3,)]),
    "diag_matrix": (lambda m, x: x.diag(), [(3, 5)]),
    "diag_matrix_offset": (lambda m, x: m.diag(x, 2), [(3, 5)]),
    "diag_empty": (lambda m, x: x.diag(), [(0,)]),
    # a diagonal through a diag_embed: each op's gradient is the other
    "round_trip": (lambda m, x: (m.diag_embed(x, 1) * 2).diagonal(1, -2, -1), [(2, 3)]),
}
test_diagonal, test_diagonal_float32, test_diagonal_cuda = table_tests(
    CASES, ["diagonal_dims", "diag_embed_offset", "diag_matrix"], check)


test_errors = error_tests([
    (lambda: tt.zeros(3).diagonal(), r"diagonal: expected a tensor with at least 2 dimensions, got shape \(3,\)"),
    (lambda: tt.zeros(3, 3).diagonal(0, 1, -1), r"diagonal: diagonal dimensions cannot be identical \(1, -1\)"),
    (lambda: tt.zeros(2, 2, 2).diag(), r"diag: expected a 1-d or 2-d tensor, got shape \(2, 2, 2\)"),
    (lambda: tt.tensor(1.0).diag_embed(), r"diag_embed: expected a tensor with at least 1 dimension"),
])


def test_dim_out_of_range_names_the_op():
    with pytest.raises(IndexError, match=r"diag_embed: dimension 3 is out of range"):
        tt.zeros(2, 3).diag_embed(0, 0, 3)
