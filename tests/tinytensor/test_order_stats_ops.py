"""nansum, nanmean, median, nanmedian, kthvalue, mode, quantile, nanquantile, aminmax,
count_nonzero, msort against PyTorch: values, gradients and double backward in float64 (each
case is fn(m, *inputs), m tinytensor or torch), NaN slices, and the data-dependent choices
re-made by a compiled program on every call."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .cases import table_tests
from .oracle import check

NAN = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan], [4.0, 2.0, 2.0, 5.0]])

CASES = {
    "nansum": (lambda m, x: m.nansum(x, 1), [NAN]),
    "nansum_all_dtype": (lambda m, x: m.nansum(x, dtype=m.float64), [NAN]),
    "nanmean": (lambda m, x: m.nanmean(x, 0, keepdim=True), [NAN[[0, 2]]]),
    "median_all": (lambda m, x: m.median(x), [(3, 5)]),
    "median_all_ties": (lambda m, x: m.median(x), [np.array([2.0, 1.0, 2.0, 3.0, 2.0])]),
    "median_dim": (lambda m, x: m.median(x, 1), [(3, 4)]),
    "median_dim_keepdim": (lambda m, x: m.median(x, 0, keepdim=True), [(5, 2)]),
    "nanmedian_dim": (lambda m, x: m.nanmedian(x, 1)[0], [NAN[[0, 2]]]),
    "kthvalue": (lambda m, x: m.kthvalue(x, 2, 0), [(4, 3)]),
    "kthvalue_keepdim": (lambda m, x: m.kthvalue(x, 3, -1, True), [(2, 5)]),
    "mode": (lambda m, x: m.mode(x, 1), [np.array([[1.0, 2.0, 2.0, 3.0], [5.0, 5.0, 4.0, 4.0]])]),
    "quantile_scalar": (lambda m, x: m.quantile(x, 0.3, 1), [(3, 6)]),
    "quantile_all": (lambda m, x: m.quantile(x, 0.75), [(3, 4)]),
    "quantile_q_tensor": (lambda m, x, q: m.quantile(x, q.sigmoid(), 0, keepdim=True), [(5, 2), (3,)]),
    "nanquantile": (lambda m, x: m.nanquantile(x, 0.4, 1), [NAN[[0, 2]]]),
    "aminmax": (lambda m, x: m.aminmax(x, dim=1), [(3, 4)]),
    "msort": (lambda m, x: m.msort(x), [(4, 3)]),
}
test_order_stats, test_order_stats_float32, test_order_stats_cuda = table_tests(
    CASES, ["median_dim", "quantile_scalar", "nanmedian_dim"], check)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolations_and_nan_slices(interpolation):
    q = [0.0, 0.25, 0.5, 0.9, 1.0]
    for fn in ("quantile", "nanquantile"):
        got = getattr(tt, fn)(tt.tensor(NAN), tt.tensor(q, dtype=tt.float64), 1,
                              interpolation=interpolation)
        want = getattr(torch, fn)(torch.tensor(NAN), torch.tensor(q, dtype=torch.float64), 1,
                                  interpolation=interpolation)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_nan_slices_choose_as_torch():
    for fn in ("median", "nanmedian"):
        v, i = getattr(tt, fn)(tt.tensor(NAN), 1)
        tv, ti = getattr(torch, fn)(torch.tensor(NAN), 1)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        # the index of a slice with one NaN (torch's choice among ties or among NaNs is its
        # selection algorithm's, which tinytensor does not copy)
        assert i[0].item() == ti[0].item()
        assert np.isnan(getattr(tt, fn)(tt.tensor(NAN[1])).item())
    assert np.isnan(tt.median(tt.tensor(NAN)).item())
    assert tt.nanmedian(tt.tensor(NAN)).item() == torch.nanmedian(torch.tensor(NAN)).item()


def test_count_nonzero_and_integer_mode():
    a = np.array([[0, 3, 3, 1], [2, 0, 0, 2]])
    assert tt.count_nonzero(tt.tensor(a), 1).tolist() == torch.count_nonzero(torch.tensor(a), 1).tolist()
    assert tt.count_nonzero(tt.tensor(a)).item() == 5
    v, i = tt.mode(tt.tensor(a))
    tv, ti = torch.mode(torch.tensor(a))
    assert v.tolist() == tv.tolist() and i.tolist() == ti.tolist()


def test_errors_name_the_op():
    with pytest.raises(IndexError, match=r"kthvalue: k=5 is out of range .*size 4"):
        tt.kthvalue(tt.ones(3, 4), 5)
    with pytest.raises(ValueError, match=r"quantile: q must be in \[0, 1\], got 1.5"):
        tt.quantile(tt.ones(3), 1.5)
    with pytest.raises(TypeError, match=r"nanquantile: input must be a float32 or float64 tensor"):
        tt.nanquantile(tt.ones(3, dtype=tt.float16), 0.5)
    with pytest.raises(IndexError, match=r"median: cannot reduce over dimension 1 of size 0"):
        tt.median(tt.ones(3, 0), 1)


def test_compiled_program_chooses_again_each_call():
    """The chosen entries are recorded ops: a second input gets its own median, mode, ..."""
    def fn(m, x):
        return (m.median(x, 1)[0] + m.kthvalue(x, 2, 1)[0] + m.mode(x.round(), 1)[0]
                + m.quantile(x, 0.3, 1) + m.median(x) + m.nanmedian(x, 0)[0].sum())

    compiled = tt.compile(lambda x: fn(tt, x), backend="numpy")
    rng = np.random.default_rng(0)
    for _ in range(2):
        a = rng.normal(size=(3, 5)) * 3
        np.testing.assert_allclose(compiled(tt.tensor(a)).numpy(), fn(torch, torch.tensor(a)).numpy(),
                                   rtol=1e-12)
