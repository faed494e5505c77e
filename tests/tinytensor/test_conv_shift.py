"""kernels/c_conv_shift.py, stride-1 2-d convolutions as shifted GEMMs: its three faces
(forward, input gradient, weight gradient) against the NumPy im2col path and torch in
float64 and float32 over odd geometries (H != W, C != O, paddings 0-4 and 'same',
kernels 1x1 to 5x3, dilations, groups, N = 1 and 3: the `small` fixture lowers the speed
limits that would send those to im2col), through the Tensor faces to second order, the same
bits at 1 and 2 pool threads, garbage columns that cannot leak, infs and nans as the
reference gives them (or the im2col path where the kernel steps aside), an empty batch, and
the shapes left to im2col at the default limits."""
import importlib

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.kernels import c_conv_shift as S, c_eager
from tests.eager_c import needs_cc, numpy_path, run_noting_kernels

pytestmark = needs_cc
C = importlib.import_module("tinytensor.ops.conv")
FACES = ("conv_shift_forward", "conv_shift_input_grad", "conv_shift_weight_grad")


@pytest.fixture
def small(monkeypatch):
    """Odd small sizes and single images take the kernels too (below c_eager.MIN_ELEMENTS,
    S.MIN_OUTPUT or S.MIN_IMAGES, speed's limits, they would not)."""
    monkeypatch.setattr(c_eager, "MIN_ELEMENTS", 1)
    monkeypatch.setattr(S, "MIN_OUTPUT", 1)
    monkeypatch.setattr(S, "MIN_IMAGES", 1)


# (N, C, O, H, W, kernel, padding, dilation, groups)
GEOMETRIES = [
    (3, 5, 7, 13, 23, (3, 3), (1, 1), (1, 1), 1),
    (1, 6, 4, 11, 40, (5, 3), (2, 0), (1, 1), 1),
    (3, 4, 6, 9, 31, (1, 1), (0, 0), (1, 1), 1),
    (2, 8, 6, 10, 34, (3, 3), (2, 2), (2, 1), 1),
    (3, 6, 9, 12, 23, (3, 3), (1, 1), (1, 1), 3),
    (2, 4, 4, 5, 20, (3, 3), (4, 4), (1, 1), 1),   # padding past the kernel: windows all padding
    (1, 3, 5, 24, 60, (5, 3), (0, 1), (2, 3), 1),
]


def _case(geometry, dt, seed=0):
    N, Cin, O, H, W, k, pad, dil, groups = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, Cin, H, W)).astype(dt)
    w = rng.standard_normal((O, Cin // groups) + k).astype(dt)
    pads = C.fit_pads((H, W), k, (1, 1), [(p, p) for p in pad], dil)
    out = C.out_size((H, W), k, (1, 1), pads, dil)
    g = rng.standard_normal((N, O) + out).astype(dt)
    return x, w, g, dict(stride=(1, 1), pads=pads, dilation=dil, groups=groups)


def _faces(x, w, g, a):
    """(y, dx, dw) of the three array faces, and the kernels that ran."""
    def run():
        return (C.conv_arrays(x, w, **a), C.conv_input_grad_arrays(g, w, x.shape[2:], **a),
                C.conv_weight_grad_arrays(x, g, w.shape[2:], **a))
    return run_noting_kernels(run)


def _torch_faces(x, w, g, a):
    (lo_h, hi_h), (lo_w, hi_w) = a["pads"]
    X = torch.tensor(np.pad(x, ((0, 0), (0, 0), (lo_h, hi_h), (lo_w, hi_w))), requires_grad=True)
    Wt = torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(X, Wt, dilation=a["dilation"], groups=a["groups"])
    (y * torch.tensor(g)).sum().backward()
    H, W = x.shape[2:]
    return y.detach().numpy(), X.grad.numpy()[:, :, lo_h:lo_h + H, lo_w:lo_w + W], Wt.grad.numpy()


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_three_faces_match_torch_and_the_im2col_path(small, dt, geometry):
    x, w, g, a = _case(geometry, dt)
    got, ran = _faces(x, w, g, a)
    assert set(FACES) <= ran and not ran & {"im2col", "col2im"}
    want = numpy_path(lambda: _faces(x, w, g, a)[0])
    ref = _torch_faces(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64), a)
    tol = dict(rtol=1e-12, atol=1e-12) if dt == np.float64 else dict(rtol=2e-5, atol=2e-5)
    for name, mine, numpy_, torch_ in zip(("y", "dx", "dw"), got, want, ref):
        assert mine.dtype == dt and mine.shape == numpy_.shape == torch_.shape, name
        scale = max(1.0, np.abs(torch_).max())   # relative to the result's size
        np.testing.assert_allclose(mine / scale, torch_ / scale, **tol, err_msg=name)
        np.testing.assert_allclose(mine / scale, numpy_ / scale, **tol, err_msg=name)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")   # torch's
@pytest.mark.parametrize("op", ["conv2d", "same", "transpose"])
def test_through_the_tensor_faces_to_second_order_against_torch(small, op):
    """conv2d (padding 1 and 'same' with an even kernel: a high pad one more than the low)
    and conv_transpose2d at stride 1 (output_padding past the padding: a negative high pad,
    a dropped input row), gradients and double backward, float64."""
    rng = np.random.default_rng(1)
    if op == "transpose":
        x, w = rng.standard_normal((3, 6, 13, 37)), rng.standard_normal((6, 4, 3, 3))
        kw = dict(padding=0, output_padding=1, dilation=2)
    else:
        x, w = rng.standard_normal((3, 6, 13, 21)), rng.standard_normal((5, 6, 3, 3) if op == "conv2d" else (5, 6, 4, 2))
        kw = dict(padding=1 if op == "conv2d" else "same")

    def run(lib, Fn, mk):
        X, Wt = mk(x), mk(w)
        y = (Fn.conv_transpose2d if op == "transpose" else Fn.conv2d)(X, Wt, **kw)
        g = mk(np.cos(np.arange(np.prod(tuple(y.shape)))).reshape(tuple(y.shape)), False)
        gx, gw = lib.autograd.grad((y * g).sum(), [X, Wt], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        return [y.detach().numpy(), gx.detach().numpy(), gw.detach().numpy(), X.grad.numpy(), Wt.grad.numpy()]
    got, ran = run_noting_kernels(run, tt, F, lambda a, r=True: tt.tensor(a, requires_grad=r))
    assert set(FACES) <= ran and not ran & {"im2col", "col2im"}
    want = run(torch, torch.nn.functional, lambda a, r=True: torch.tensor(a, requires_grad=r))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_one_and_two_pool_threads_give_the_same_bits(dt):
    from tinytensor.compiler.codegen import threads
    blas = threads.blas()
    if blas is None or (__import__("os").cpu_count() or 1) < 2:
        pytest.skip("needs OpenBLAS (whose thread count the pool follows) and two cores")
    x, w, g, a = _case((8, 32, 24, 20, 36, (3, 3), (1, 1), (1, 1), 1), dt, seed=2)
    before = blas.get()
    try:
        blas.set(1)
        one, ran = _faces(x, w, g, a)
        blas.set(2)
        two, _ = _faces(x, w, g, a)
    finally:
        blas.set(before)
    assert set(FACES) <= ran
    for p, q in zip(one, two):
        assert p.tobytes() == q.tobytes()


def test_the_garbage_columns_never_reach_a_result(small):
    """Each tap's GEMM row reads the columns past the output row (the next row's start: real
    input), which g's widened copy zeroes: huge values there (x's first and last columns,
    which those columns read) change no result, nor do g's values: float64 against the
    im2col path to 1e-12 of each result's size (a g column of 1 leaking onto x's 1e150
    would be ~1e150 wherever it landed)."""
    x, w, g, a = _case((2, 5, 6, 12, 70, (3, 5), (1, 2), (1, 2), 1), np.float64, seed=3)
    x[:, :, :, :3] = 1e150
    x[:, :, :, -3:] = -1e150
    got, ran = _faces(x, w, g, a)
    assert set(FACES) <= ran
    want = numpy_path(lambda: _faces(x, w, g, a)[0])
    for mine, ref in zip(got, want):
        assert np.isfinite(ref).all()
        np.testing.assert_allclose(mine, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("where", ["x", "w", "g"])
def test_infs_and_nans_come_out_as_the_reference_gives_them(small, where):
    """An inf or nan in x, w or g: the same result, nan for nan, inf for inf. Where a
    garbage column would give 0 * inf (an inf in w: the input gradient; in x: the weight
    gradient) that face steps aside to the im2col path."""
    x, w, g, a = _case((3, 4, 5, 12, 24, (3, 3), (1, 1), (1, 1), 1), np.float64, seed=4)
    arr = {"x": x, "w": w, "g": g}[where]
    arr[0, 1, 2, 1] = np.inf
    arr[1, 0, 1, -1] = -np.inf
    arr[2, 3, 0, 0] = np.nan
    got, ran = _faces(x, w, g, a)
    stepped = {"x": {"conv_shift_weight_grad"}, "w": {"conv_shift_input_grad"}, "g": set()}[where]
    assert ran & set(FACES) == set(FACES) - stepped
    want = numpy_path(lambda: _faces(x, w, g, a)[0])
    for mine, ref, reads in zip(got, want, ("xw", "gw", "xg")):
        assert np.isfinite(ref).all() == (where not in reads)
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(ref))
        np.testing.assert_array_equal(np.isposinf(mine), np.isposinf(ref))
        np.testing.assert_allclose(mine, ref, rtol=1e-12, atol=1e-12)


def test_an_inf_where_no_window_reads_does_not_step_aside(small):
    """A negative high pad drops the last input row: an inf there is never read, so the
    weight gradient stays on the kernel (and is finite, as the reference's)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 10, 40))
    a = dict(stride=(1, 1), pads=((0, -1), (1, 1)), dilation=(1, 1), groups=1)
    x[:, :, -1, :] = np.inf
    g = rng.standard_normal((2, 4) + C.out_size((10, 40), (3, 3), (1, 1), a["pads"], (1, 1)))
    got, ran = run_noting_kernels(lambda: C.conv_weight_grad_arrays(x, g, (3, 3), **a))
    want = numpy_path(C.conv_weight_grad_arrays, x, g, (3, 3), **a)
    assert "conv_shift_weight_grad" in ran and np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_an_empty_batch_is_right():
    x = tt.tensor(np.zeros((0, 4, 12, 20)), requires_grad=True)
    w = tt.tensor(np.random.default_rng(6).standard_normal((5, 4, 3, 3)), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert tuple(y.shape) == (0, 5, 12, 20)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 4, 12, 20) and (w.grad.numpy() == 0).all()
    assert S.forward(x.detach().numpy(), w.detach().numpy(), ((1, 1), (1, 1)), (1, 1), 1) is None


def test_small_images_short_rows_single_images_and_other_dtypes_fall_back():
    """Images of fewer than MIN_OUTPUT outputs (16x16), an output row under ROW_PER_GARBAGE
    times its garbage columns (3x3 at padding 0: two a row) and a single image run im2col
    (slower there: module docstring), and so does float16; the C kernels off, NumPy."""
    for geometry in [(2, 16, 16, 16, 16, (3, 3), (1, 1), (1, 1), 1),
                     (2, 16, 16, 40, 17, (3, 3), (0, 0), (1, 1), 1),
                     (1, 16, 16, 40, 40, (3, 3), (1, 1), (1, 1), 1)]:
        x, w, g, a = _case(geometry, np.float64)
        got, ran = _faces(x, w, g, a)
        assert not ran & set(FACES), geometry
    x, w, g, a = _case((2, 24, 16, 40, 18, (3, 3), (0, 0), (1, 1), 1), np.float64)
    _, ran = _faces(x, w, g, a)
    assert set(FACES) <= ran   # 16 = 8 x 2 columns, 38 x 16 outputs: the limits
    _, ran = _faces(x.astype(np.float16), w.astype(np.float16), g.astype(np.float16), a)
    assert not ran & set(FACES)
    _, ran = numpy_path(lambda: _faces(x, w, g, a))
    assert not ran
