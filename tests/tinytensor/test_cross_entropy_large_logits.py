"""cross_entropy at large logits (|x| from 1e3 to 1e8), fused and reference, against torch in
the same dtype (float32 and float64).

At |x| = 1e8 a float32 holds only multiples of 8, so logsumexp(x) = max + log(sum) rounds
back to the max: a loss or gradient computed from that absolute logsumexp loses log(sum)
entirely (issue 9: [[1e8, 1e8]] gave loss 0 and gradient [1, 0]); at 1e3 the rounding (up
to half an ulp of 1e3, 3e-5 in float32) still moved the gradient by 1.5e-5. Computed from
x - max, as log_softmax does, the results are O(1) numbers whose accuracy does not depend on
the scale.

Tolerances, for a loss or gradient entry v against torch (or the reference) r:
|v - r| <= ATOL + RTOL * |r|, with ATOL = RTOL = 1e-6 in float32 and 1e-14 in float64: a few
ulps of an O(1) result (measured at most 2.5e-7 and 2.6e-16), far below the errors above
(float64 at 1e4: 5e-13; at 1e8: 1e-8)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tinytensor as tt
import tinytensor.functional as F
from tinytensor.ops.cross_entropy import FusedCrossEntropy

TOL = {np.float32: (1e-6, 1e-6), np.float64: (1e-14, 1e-14)}
SCALES = [1e3, 1e4, 1e6, 1e8]
C = 5


def _rows(scale, dtype):
    """Logits around +-scale; offsets in ulps of the scale (near-ties) and O(1) offsets,
    which at 1e8 float32 round onto multiples of 8."""
    ulp = float(np.spacing(dtype(scale)))
    base = np.array([
        [0, 0, 0, 0, 0],                      # a five-way tie
        [0, ulp, -ulp, 2 * ulp, -3 * ulp],    # near-ties
        [0, 1, -1, 2.5, -4],
        [0, -30, -60, -90, -1e3],             # one clear winner
        [0, 0, -ulp, -2 * ulp, -40],          # a two-way tie at the top
        [0, 2 * ulp, 2 * ulp, ulp, 0],        # a tie at the top, off column 0
    ])
    x = np.concatenate([scale + base, -scale + base])
    return x.astype(dtype)


def _targets(x):
    """Per row alternately the (first) max and a class that is not the max."""
    top = x.argmax(axis=1)
    t = np.where(np.arange(len(x)) % 2 == 0, top, (top + 1 + np.arange(len(x)) % (C - 1)) % C)
    return t.astype(np.int64)


def _tt(x, t, kw, reduction, fused, cot):
    xt = tt.tensor(x, requires_grad=True)
    kwt = dict(kw)
    if "weight" in kwt:
        kwt["weight"] = tt.tensor(kwt["weight"].astype(x.dtype))
    # no intermediate may overflow or turn into nan, forward or backward
    with np.errstate(over="raise", invalid="raise"), tt.kernels.use_fusion(fused):
        with tt.record() as tape:
            loss = F.cross_entropy(xt, tt.tensor(t), reduction=reduction, **kwt)
        (g,) = tt.grad((loss * tt.tensor(cot.astype(x.dtype))).sum(), [xt])
    assert (FusedCrossEntropy in {n.fn for n in tape.nodes}) == fused
    assert loss.dtype.name == x.dtype.name and g.dtype.name == x.dtype.name
    return np.asarray(loss.detach().numpy(), np.float64), np.asarray(g.numpy(), np.float64)


def _torch(x, t, kw, reduction, cot):
    xt = torch.tensor(x, requires_grad=True)
    kwt = dict(kw)
    if "weight" in kwt:
        kwt["weight"] = torch.tensor(kwt["weight"].astype(x.dtype))
    loss = TF.cross_entropy(xt, torch.tensor(t), reduction=reduction, **kwt)
    (loss * torch.tensor(cot.astype(x.dtype))).sum().backward()
    return loss.detach().double().numpy(), xt.grad.double().numpy()


def _close(got, want, dtype, what, names=("loss", "gradient")):
    atol, rtol = TOL[dtype]
    for name, a, b in zip(names, got, want):
        err = np.nan_to_num(np.abs(a - b) - (atol + rtol * np.abs(b)), nan=np.inf)  # nan: a mismatch
        worst = np.unravel_index(np.argmax(err), err.shape) if err.ndim else ()
        assert not (err > 0).any(), (
            f"cross_entropy {what}: {name} off at {tuple(int(i) for i in worst)}: got {float(a[worst])}, "
            f"want {float(b[worst])} (|diff| {float(abs(a[worst] - b[worst]))}, atol {atol}, rtol {rtol})")


OPTIONS = [
    ("plain", {}),
    ("ignore_index", {"ignore_index": 2}),
    ("label_smoothing", {"label_smoothing": 0.1}),
    ("weight", {"weight": np.array([0.5, 2.0, 1.0, 1.5, 0.25])}),
    ("weight smoothing ignore", {"weight": np.array([0.5, 2.0, 1.0, 1.5, 0.25]), "label_smoothing": 0.3,
                                 "ignore_index": 0}),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case,kw", OPTIONS, ids=[o[0] for o in OPTIONS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("scale", SCALES, ids=[f"{s:g}" for s in SCALES])
def test_matches_torch_fused_and_reference(scale, dtype, case, kw, reduction):
    x = _rows(scale, dtype)
    t = _targets(x)
    if "ignore_index" in kw:
        t[::3] = kw["ignore_index"]
    cot = np.random.default_rng(0).standard_normal(len(x)) if reduction == "none" else np.array(1.0)
    want = _torch(x, t, kw, reduction, cot)
    fused = _tt(x, t, kw, reduction, True, cot)
    ref = _tt(x, t, kw, reduction, False, cot)
    what = f"{case}, reduction={reduction}, {np.dtype(dtype).name}, logits at +-{scale:g}"
    _close(fused, want, dtype, f"fused vs torch ({what})")
    _close(ref, want, dtype, f"reference vs torch ({what})")
    _close(fused, ref, dtype, f"fused vs reference ({what})")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_issue_example_tie_at_1e8(dtype):
    """The reported case: log(2) and [0.5, -0.5], not 0 and [1, 0]."""
    x = tt.tensor(np.array([[1e8, 1e8]], dtype), requires_grad=True)
    loss = F.cross_entropy(x, tt.tensor(np.array([1])))
    loss.backward()
    atol = TOL[dtype][0]
    assert abs(float(loss.item()) - float(np.log(2))) <= atol, float(loss.item())
    np.testing.assert_allclose(x.grad.numpy(), [[0.5, -0.5]], atol=atol, rtol=0)


def test_ignored_row_with_huge_logits_has_zero_gradient():
    """Exactly zero whatever the ignored row holds: the backward used to exponentiate its
    logits unshifted, which overflowed (x > 88 in float32, x > 709 in float64) into
    inf * 0 = nan."""
    for dtype in (np.float32, np.float64):
        x = tt.tensor(np.array([[1e3, 0.0], [1.0, 2.0]], dtype), requires_grad=True)
        with np.errstate(over="raise", invalid="raise"):
            F.cross_entropy(x, tt.tensor(np.array([-100, 1]))).backward()
        assert x.grad.numpy()[0].tolist() == [0.0, 0.0], x.grad.numpy().tolist()


def test_gradient_of_gradient_at_1e8():
    """create_graph=True takes the backward written in tinytensor ops; it must agree too."""
    x0 = _rows(1e8, np.float32)
    t = _targets(x0)
    kw = {"label_smoothing": 0.1, "weight": np.array([0.5, 2.0, 1.0, 1.5, 0.25], np.float32)}
    xt = tt.tensor(x0, requires_grad=True)
    loss = F.cross_entropy(xt, tt.tensor(t), weight=tt.tensor(kw["weight"]), label_smoothing=0.1)
    (g,) = tt.grad(loss, [xt], create_graph=True)
    (gg,) = tt.grad((g * g).sum(), [xt])
    xth = torch.tensor(x0, requires_grad=True)
    lth = TF.cross_entropy(xth, torch.tensor(t), weight=torch.tensor(kw["weight"]), label_smoothing=0.1)
    (gth,) = torch.autograd.grad(lth, [xth], create_graph=True)
    (ggth,) = torch.autograd.grad((gth * gth).sum(), [xth])
    _close([np.asarray(v.detach().numpy(), np.float64) for v in (loss, g, gg)],
           [v.detach().double().numpy() for v in (lth, gth, ggth)], np.float32, "create_graph at 1e8",
           names=("loss", "gradient", "gradient of gradient"))
