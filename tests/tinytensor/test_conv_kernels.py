"""kernels/c_conv.py, the 2-d convolutions' im2col and col2im in C: the NumPy path's bytes
(a copy; the same additions in the same order) over strides, paddings past the kernel, a
cropped high side and dilations, and conv2d through them against torch in float64 (forward,
gradients, double backward; at stride 1 through kernels/c_conv_shift.py's instead)."""
import importlib

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.kernels import c_conv_shift, c_eager
from tests.eager_c import needs_cc

pytestmark = needs_cc
C = importlib.import_module("tinytensor.ops.conv")

# (H, W, kernel, stride, padding, dilation)
GEOMETRIES = [
    (32, 32, (3, 3), (1, 1), (1, 1), (1, 1)),
    (33, 30, (3, 2), (2, 3), (2, 0), (1, 2)),
    (20, 41, (5, 5), (1, 2), (0, 3), (2, 1)),
    (37, 37, (1, 1), (2, 2), (0, 0), (1, 1)),
    (9, 40, (3, 3), (1, 1), (4, 4), (1, 1)),      # padding past the kernel: windows all padding
    (32, 32, (4, 4), (3, 3), (0, 0), (1, 1)),     # a negative high pad: the last row unread
]


def _numpy(fn, *args):
    prev = c_eager.set_enabled(False)
    try:
        return fn(*args)
    finally:
        c_eager.set_enabled(prev)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_im2col_and_col2im_are_the_numpy_path_s_bytes(dt, geometry):
    H, W, k, st, pad, dil = geometry
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 40, H, W)).astype(dt)
    x[0, 0, 0, :3] = [-0.0, np.nan, np.inf]
    pads = C.fit_pads((H, W), k, st, [(p, p) for p in pad], dil)
    before = c_eager.calls.get("im2col", 0), c_eager.calls.get("col2im", 0)
    col, out = C._im2col(x, k, st, pads, dil)
    want, _ = _numpy(C._im2col, x, k, st, pads, dil)
    assert col.flags.c_contiguous and col.shape == want.shape and col.tobytes() == want.tobytes()
    g = rng.standard_normal(col.shape).astype(dt)
    g[0, 0, 0, 0, 0, 0] = -0.0
    got = C._col2im(g, (H, W), k, st, pads, dil)
    want = np.ascontiguousarray(_numpy(C._col2im, g, (H, W), k, st, pads, dil))
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert (c_eager.calls.get("im2col", 0), c_eager.calls.get("col2im", 0)) == (before[0] + 1, before[1] + 1)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 2, 1), (1, 0, 2)])
def test_conv2d_through_the_kernels_matches_torch_to_second_order(stride, padding, dilation):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16, 24, 24))
    w = rng.standard_normal((8, 16, 3, 3))
    kw = dict(stride=stride, padding=padding, dilation=dilation)

    def run(lib, Fn, mk):
        X, Wt = mk(x), mk(w)
        y = Fn.conv2d(X, Wt, **kw)
        g = mk(np.cos(np.arange(np.prod(tuple(y.shape)))).reshape(tuple(y.shape)), False)
        gx, gw = lib.autograd.grad((y * g).sum(), [X, Wt], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        return [y.detach().numpy(), gx.detach().numpy(), gw.detach().numpy(), X.grad.numpy(), Wt.grad.numpy()]
    # stride 1 with output rows long enough: the shifted GEMMs (kernels/c_conv_shift.py,
    # tests/tinytensor/test_conv_shift.py)
    pads = C.fit_pads((24, 24), (3, 3), (stride,) * 2, [(padding, padding)] * 2, (dilation,) * 2)
    shifted = stride == 1 and c_conv_shift._geometry(4, 16, (24, 24), 8, (3, 3), pads, (dilation,) * 2, 1)
    assert shifted if (stride, padding, dilation) == (1, 1, 1) else not shifted
    kernels = ("conv_shift_forward", "conv_shift_input_grad", "conv_shift_weight_grad") if shifted \
        else ("im2col", "col2im")
    before = [c_eager.calls.get(k, 0) for k in kernels]
    got = run(tt, F, lambda a, r=True: tt.tensor(a, requires_grad=r))
    assert all(c_eager.calls.get(k, 0) > b for k, b in zip(kernels, before))
    want = run(torch, torch.nn.functional, lambda a, r=True: torch.tensor(a, requires_grad=r))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
