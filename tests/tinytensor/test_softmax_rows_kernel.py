"""kernels/c_softmax.py's softmax and log_softmax row passes against the generated row
kernels they replace in eager (what tt.compile generates): the same bytes, on rows that
probe the max's corner cases (the nan NumPy's SIMD max returns, by its place in the row and
the machine's lanes; zero maxima, tied and lone), and log_softmax against torch in float64."""
import importlib

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import functional as F
from tinytensor.kernels import c_eager, c_softmax
from tests.eager_c import needs_cc

pytestmark = needs_cc
S = importlib.import_module("tinytensor.ops.softmax")


def _rows(C, dt, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((40000 // C + 40, C)) * 5).astype(dt)
    minus_nan = -np.array(np.nan, dt)            # a nan that is not the default one
    for r, p in enumerate(sorted({0, 1, 3, 7, 8, 9, 15, 16, 17, C // 2, C - 2, C - 1})):
        if 0 <= p < C:
            x[2 + r, p] = minus_nan                # its place decides which nan the max returns
    x[0, :] = -np.inf
    x[1, :] = np.where(np.arange(C) % 2, 0.0, -0.0)   # zero maxima of both signs, tied
    x[20, :] = -0.0                                # a zero max of -0 only
    x[21, :] = -200.0
    x[21, C // 3] = -0.0                           # a lone zero max: log(sum) is exactly 0
    x[22, :] = -200.0
    x[22, C // 3] = 0.0
    x[22, C // 2] = -0.0
    return x


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
def test_the_row_pass_gives_the_generated_kernel_s_bytes(dt, log):
    name = "log_softmax" if log else "softmax"
    for C in (3, 10, 24, 129, 1000):
        x = _rows(C, dt, C)
        got = c_softmax.forward(x, log)
        want = c_eager.run(name, lambda t: S._forward_op(log)(t, -1), [x], ("rn",))[0]
        assert got.tobytes() == want.tobytes(), (C, np.argwhere(got.view(np.uint8) != want.view(np.uint8))[:4])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_log_softmax_runs_the_row_pass_and_agrees_with_torch(dt):
    x = (np.random.default_rng(1).standard_normal((300, 200)) * 4).astype(dt)
    g = np.random.default_rng(2).standard_normal(x.shape).astype(dt)
    before = c_eager.calls.get("log_softmax", 0)
    X = tt.tensor(x, requires_grad=True)
    y = F.log_softmax(X, -1)
    y.backward(tt.tensor(g))
    assert c_eager.calls.get("log_softmax", 0) == before + 1
    T = torch.tensor(x.astype(np.float64), requires_grad=True)
    yt = torch.log_softmax(T, -1)
    yt.backward(torch.tensor(g.astype(np.float64)))
    tol = 1e-5 if dt == np.float32 else 1e-13
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=tol, atol=tol)


def test_log_softmax_double_backward_matches_torch():
    x = np.random.default_rng(3).standard_normal((200, 180))
    g = np.random.default_rng(4).standard_normal(x.shape)

    def second(lib, Fn, mk):
        X = mk(x)
        gx, = lib.autograd.grad((Fn.log_softmax(X, -1) * mk(g, False)).sum(), [X], create_graph=True)
        (gx * gx).sum().backward()
        return X.grad.numpy()
    got = second(tt, F, lambda a, r=True: tt.tensor(a, requires_grad=r))
    want = second(torch, torch.nn.functional, lambda a, r=True: torch.tensor(a, requires_grad=r))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
