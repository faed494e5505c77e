"""The one-hot basis that jacfwd / jacrev push through vmap, as torch.func does: leaf k of
`leaves` gets a tensor of shape (N,) + leaf.shape (N = all leaves' entries together) whose
rows off_k .. off_k + numel_k are the identity, the other rows zero. Mapping jvp (vjp_fn)
over dim 0 of it gives every column (row) of the Jacobian; vmap's chunk_size then says how
many basis vectors run per batched call."""
from ..core.tensor import Tensor


def offsets(leaves):
    """[(offset, numel)] per leaf, and the total N."""
    out, n = [], 0
    for x in leaves:
        out.append((n, x.numel()))
        n += x.numel()
    return out, n


def basis(leaves):
    spans, n = offsets(leaves)
    res = []
    for x, (off, m) in zip(leaves, spans):
        xp = x.device.xp
        a = xp.zeros((n, m), dtype=x.data.dtype)
        a[off:off + m] = xp.eye(m, dtype=x.data.dtype)
        res.append(Tensor._make(a.reshape((n,) + tuple(x.shape)), x._device, False))
    return res


def block(j, dim, off, m, shape):
    """Entries off .. off + m of j's basis dim `dim` (0 or last), reshaped to `shape`."""
    key = (slice(None),) * (dim % j.ndim) + (slice(off, off + m),)
    return j[key].reshape(shape)
