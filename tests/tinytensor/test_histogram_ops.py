"""bincount, histc, histogram and histogramdd against PyTorch, and through tt.compile: the
histograms are recorded ops re-run on each call's values; bincount (whose length is the
largest value) is refused by name."""
import numpy as np
import pytest
import torch

import tinytensor as tt

RNG = np.random.default_rng(0)
DATA = RNG.normal(size=(40,))


def _same(got, want):
    np.testing.assert_allclose(np.asarray(got.numpy()), want.numpy(), rtol=1e-12)
    assert got.numpy().dtype == want.numpy().dtype


@pytest.mark.parametrize("kw", [{}, {"minlength": 9}, {"weights": True}])
def test_bincount(kw):
    x = np.array([0, 3, 3, 1, 7, 0, 3])
    if kw.get("weights"):
        w = np.linspace(0.5, 2.0, 7).astype(np.float32)
        kw = {"weights": (tt.tensor(w), torch.tensor(w))}
    args = {k: v[0] for k, v in kw.items() if k == "weights"}
    targs = {k: v[1] for k, v in kw.items() if k == "weights"}
    ml = {"minlength": kw["minlength"]} if "minlength" in kw else {}
    _same(tt.bincount(tt.tensor(x), **args, **ml), torch.bincount(torch.tensor(x), **targs, **ml))


@pytest.mark.parametrize("args", [(10, 0, 0), (4, -1.0, 1.0), (3, 0.5, 0.5)])
def test_histc(args):
    _same(tt.histc(tt.tensor(DATA), *args), torch.histc(torch.tensor(DATA), *args))


@pytest.mark.parametrize("kw", [{"bins": 5}, {"bins": 4, "range": (-1.0, 1.0), "density": True},
                                {"bins": "edges"}, {"bins": 3, "weight": True}])
def test_histogram(kw):
    tkw, ttkw = dict(kw), dict(kw)
    if kw["bins"] == "edges":
        e = np.array([-2.0, -0.5, 0.0, 0.3, 2.5])
        tkw["bins"], ttkw["bins"] = torch.tensor(e), tt.tensor(e)
    if kw.get("weight"):
        tkw["weight"], ttkw["weight"] = torch.tensor(DATA ** 2), tt.tensor(DATA ** 2)
    h, e = tt.histogram(tt.tensor(DATA), **ttkw)
    th, te = torch.histogram(torch.tensor(DATA), **tkw)
    _same(h, th)
    _same(e, te)


def test_histogramdd():
    x = RNG.normal(size=(30, 2))
    h, edges = tt.histogramdd(tt.tensor(x), [3, 4], density=True)
    th, tedges = torch.histogramdd(torch.tensor(x), [3, 4], density=True)
    _same(h, th)
    for e, te in zip(edges, tedges):
        _same(e, te)


def test_compiled_histograms_count_each_call():
    def fn(m, x):
        return m.histc(x, 6) + m.histogram(x, 6)[0] + m.histogram(x, 6)[1][:6]

    compiled = tt.compile(lambda x: fn(tt, x), backend="numpy")
    for scale in (1.0, 3.0):
        a = RNG.normal(size=(50,)) * scale
        np.testing.assert_allclose(compiled(tt.tensor(a)).numpy(), fn(torch, torch.tensor(a)).numpy(),
                                   rtol=1e-12)


def test_compiled_bincount_is_refused_by_name():
    compiled = tt.compile(lambda x: tt.bincount(x) * 2, backend="numpy")
    with pytest.raises(Exception, match=r"bincount"):
        compiled(tt.tensor([0, 1, 1]))


def test_errors_name_the_op():
    with pytest.raises(ValueError, match=r"bincount: input must be non-negative"):
        tt.bincount(tt.tensor([1, -1]))
    with pytest.raises(TypeError, match=r"bincount: input must be a 1-d integer tensor, got float32"):
        tt.bincount(tt.tensor([1.0]))
    with pytest.raises(ValueError, match=r"histc: max \(0.0\) must be at least min \(1.0\)"):
        tt.histc(tt.ones(3), 4, 1.0, 0.0)
