"""tt.masked reductions against torch.masked: values, gradients and double backward in float64
with a mask that leaves one slice fully masked (each case is fn(m, *inputs), m tinytensor or
torch), and the identities a fully masked slice gives."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import check

# row 1 of a (3, 4) input fully masked out; rows 0 and 2 partly
MASK = np.array([[True, False, True, True], [False] * 4, [True, True, False, True]])
PARTIAL = np.array([[True, False, True, True], [True, True, False, False], [False, True, True, True]])


def _m(m, mask=MASK):
    return m.tensor(mask)


def _kept(out):
    """A case's output without its fully masked row (inf / nan have no useful gradient)."""
    return out[[0, 2]] if out.ndim else out


CASES = {
    "sum": (lambda m, x: m.masked.sum(x, 1, mask=_m(m)), [(3, 4)]),
    "sum_all_keepdim": (lambda m, x: m.masked.sum(x, keepdim=True, mask=_m(m)), [(3, 4)]),
    "prod": (lambda m, x: m.masked.prod(x, 1, mask=_m(m)), [(3, 4)]),
    "mean": (lambda m, x: _kept(m.masked.mean(x, 1, mask=_m(m))), [(3, 4)]),
    "amax": (lambda m, x: _kept(m.masked.amax(x, 1, mask=_m(m))), [(3, 4)]),
    "amin_dim0_broadcast_mask": (lambda m, x: m.masked.amin(x, 0, mask=m.tensor([True, False, True, True])), [(3, 4)]),
    "cumsum": (lambda m, x: m.masked.cumsum(x, 1, mask=_m(m)), [(3, 4)]),
    "cumprod": (lambda m, x: m.masked.cumprod(x, 1, mask=_m(m)), [(3, 4)]),
    "softmax": (lambda m, x: _kept(m.masked.softmax(x, 1, mask=_m(m))), [(3, 4)]),
    "log_softmax": (lambda m, x: m.masked.log_softmax(x, 1, mask=_m(m, PARTIAL)).clamp(-50, 50), [(3, 4)]),
    "softmin": (lambda m, x: m.masked.softmin(x, 1, mask=_m(m, PARTIAL)), [(3, 4)]),
    "norm": (lambda m, x: m.masked.norm(x, 2.0, 1, mask=_m(m, PARTIAL)), [(3, 4)]),
    "norm_p3_all": (lambda m, x: m.masked.norm(x, 3.0, mask=_m(m)), [(3, 4)]),
    "normalize": (lambda m, x: m.masked.normalize(x, 2.0, 1, mask=_m(m, PARTIAL)), [(3, 4)]),
    "var": (lambda m, x: m.masked.var(x, 1, mask=_m(m, PARTIAL)), [(3, 4)]),
    "std_correction0": (lambda m, x: m.masked.std(x, 1, correction=0, mask=_m(m, PARTIAL)), [(3, 4)]),
    "logsumexp": (lambda m, x: _kept(m.masked.logsumexp(x, 1, mask=_m(m))), [(3, 4)]),
    "logaddexp": (lambda m, a, b: m.masked.logaddexp(a, b, input_mask=_m(m, PARTIAL),
                                                      other_mask=_m(m, PARTIAL[::-1].copy())), [(3, 4), (3, 4)]),
    "median": (lambda m, x: _kept(m.masked.median(x, 1, mask=_m(m))), [(3, 4)]),
}
test_masked, test_masked_float32, test_masked_cuda = table_tests(
    CASES, ["sum", "mean", "softmax", "var", "norm"], check)


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "argmax", "argmin", "mean",
                                  "logsumexp", "median", "var", "std", "norm"])
def test_fully_masked_slices_match_torch(name):
    x = np.random.default_rng(0).normal(size=(3, 4))
    got = getattr(tt.masked, name)(tt.tensor(x), 1, mask=tt.tensor(MASK))
    want = getattr(torch.masked, name)(torch.tensor(x), 1, mask=torch.tensor(MASK))
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin", "cumsum", "cumprod"])
def test_fully_masked_rows_of_normalizations(name):
    x = np.random.default_rng(1).normal(size=(3, 4))
    got = getattr(tt.masked, name)(tt.tensor(x), 1, mask=tt.tensor(MASK))
    want = getattr(torch.masked, name)(torch.tensor(x), 1, mask=torch.tensor(MASK))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, equal_nan=True)


def test_integer_inputs_and_errors():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    for name in ("sum", "prod", "amax", "amin"):
        got = getattr(tt.masked, name)(tt.tensor(x), 1, mask=tt.tensor(PARTIAL))
        want = getattr(torch.masked, name)(torch.tensor(x), 1, mask=torch.tensor(PARTIAL))
        assert got.tolist() == want.tolist() and got.dtype.name == str(want.dtype)[6:]
    with pytest.raises(IndexError, match=r"masked.sum: the mask \(2, 3, 4\) has more dims"):
        tt.masked.sum(tt.ones(3, 4), mask=tt.ones(2, 3, 4, dtype=tt.bool))
    with pytest.raises(ValueError, match=r"masked.mean: could not infer a floating output dtype"):
        tt.masked.mean(tt.tensor(x), mask=tt.tensor(PARTIAL))
