"""Distances and the bilinear form: pairwise_distance, pdist, bilinear.

pairwise_distance is torch's `norm(x1 - x2 + eps, p, last dim)`; pdist takes the p-norm of
the differences of every pair of rows i < j (row pairs from triu_indices, a function of the
shape only). Both reuse reduce.norm, whose gradient at a zero vector is 0 as torch's is.
"""
from ..core.tensor import Tensor
from .elementwise import absolute, cast, ne
from .movement import _where
from .reduce import norm, sum as sum_

__all__ = ["pairwise_distance", "pdist", "bilinear"]


def _pnorm(d, p, dim, keepdim, op):
    p = float(p)
    if p < 0:    # torch's norm for negative p: (sum |d|^p)^(1/p), -inf the smallest |d|
        if p == float("-inf"):
            return absolute(d).amin(dim, keepdim=keepdim)
        return sum_(absolute(d) ** p, dim=dim, keepdim=keepdim) ** (1.0 / p)
    if p == 0:   # the number of non-zero entries; no gradient, as torch
        return sum_(cast(ne(d, 0), d.dtype), dim=dim, keepdim=keepdim)
    return norm(d, p, dim=dim, keepdim=keepdim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dimension (broadcasting x1 and x2)."""
    if not isinstance(x1, Tensor) or not isinstance(x2, Tensor):
        raise TypeError("pairwise_distance: x1 and x2 must be Tensors")
    d = x1 - x2 + eps
    if d.ndim == 0:
        d = d.reshape(1)
        out = _pnorm(d, p, -1, keepdim, "pairwise_distance")
        return out if keepdim else out.reshape(())
    return _pnorm(d, p, -1, keepdim, "pairwise_distance")


def pdist(input, p=2):
    """The p-norm distance of every pair of rows i < j of input (N, M): N * (N - 1) / 2 values."""
    from ..creation_more import triu_indices
    if not isinstance(input, Tensor) or input.ndim != 2:
        raise RuntimeError(f"pdist: only supports 2-d inputs (N, M), got "
                           f"{tuple(getattr(input, 'shape', ()))}{_where()}")
    n = input.shape[0]
    i, j = triu_indices(n, n, 1, device=input.device)                 # (P,), (P,)
    d = input[i] - input[j]                                            # (P, M)
    return _pnorm(d, p, -1, False, "pdist")


def bilinear(input1, input2, weight, bias=None):
    """y_k = x1^T W_k x2 + b_k, with weight (out, in1, in2), over any leading dimensions."""
    from .linalg import einsum
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear: input1 {tuple(input1.shape)}, input2 "
                           f"{tuple(input2.shape)} and weight {tuple(weight.shape)} do not fit: "
                           f"expected weight (out, input1.shape[-1], input2.shape[-1]){_where()}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear: input1 {tuple(input1.shape)} and input2 "
                           f"{tuple(input2.shape)} must have the same leading dimensions{_where()}")
    out = einsum("...i,kij,...j->...k", input1, weight, input2)
    return out + bias if bias is not None else out
