"""sort, argsort and topk against torch: values, indices, gradients (scattered back)."""
import numpy as np
import pytest
import torch

import tinytensor as tt

from .oracle import check

DISTINCT = np.random.default_rng(0).permutation(60).reshape(3, 4, 5).astype(np.float64) / 7


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_values_indices_and_gradient(dim, descending):
    check(lambda m, x: m.sort(x, dim=dim, descending=descending)[0], [DISTINCT.copy()])
    a = tt.sort(tt.tensor(DISTINCT), dim=dim, descending=descending)
    b = torch.sort(torch.tensor(DISTINCT), dim=dim, descending=descending)
    assert a.indices.tolist() == b.indices.tolist()
    assert tt.argsort(tt.tensor(DISTINCT), dim, descending).tolist() == \
        torch.argsort(torch.tensor(DISTINCT), dim, descending).tolist()


@pytest.mark.parametrize("k,dim,largest", [(1, -1, True), (3, -1, True), (2, 0, False), (5, 2, False), (0, 1, True)])
def test_topk_matches_torch(k, dim, largest):
    check(lambda m, x: m.topk(x, k, dim=dim, largest=largest)[0], [DISTINCT.copy()])
    a = tt.topk(tt.tensor(DISTINCT), k, dim=dim, largest=largest)
    b = torch.topk(torch.tensor(DISTINCT), k, dim=dim, largest=largest)
    assert a.indices.tolist() == b.indices.tolist()


def test_sort_is_stable_with_ties_and_topk_checks_k():
    x = [3.0, 1.0, 3.0, 1.0]
    assert tt.argsort(tt.tensor(x)).tolist() == torch.argsort(torch.tensor(x), stable=True).tolist()
    with pytest.raises(ValueError, match="topk: k=5 is out of range"):
        tt.topk(tt.tensor(x), 5)


@pytest.mark.parametrize("values", [
    np.array([0, 1, 2, 255, 7], np.uint8),                       # -x wraps an unsigned int
    np.array([0, -2**63, 5, 5, 2**63 - 1, 0], np.int64),          # and the most negative int
    np.array([1.0, np.nan, 3.0, np.nan, 2.0, 3.0, -0.0, 0.0, -np.inf, np.inf]),  # nan: the largest
    np.array([True, False, True, False]),
], ids=["uint8", "int64-extremes", "float-nan-ties", "bool"])
def test_sort_and_topk_order_every_dtype_as_torch(values):
    x2 = np.stack([values, values[::-1]])
    for descending in (False, True):
        a = tt.sort(tt.tensor(x2), dim=-1, descending=descending)
        b = torch.sort(torch.tensor(x2), dim=-1, descending=descending, stable=True)
        assert a.indices.tolist() == b.indices.tolist()
        np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())
        if values.dtype != bool:   # torch's topk refuses bool
            for k in range(values.size + 1):
                a = tt.topk(tt.tensor(x2), k, largest=descending)
                b = torch.topk(torch.tensor(x2), k, largest=descending)
                np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())
