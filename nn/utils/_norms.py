"""The arithmetic weight_norm and spectral_norm share between their hook form
(nn/utils/weight_norm.py, spectral_norm.py) and their parametrization form
(nn/utils/parametrizations.py), written once in recorded tensor ops."""
import tinytensor as tt
import tinytensor.functional as F


def norm_except_dim(v, dim):
    """torch's norm_except_dim(v, 2, dim): the 2-norm over every dim but `dim`, keeping
    v's rank (size 1 elsewhere); dim=-1 is torch's spelling for the whole tensor (0-d)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return (v * v).sum(dim=others, keepdim=True).sqrt() if others else (v * v).sqrt()


def weight_from(g, v, dim):
    """w = g * v / ||v||, the norm taken as norm_except_dim(v, dim)."""
    return v * (g / norm_except_dim(v, dim))


def default_spectral_dim(module):
    """dim=None: 1 for a transposed convolution (its weight is (in, out, ...)), else 0."""
    return 1 if type(module).__name__.startswith("ConvTranspose") else 0


def weight_matrix(weight, dim):
    """`weight` as a matrix: `dim` first, everything else flattened (torch's layout)."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.ndim) if d != dim])
    return weight.reshape(weight.shape[0], -1)


def normalize(x, eps):
    return F.normalize(x, dim=0, eps=eps)


def sigma(u, w_mat, v):
    """u . (W v): the spectral-norm estimate from the power iteration's vectors."""
    return (u * (w_mat @ v.reshape(-1, 1)).reshape(-1)).sum()


def assign(buffer, value):
    """Write a power-iteration result into its buffer in place (no gradient)."""
    with tt.no_grad():
        buffer.copy_(value)
