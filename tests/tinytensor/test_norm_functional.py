"""F.batch_norm, F.group_norm, F.instance_norm, F.local_response_norm (ops/normalization.py)
against torch.nn.functional: values, gradients and double backward in float64
(oracle.check), a float32 pass, and the running statistics they update in place."""
import numpy as np
import pytest
import torch

import tinytensor as tt

from .oracle import F, check


def case(name, fn, inputs, **kw):
    return pytest.param(fn, inputs, kw, id=name)


def stats(m, x, c=3):
    """Running statistics as constants (no gradient), the same numbers in both libraries."""
    return (m.tensor([0.3, -0.2, 0.1, 0.4][:c], dtype=x.dtype),
            m.tensor([0.5, 1.5, 2.0, 0.7][:c], dtype=x.dtype))


def bn_train(m, x, w, b):
    rm, rv = stats(m, x)
    return F(m).batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-3)


def bn_eval(m, x, w, b):
    rm, rv = stats(m, x)
    return F(m).batch_norm(x, rm, rv, w, b, training=False, eps=1e-3)


CASES = [
    case("batch_norm_train_2d", bn_train, [(4, 3), (3,), (3,)]),
    case("batch_norm_train_4d", bn_train, [(2, 3, 3, 2), (3,), (3,)]),
    case("batch_norm_eval_3d", bn_eval, [(2, 3, 4), (3,), (3,)]),
    case("batch_norm_no_stats", lambda m, x: F(m).batch_norm(x, None, None, training=True), [(3, 3, 2)]),
    case("batch_norm_5d", lambda m, x, w: F(m).batch_norm(x, None, None, w, training=True), [(2, 3, 2, 2, 2), (3,)]),
    case("group_norm", lambda m, x, w, b: F(m).group_norm(x, 2, w, b, eps=1e-3), [(2, 4, 3), (4,), (4,)]),
    case("group_norm_4d_plain", lambda m, x: F(m).group_norm(x, 1), [(2, 3, 2, 2)]),
    case("group_norm_per_channel", lambda m, x, w: F(m).group_norm(x, 3, w), [(1, 3, 5), (3,)]),
    case("instance_norm", lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b), [(2, 3, 4), (3,), (3,)]),
    case("instance_norm_4d", lambda m, x: F(m).instance_norm(x, eps=1e-3), [(2, 2, 3, 2)]),
    case("instance_norm_running_eval", lambda m, x: F(m).instance_norm(x, *stats(m, x), use_input_stats=False),
         [(2, 3, 2, 2)]),
    case("lrn_3d", lambda m, x: F(m).local_response_norm(x, 3), [(2, 5, 3)]),
    case("lrn_4d", lambda m, x: F(m).local_response_norm(x, 2, alpha=0.5, beta=0.6, k=2.0), [(2, 4, 2, 3)]),
    case("lrn_5d", lambda m, x: F(m).local_response_norm(x, 4, alpha=0.3), [(1, 3, 2, 2, 2)]),
]
FLOAT32 = ["batch_norm_train_4d", "group_norm", "instance_norm", "lrn_4d"]


@pytest.mark.parametrize("fn, inputs, kw", CASES)
def test_float64(fn, inputs, kw):
    check(fn, inputs, **kw)


@pytest.mark.parametrize("fn, inputs, kw", [c for c in CASES if c.id in FLOAT32])
def test_float32(fn, inputs, kw):
    check(fn, inputs, dtype="float32", **kw)


@pytest.mark.parametrize("fn, kw", [
    ("batch_norm", dict(training=True, momentum=0.25)),
    ("instance_norm", dict(use_input_stats=True, momentum=0.4)),
])
def test_running_statistics_update_in_place_as_torch(fn, kw):
    x = np.random.default_rng(1).standard_normal((3, 2, 5))
    ours = [tt.tensor(np.array([0.5, -1.0])), tt.tensor(np.array([2.0, 0.5]))]
    theirs = [torch.tensor(np.array([0.5, -1.0])), torch.tensor(np.array([2.0, 0.5]))]
    before = ours[0]._version[0]
    getattr(F(tt), fn)(tt.tensor(x), *ours, **kw)
    getattr(F(torch), fn)(torch.tensor(x), *theirs, **kw)
    for a, b in zip(ours, theirs):   # running_var: the unbiased batch variance, as torch
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15)
    assert ours[0]._version[0] == before + 1   # an in-place write, seen by saved-tensor checks


def test_empty_batch_leaves_running_statistics_alone():
    rm, rv = tt.zeros(2, dtype=tt.float64), tt.ones(2, dtype=tt.float64)
    y = F(tt).batch_norm(tt.zeros(0, 2, 3, dtype=tt.float64), rm, rv, training=True)
    assert y.shape == (0, 2, 3) and rm.tolist() == [0.0, 0.0] and rv.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("call, words", [
    (lambda: F(tt).batch_norm(tt.ones(1, 3), None, None, training=True), "more than 1 value per channel"),
    (lambda: F(tt).batch_norm(tt.ones(2, 3), tt.zeros(4), tt.ones(4)), "running_mean of shape (4,)"),
    (lambda: F(tt).batch_norm(tt.ones(2, 3), None, None), "needed when training=False"),
    (lambda: F(tt).group_norm(tt.ones(2, 6, 2), 4), "do not split into num_groups=4"),
    (lambda: F(tt).instance_norm(tt.ones(2, 3)), "(N, C, spatial...)"),
    (lambda: F(tt).local_response_norm(tt.ones(2, 3), 2), "expected 3 or more dims"),
])
def test_errors_name_the_op_and_shapes(call, words):
    with pytest.raises(ValueError, match=None) as e:
        call()
    assert words in str(e.value) and str(e.value).split(":")[0] in (
        "batch_norm", "group_norm", "instance_norm", "local_response_norm")
