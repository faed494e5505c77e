"""Forward mode (issue 27) through the ops the op tables do not reach one by one: the fused
softmax / norm / attention / cross-entropy ops and their references, conv, pooling, dropout,
embeddings, the recurrent cells, scatter_reduce, the complex ops, linalg, fft, recompute.

Each case holds `tt.func.jvp` equal to `torch.func.jvp` in float64 (or, where torch has no
forward-mode formula or a wrong one, to torch's double-vjp `torch.autograd.functional.jvp`)
and checks that the op's own `jvp` rule ran: its Function is on the tape and never reached
the double-vjp fallback."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.func
import tinytensor.functional as F
from tinytensor.core import forward_ad
from tinytensor.kernels.fusion import use_fusion
from tinytensor.ops.attention import FlashAttention
from tinytensor.ops.conv import Conv, ConvTranspose
from tinytensor.ops.cross_entropy import FusedCrossEntropy
from tinytensor.ops.norms import FusedNorm, FusedRMSNorm, LayerNormCore, RMSNormCore
from tinytensor.ops.pooling import AdaptiveMaxPoolIndex, MaxPoolIndex, MaxUnpool
from tinytensor.ops.recurrent import GruCell, LstmCell, gru_cell, lstm_cell
from tinytensor.ops.scatter import Scatter, ScatterReduce
from tinytensor.ops.softmax import FusedLogSoftmax, FusedSoftmax, LogSoftmax, Softmax

torch = pytest.importorskip("torch")
TF = torch.nn.functional


class Case:
    """tt_fn / torch_fn over `arrays`; the first `n_tangent` of them get random tangents,
    the rest are passed as constants (targets, indices, masks). `ops`: the Functions whose
    rule must run. `ref`: "jvp" (torch.func.jvp) or "vjp2" (torch's double-vjp)."""

    def __init__(self, name, tt_fn, torch_fn, arrays, ops, n_tangent=None, ref="jvp", tol=1e-10):
        self.name, self.tt_fn, self.torch_fn, self.arrays = name, tt_fn, torch_fn, arrays
        self.ops, self.ref, self.tol = ops, ref, tol
        self.n = len(arrays) if n_tangent is None else n_tangent


def _rng(seed=0):
    return np.random.default_rng(seed)


def _reference(fn, *args, **kw):
    with use_fusion(False):
        return fn(*args, **kw)


def _lstm(z, c):
    i, f, g, o = z.chunk(4, 1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


def _sdpa(q, k, v, is_causal=False):
    """torch's attention in its math form: torch.func.jvp has no rule for the fused CPU kernel."""
    s = q @ k.mT / q.shape[-1] ** 0.5
    if is_causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def _layer_norm(x, w=None, b=None, nd=1):
    """torch's layer_norm in ops over the last `nd` dims: torch.func.jvp of a jvp of
    F.layer_norm is wrong in torch 2.13 (1.76 off the central difference of its own jvp, which
    ours and this agree with), and its first jvp costs ~10 s of one-time set-up."""
    dims = tuple(range(-nd, 0))
    xc = x - x.mean(dims, keepdim=True)
    y = xc / torch.sqrt((xc * xc).mean(dims, keepdim=True) + 1e-5)
    y = y * w if w is not None else y
    return y + b if b is not None else y


def _signed_eigh(LV, lib):
    """Eigenvectors with a positive first row: one sign convention for both libraries (sign's
    derivative is 0, so the tangent is signed alike)."""
    L, V = LV
    return L, V * lib.sign(V[..., :1, :])


def _gru(xp, hp, h):
    xr, xz, xn = xp.chunk(3, 1)
    hr, hz, hn = hp.chunk(3, 1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return n + z * (h - n)


def _cases():
    r = _rng(0)
    x3 = r.standard_normal((2, 3, 5))
    w35, b35 = r.standard_normal((3, 5)), r.standard_normal((3, 5))
    logits = r.standard_normal((4, 5, 3))
    target = np.array([[0, 4, 1], [2, 2, 0], [4, 1, 3], [0, 0, 1]])
    cw = r.uniform(0.5, 1.5, 5)
    q, k, v = r.standard_normal((2, 2, 5, 4)), r.standard_normal((2, 2, 6, 4)), r.standard_normal((2, 2, 6, 3))
    fmask = r.standard_normal((5, 6))
    fmask[1, 2] = -np.inf
    bmask = r.uniform(size=(5, 6)) > 0.3
    bmask[2] = False                      # a query row that sees no key: zeros, zero tangent
    img, wconv, wt = r.standard_normal((2, 4, 7, 6)), r.standard_normal((6, 2, 3, 3)), r.standard_normal((4, 3, 3, 3))
    x44 = r.standard_normal((2, 3, 8, 8))
    emb, ids = r.standard_normal((10, 4)), np.array([[1, 2, 1], [0, 9, 2]])
    xs, src = r.standard_normal((3, 5)), r.standard_normal((3, 4))
    sidx = np.array([[0, 1, 0, 4], [2, 2, 2, 2], [1, 0, 3, 3]])
    src0 = src.copy()
    src0[0, 0] = src0[2, 2] = 0.0    # zeros in a product: exclusive products (one per position:
    # torch's double backward refuses two, and its forward mode gives zeros for any product)
    tie = src.copy()
    tie[1, 1] = tie[1, 2] = 9.0                    # a tie for the max: shared evenly
    A = r.standard_normal((2, 4, 4))
    B = r.standard_normal((2, 4, 3))
    tall, wide = r.standard_normal((5, 3)), r.standard_normal((3, 5))
    re, im = r.standard_normal((3, 4)), r.uniform(0.2, 2.0, (3, 4))
    pos = r.uniform(0.2, 2.0, (3, 4))
    cases = [
        # softmax family: fused (last dim) and reference (another dim, or fusion off)
        Case("softmax fused", lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1), [x3], [FusedSoftmax]),
        Case("softmax dim 1", lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1), [x3], [Softmax]),
        Case("log_softmax fused", lambda x: F.log_softmax(x, -1), lambda x: TF.log_softmax(x, -1), [x3],
             [FusedLogSoftmax]),
        Case("log_softmax dim 0", lambda x: F.log_softmax(x, 0), lambda x: TF.log_softmax(x, 0), [x3], [LogSoftmax]),
        # norms
        Case("layer_norm fused affine", lambda x, w, b: F.layer_norm(x, (3, 5), w, b),
             lambda x, w, b: _layer_norm(x, w, b, nd=2), [x3, w35, b35], [FusedNorm]),
        Case("layer_norm fused x only", lambda x, w, b: F.layer_norm(x, (5,), w, b),
             _layer_norm, [x3, w35[0], b35[0]], [FusedNorm], n_tangent=1),
        Case("layer_norm reference", lambda x, w: _reference(F.layer_norm, x, (5,), w),
             _layer_norm, [x3, w35[0]], [LayerNormCore]),
        Case("rms_norm fused", lambda x, w: F.rms_norm(x, (3, 5), w), lambda x, w: TF.rms_norm(x, (3, 5), w),
             [x3, w35], [FusedRMSNorm]),
        Case("rms_norm reference", lambda x: _reference(F.rms_norm, x, (5,)), lambda x: TF.rms_norm(x, (5,)),
             [x3], [RMSNormCore]),
        # attention: fused (plain, causal, masks, GQA) and the reference with a float mask tangent
        Case("sdpa fused", F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [q, k, v],
             [FlashAttention]),
        Case("sdpa causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v], [FlashAttention]),
        Case("sdpa bool mask, dead row", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, bmask],
             [FlashAttention], n_tangent=3),
        Case("sdpa float mask const", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, fmask],
             [FlashAttention], n_tangent=3),
        Case("sdpa float mask tangent (reference)",
             lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, fmask],
             [FusedSoftmax]),
        Case("sdpa gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True),
             [r.standard_normal((2, 4, 5, 4)), k, v], [FlashAttention]),
        Case("sdpa key tangent only", lambda k, q, v: F.scaled_dot_product_attention(q, k, v),
             lambda k, q, v: TF.scaled_dot_product_attention(q, k, v), [k, q, v], [FlashAttention], n_tangent=1),
    ]
    # cross-entropy: the fused op over reductions, ignore_index, smoothing, class weights
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.2):
            cases.append(Case(
                f"cross_entropy fused {red} ls={ls}",
                lambda x, t, w, red=red, ls=ls: F.cross_entropy(x, t, w, ignore_index=1, reduction=red,
                                                                label_smoothing=ls),
                lambda x, t, w, red=red, ls=ls: TF.cross_entropy(x, t, w, ignore_index=1, reduction=red,
                                                                 label_smoothing=ls),
                [logits, target, cw], [FusedCrossEntropy], n_tangent=1))
    cases += [
        Case("cross_entropy 1-d none", lambda x, t: F.cross_entropy(x, t, reduction="none"),
             lambda x, t: TF.cross_entropy(x, t, reduction="none"), [logits[0, :, 0], np.array(3)],
             [FusedCrossEntropy], n_tangent=1),
        Case("cross_entropy probabilities", F.cross_entropy, TF.cross_entropy,
             [logits, TF.softmax(torch.tensor(r.standard_normal((4, 5, 3))), 1).numpy()], [LogSoftmax]),
        # conv
        Case("conv2d stride pad groups", lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2),
             lambda x, w: TF.conv2d(x, w, stride=2, padding=1, groups=2), [img, wconv], [Conv]),
        Case("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
             lambda x, w: TF.conv_transpose2d(x, w, stride=2, padding=1), [img, wt], [ConvTranspose]),
        Case("conv1d weight only", lambda w, x: F.conv1d(x, w), lambda w, x: TF.conv1d(x, w),
             [wconv[:, :, 0], img[:, :2, 0]], [Conv], n_tangent=1),
        # pooling: the winners' op gives no tangent, the gather carries it
        Case("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1), [x44],
             [MaxPoolIndex]),
        Case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (3, 2)),
             lambda x: TF.adaptive_max_pool2d(x, (3, 2)), [x44], [AdaptiveMaxPoolIndex]),
        Case("max_unpool2d", lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
             lambda x: TF.max_unpool2d(*TF.max_pool2d(x, 2, return_indices=True), 2), [x44],
             [MaxPoolIndex, MaxUnpool]),
        # embeddings
        Case("embedding", lambda w, i: F.embedding(i, w), lambda w, i: TF.embedding(i, w), [emb, ids], [],
             n_tangent=1),
        # recurrent cells (the reference: the same formula in torch ops)
        Case("lstm_cell h", lambda z, c: lstm_cell(z, c)[0], lambda z, c: _lstm(z, c)[0],
             [r.standard_normal((2, 12)), r.standard_normal((2, 3))], [LstmCell]),
        Case("lstm_cell c, z only", lambda z, c: lstm_cell(z, c)[1], lambda z, c: _lstm(z, c)[1],
             [r.standard_normal((2, 12)), r.standard_normal((2, 3))], [LstmCell], n_tangent=1),
        Case("gru_cell", gru_cell, _gru, [r.standard_normal((2, 9)), r.standard_normal((2, 9)),
                                          r.standard_normal((2, 3))], [GruCell]),
        Case("gru_cell h and hp", lambda hp, h, xp: gru_cell(xp, hp, h), lambda hp, h, xp: _gru(xp, hp, h),
             [r.standard_normal((2, 9)), r.standard_normal((2, 3)), r.standard_normal((2, 9))], [GruCell],
             n_tangent=2),
        # scatter: torch.func.jvp gives zeros for a product (torch 2.13), so prod is held to
        # torch's double-vjp
        Case("scatter", lambda x, s, i: tt.scatter(x, 1, i, s), lambda x, s, i: torch.scatter(x, 1, i, s),
             [xs, src, np.array([[0, 1, 3, 4], [2, 0, 1, 3], [1, 0, 3, 4]])], [Scatter], n_tangent=2),
    ]
    for red, s in (("sum", src), ("mean", src), ("amax", tie), ("amin", src), ("prod", src0)):
        for inc in (True, False):
            cases.append(Case(
                f"scatter_reduce {red} include_self={inc}",
                lambda x, s, i, red=red, inc=inc: tt.scatter_reduce(x, 1, i, s, red, include_self=inc),
                lambda x, s, i, red=red, inc=inc: torch.scatter_reduce(x, 1, i, s, red, include_self=inc),
                [xs, s, sidx], [ScatterReduce], n_tangent=2, ref="vjp2" if red == "prod" else "jvp"))
    L, TL = tt.linalg, torch.linalg
    cases += [
        # complex ops, through real inputs and outputs
        Case("complex abs", lambda a, b: tt.complex(a, b).abs(), lambda a, b: torch.complex(a, b).abs(), [re, im],
             []),
        Case("polar", lambda a, b: tt.view_as_real(tt.polar(a, b)), lambda a, b: torch.view_as_real(torch.polar(a, b)),
             [re, im], []),
        Case("angle, sgn, conj, imag", lambda a, b: tt.cat([tt.angle(tt.complex(a, b)),
                                                            tt.imag(tt.conj_physical(tt.sgn(tt.complex(a, b))))]),
             lambda a, b: torch.cat([torch.angle(torch.complex(a, b)),
                                     torch.imag(torch.conj_physical(torch.sgn(torch.complex(a, b))))]), [re, im], []),
        # linalg
        Case("det", L.det, TL.det, [A], [], tol=1e-9),
        Case("slogdet", lambda a: L.slogdet(a)[1], lambda a: TL.slogdet(a)[1], [A], []),
        Case("inv", L.inv, TL.inv, [A], [], tol=1e-9),
        Case("solve", L.solve, TL.solve, [A, B], [], tol=1e-9),
        Case("solve_triangular", lambda a, b: L.solve_triangular(a, b, upper=True),
             lambda a, b: TL.solve_triangular(a, b, upper=True), [A, B], [], tol=1e-9),
        Case("svd tall", lambda a: L.svd(a, full_matrices=False), lambda a: TL.svd(a, full_matrices=False), [tall],
             [], tol=1e-9),
        Case("svdvals wide", L.svdvals, TL.svdvals, [wide], []),
        Case("eigh, vectors signed alike", lambda a: _signed_eigh(L.eigh(a), tt), lambda a: _signed_eigh(TL.eigh(a), torch),
             [A[0] + A[0].T], []),
        Case("qr wide", L.qr, TL.qr, [wide], []),
        Case("qr tall", L.qr, TL.qr, [tall], []),
        Case("pinv", L.pinv, TL.pinv, [tall], [], tol=1e-9),
        Case("matrix_exp", L.matrix_exp, TL.matrix_exp, [A * 0.5], [], tol=1e-9),
        Case("lu_factor", lambda a: L.lu_factor(a)[0], lambda a: TL.lu_factor(a)[0], [A], [], tol=1e-9),
        Case("eig", lambda a: [tt.view_as_real(t) for t in L.eig(a)],
             lambda a: [torch.view_as_real(t) for t in TL.eig(a)], [A], [], tol=1e-9),
        # fft
        Case("rfft", lambda x: tt.view_as_real(tt.fft.rfft(x, norm="ortho")),
             lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")), [re], []),
        Case("irfft of rfft", lambda x: tt.fft.irfft(tt.fft.rfft(x), n=4),
             lambda x: torch.fft.irfft(torch.fft.rfft(x), n=4), [re], []),
        # special functions torch has no forward mode for: its double-vjp
        Case("zeta in q", lambda q, x: tt.special.zeta(x, q), lambda q, x: torch.special.zeta(x, q),
             [pos + 1.0, pos + 2.0], [], n_tangent=1, ref="vjp2"),
        Case("gammaincc in x", lambda x, a: tt.special.gammaincc(a, x), lambda x, a: torch.special.gammaincc(a, x),
             [pos, pos + 1.0], [], n_tangent=1, ref="vjp2"),
        Case("xlogy zeros", tt.special.xlogy, torch.special.xlogy,
             [np.where(re > 0.5, 0.0, re), pos], []),
    ]
    return cases


CASES = _cases()


def _tensors(arrays, lib):
    return [lib.tensor(a) for a in arrays]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    return [out]


def _as_np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_jvp_matches_torch(case, monkeypatch):
    fell_back = []
    real = forward_ad._double_vjp

    def spy(cls, *args):
        fell_back.append(cls)
        return real(cls, *args)
    monkeypatch.setattr(forward_ad, "_double_vjp", spy)

    rng = _rng(1)
    tangents = [rng.standard_normal(np.shape(a)) for a in case.arrays[:case.n]]
    consts = case.arrays[case.n:]
    tt_consts, th_consts = _tensors(consts, tt), _tensors(consts, torch)
    with tt.record() as tape:
        out, tan = tt.func.jvp(lambda *p: case.tt_fn(*p, *tt_consts), tuple(_tensors(case.arrays[:case.n], tt)),
                               tuple(_tensors(tangents, tt)))
    fn = lambda *p: case.torch_fn(*p, *th_consts)   # noqa: E731
    prim, tang = tuple(_tensors(case.arrays[:case.n], torch)), tuple(_tensors(tangents, torch))
    if case.ref == "jvp":
        ref_out, ref_tan = torch.func.jvp(fn, prim, tang)
    else:
        ref_out, ref_tan = torch.autograd.functional.jvp(fn, prim, tang)
    for got, want in zip(_flat(out) + _flat(tan), _flat(ref_out) + _flat(ref_tan)):
        np.testing.assert_allclose(_as_np(got), _as_np(want), rtol=case.tol, atol=case.tol)
    ran = {node.fn for node in tape}
    for op in case.ops:
        assert op in ran, f"{case.name}: {op.__name__} did not run"
        assert op.jvp is not None and op not in fell_back, f"{case.name}: {op.__name__} fell back"


# ---------------------------------------------------------------- fused ops' rules nest
@pytest.mark.parametrize("which", ["softmax", "layer_norm", "attention", "cross_entropy"])
def test_jvp_of_jvp_matches_torch(which):
    r = _rng(3)
    if which == "attention":
        shape = (1, 2, 4, 3)
        kv = [r.standard_normal(shape), r.standard_normal(shape)]
        f_tt = lambda q: F.scaled_dot_product_attention(q, *[tt.tensor(a) for a in kv], is_causal=True)  # noqa
        f_th = lambda q: _sdpa(q, *[torch.tensor(a) for a in kv], is_causal=True)  # noqa: E731
    elif which == "cross_entropy":
        shape, tgt = (4, 5), np.array([1, 0, 4, 2])
        f_tt = lambda x: F.cross_entropy(x, tt.tensor(tgt), label_smoothing=0.1)  # noqa: E731
        f_th = lambda x: TF.cross_entropy(x, torch.tensor(tgt), label_smoothing=0.1)  # noqa: E731
    elif which == "layer_norm":
        shape, w = (3, 6), r.standard_normal(6)
        f_tt = lambda x: F.layer_norm(x, (6,), tt.tensor(w))  # noqa: E731
        f_th = lambda x: _layer_norm(x, torch.tensor(w))  # noqa: E731
    else:
        shape = (3, 6)
        f_tt, f_th = (lambda x: F.softmax(x, -1)), (lambda x: TF.softmax(x, -1))
    x, t1, t2 = (r.standard_normal(shape) for _ in range(3))

    def second(jvp, f, lib):   # d/ds d/du f(x + u t1 + s t2) by jvp of jvp
        X, T1, T2 = (lib.tensor(a) for a in (x, t1, t2))
        return jvp(lambda y: jvp(f, (y,), (T1,))[1], (X,), (T2,))[1]
    got = second(tt.func.jvp, f_tt, tt)
    want = second(torch.func.jvp, f_th, torch)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-10)


def test_forward_over_reverse_through_fused_ops():
    """jvp of a gradient (a Hessian-vector product) through the fused norm, attention and
    cross-entropy: their backward formulas carry tangents through the rules."""
    r = _rng(4)
    x, t = r.standard_normal((2, 4, 6)), r.standard_normal((2, 4, 6))
    w, tgt = r.standard_normal(6), np.array([[1, 0, 5, 2], [3, 3, 0, 1]])

    def loss_tt(x):
        h = F.layer_norm(x, (6,), tt.tensor(w))
        a = F.scaled_dot_product_attention(h[:, None], h[:, None], h[:, None], is_causal=True)[:, 0]
        return F.cross_entropy(a.transpose(1, 2), tt.tensor(tgt))   # (B, C=6, T=4) logits

    def loss_torch(x):
        h = _layer_norm(x, torch.tensor(w))
        a = _sdpa(h[:, None], h[:, None], h[:, None], is_causal=True)[:, 0]
        return TF.cross_entropy(a.transpose(1, 2), torch.tensor(tgt))

    def grad_tt(x):
        x = x if x.requires_grad else x.requires_grad_()
        return tt.grad(loss_tt(x), x, create_graph=True)[0]
    with tt.record() as tape:
        got = tt.func.jvp(grad_tt, (tt.tensor(x),), (tt.tensor(t),))[1]
    assert {FusedNorm, FlashAttention, FusedCrossEntropy} <= {n.fn for n in tape}
    want = torch.func.jvp(torch.func.grad(loss_torch), (torch.tensor(x),), (torch.tensor(t),))[1]
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-9, atol=1e-10)


# ---------------------------------------------------------------- paths and refusals
def test_cross_entropy_weight_with_tangent_takes_the_reference():
    """The fused op gives no derivative for class weights: a weight carrying a tangent sends
    the call to the reference decomposition (as one requiring grad does), whose tangent is
    the central difference's."""
    r = _rng(5)
    x, w, tw = r.standard_normal((4, 3)), r.uniform(0.5, 1.5, 3), r.standard_normal(3)
    tgt = tt.tensor(np.array([0, 2, 1, 2]))
    f = lambda w: F.cross_entropy(tt.tensor(x), tgt, w)  # noqa: E731
    with tt.record() as tape:
        _, tan = tt.func.jvp(f, (tt.tensor(w),), (tt.tensor(tw),))
    assert FusedCrossEntropy not in {n.fn for n in tape}
    h = 1e-6
    fd = (f(tt.tensor(w + h * tw)).item() - f(tt.tensor(w - h * tw)).item()) / (2 * h)
    assert abs(tan.item() - fd) < 1e-7


def test_no_derivative_ops_refuse_in_forward_mode_as_in_reverse():
    x = tt.tensor(np.array([0.3, 0.6]))
    with pytest.raises(RuntimeError, match="chebyshev_polynomial_t: the derivative"):
        tt.func.jvp(lambda x: tt.special.chebyshev_polynomial_t(x, tt.tensor(np.array([2.0, 3.0]))), (x,), (x,))
    with pytest.raises(RuntimeError, match=r"special.zeta: the derivative with respect to input \(x\)"):
        tt.func.jvp(lambda s: tt.special.zeta(s, tt.tensor(np.array([2.0, 3.0]))), (x + 2.0,), (x,))


def test_dropout_tangent_takes_the_same_mask():
    r = _rng(6)
    x, t = r.standard_normal((4, 8)), r.standard_normal((4, 8))
    tt.manual_seed(7)
    out, tan = tt.func.jvp(lambda x: F.dropout(x, 0.5), (tt.tensor(x),), (tt.tensor(t),))
    mask = out.numpy() / x
    assert set(np.round(np.unique(mask), 12)) <= {0.0, 2.0}
    np.testing.assert_allclose(tan.numpy(), t * mask, rtol=1e-12, atol=0)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
def test_grad_norm_of_gradients_with_tangents(p):
    """clip_grad_norm_'s norm op, reached by gradients that carry tangents."""
    from tinytensor.nn.clip import _GradNorm
    r = _rng(8)
    a, t = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    got = tt.func.jvp(lambda a: _GradNorm.apply(a, norm_type=p), (tt.tensor(a),), (tt.tensor(t),))
    want = torch.func.jvp(lambda a: torch.linalg.vector_norm(a, p), (torch.tensor(a),), (torch.tensor(t),))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)


def test_embedding_scale_grad_by_freq_passes_the_tangent():
    """scale_grad_by_freq puts ScaleGrad on the tape when the weight requires grad: identity
    forward, so the tangent passes unscaled (as torch's)."""
    from tinytensor.ops.embedding_bag import ScaleGrad
    r = _rng(9)
    w, t, ids = r.standard_normal((10, 4)), r.standard_normal((10, 4)), np.array([[1, 2, 1], [0, 9, 2]])
    with tt.record() as tape:
        _, got = tt.func.jvp(lambda w: F.embedding(tt.tensor(ids), w, scale_grad_by_freq=True),
                             (tt.tensor(w).requires_grad_(),), (tt.tensor(t),))
    assert ScaleGrad in {n.fn for n in tape}
    want = torch.func.jvp(lambda w: TF.embedding(torch.tensor(ids), w, scale_grad_by_freq=True),
                          (torch.tensor(w),), (torch.tensor(t),))[1]
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=0, atol=0)
