"""A module of ours beside torch's twin, on the same input: the check several test files
make (tests/nn/test_normalization.py, tests/models/test_unet.py)."""
import numpy as np
import torch

import tinytensor as tt


def forward_backward_both(ours, theirs, x, g, out_tol, grad_tol):
    """ours(x) and theirs(x) equal within out_tol = (rtol, atol), then the gradients of
    sum(y * g) at x equal within grad_tol; parameters' gradients are left for the caller."""
    a, b = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = ours(a), theirs(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=out_tol[0], atol=out_tol[1])
    (ya * tt.tensor(g)).sum().backward()
    (yb * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=grad_tol[0], atol=grad_tol[1])
