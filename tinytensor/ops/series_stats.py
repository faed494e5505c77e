"""Differences, integrals and covariances along a dim, as torch: diff, gradient, trapezoid /
trapz, cumulative_trapezoid, cov, corrcoef, renorm, equal. All are compositions of recorded
ops (narrow, sums, matmul, cumsum), so their gradients and double backward follow, and a
compiled program recomputes them from each call's values."""
import numbers


from ..core.tensor import Tensor
from ..messages import plain
from .elementwise import cast, clamp, eq, ne, sqrt, where
from .linalg import matmul
from .movement import _where, cat, narrow, norm_dim, reshape, squeeze
from .reduce import all as all_, cumsum, norm, sum, mean
from .diagonal import diagonal

__all__ = ["renorm_", "diff", "gradient", "trapezoid", "trapz", "cumulative_trapezoid", "cov", "corrcoef",
           "renorm", "equal"]


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _head(x, d, k=1):
    """x without its last k entries along d."""
    return narrow(x, d, 0, x.shape[d] - k)


def _tail(x, d, k=1):
    """x without its first k entries along d."""
    return narrow(x, d, k, x.shape[d] - k)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (prepend/append joined first); bool: xor."""
    x = _tensor(input, "diff")
    if x.ndim == 0:
        raise ValueError("diff: expected at least a 1-d tensor, got a 0-d one")
    d = norm_dim(dim, x.ndim, "diff")
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {plain(n)}")
    if n == 0:  # like torch: nothing is differenced, prepend and append are not joined
        return x
    parts = []
    for extra, name in ((prepend, "prepend"), (None, None), (append, "append")):
        if name is None:
            parts.append(x)
        elif extra is not None:
            extra = _tensor(extra, "diff", name)
            if extra.ndim == 0:  # like torch: a scalar extends the dim by one
                shape = list(x.shape)
                shape[d] = 1
                extra = extra.reshape((1,) * x.ndim).expand(*shape)
            parts.append(extra)
    if len(parts) > 1:
        x = cat(parts, d)
    for _ in range(n):
        if x.shape[d] == 0:
            break
        a, b = _tail(x, d), _head(x, d)
        x = ne(a, b) if x.dtype.name == "bool" else a - b
    return x


def _spacings(input, spacing, dims, op):
    """Per dim: a Python number (uniform) or a 1-d coordinate tensor."""
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.ndim == 1 and len(dims) == 1):
        if isinstance(spacing, Tensor):
            if spacing.ndim != 0:
                raise ValueError(f"{op}: a tensor spacing must be 0-d or one 1-d tensor per dim")
            spacing = spacing.item()
        return [spacing] * len(dims)
    spacing = [spacing] if isinstance(spacing, Tensor) else list(spacing)
    if len(spacing) != len(dims):
        raise ValueError(f"{op}: expected spacing to have {len(dims)} entries (one per dim), "
                         f"got {len(spacing)}")
    out = []
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor) and s.ndim == 0:
            s = s.item()
        if isinstance(s, Tensor) and s.shape[0] != input.shape[d]:
            raise ValueError(f"{op}: the coordinates for dim {d} have {s.shape[0]} entries, "
                             f"but the input has size {input.shape[d]} there")
        out.append(s)
    return out


def _along(c, d, ndim):
    """A 1-d tensor shaped to broadcast along dim d of an ndim tensor."""
    return reshape(c, tuple(-1 if i == d else 1 for i in range(ndim)))


def _gradient_one(f, d, h, edge_order):
    n = f.shape[d]
    if n < edge_order + 1:
        raise ValueError(f"gradient: each dim needs at least edge_order + 1 = {edge_order + 1} "
                         f"entries, dim {d} has {n} (shape {tuple(f.shape)}){_where()}")
    sl = lambda start, length: narrow(f, d, start, length)  # noqa: E731
    if not isinstance(h, Tensor):
        interior = (sl(2, n - 2) - sl(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / h
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / h
        else:
            first = (sl(0, 1) * -1.5 + sl(1, 1) * 2.0 - sl(2, 1) * 0.5) / h
            last = (sl(n - 3, 1) * 0.5 - sl(n - 2, 1) * 2.0 + sl(n - 1, 1) * 1.5) / h
        return cat([first, interior, last], d)
    x = cast(h, f.dtype) if h.dtype is not f.dtype and f.dtype.is_floating_point else h
    dx = x[1:] - x[:-1]
    dx1, dx2 = _along(dx[:-1], d, f.ndim), _along(dx[1:], d, f.ndim)
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    interior = a * sl(0, n - 2) + b * sl(1, n - 2) + c * sl(2, n - 2)
    if edge_order == 1:
        first = (sl(1, 1) - sl(0, 1)) / _along(dx[:1], d, f.ndim)
        last = (sl(n - 1, 1) - sl(n - 2, 1)) / _along(dx[-1:], d, f.ndim)
    else:
        h1, h2 = _along(dx[0:1], d, f.ndim), _along(dx[1:2], d, f.ndim)
        first = (sl(0, 1) * (-(2.0 * h1 + h2) / (h1 * (h1 + h2))) + sl(1, 1) * ((h1 + h2) / (h1 * h2))
                 + sl(2, 1) * (-h1 / (h2 * (h1 + h2))))
        h1, h2 = _along(dx[-2:-1], d, f.ndim), _along(dx[-1:], d, f.ndim)
        last = (sl(n - 3, 1) * (h2 / (h1 * (h1 + h2))) + sl(n - 2, 1) * (-(h2 + h1) / (h1 * h2))
                + sl(n - 1, 1) * ((2.0 * h2 + h1) / (h2 * (h1 + h2))))
    return cat([first, interior, last], d)


def gradient(input, *, spacing=None, dim=None, edge_order=1):
    """Central differences of input along each dim (second-order accurate inside; edges of
    order `edge_order`), one tensor per dim; spacing: a number, one per dim, or coordinates."""
    f = _tensor(input, "gradient")
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {plain(edge_order)}")
    if dim is None:
        dims = list(range(f.ndim))
    elif isinstance(dim, int):
        dims = [norm_dim(dim, f.ndim, "gradient")]
    else:
        dims = [norm_dim(d, f.ndim, "gradient") for d in dim]
    if not f.dtype.is_floating_point:
        f = cast(f, "float32")
    hs = _spacings(f, 1 if spacing is None else spacing, dims, "gradient")
    return tuple(_gradient_one(f, d, h, edge_order) for d, h in zip(dims, hs))


def _trapezoid_parts(y, x, dx, d, op):
    """The per-interval areas along d: (y[i] + y[i+1]) / 2 * width."""
    mids = (_tail(y, d) + _head(y, d)) * 0.5
    if x is None:
        return mids * (1.0 if dx is None else dx)
    x = _tensor(x, op, "x")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ValueError(f"{op}: x has {x.shape[0]} entries but y has {y.shape[d]} along "
                             f"dim {d} (shape {tuple(y.shape)}){_where()}")
        widths = _along(x[1:] - x[:-1], d, y.ndim)
    else:
        xd = d - y.ndim + x.ndim if x.ndim < y.ndim else d
        widths = diff(x, dim=xd)
    return mids * widths


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along dim, with sample points x or a constant spacing dx (default 1)."""
    y = _tensor(y, "trapezoid", "y")
    if x is not None and dx is not None:
        raise TypeError("trapezoid: pass either x or dx, not both")
    if isinstance(x, numbers.Number):  # torch.trapezoid(y, 0.5): a number is the spacing
        x, dx = None, x
    d = norm_dim(dim, y.ndim, "trapezoid")
    if y.shape[d] == 0:
        return sum(y, d)
    return sum(_trapezoid_parts(y, x, dx, d, "trapezoid"), d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """The older name of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along dim (one entry fewer than y there)."""
    y = _tensor(y, "cumulative_trapezoid", "y")
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: pass either x or dx, not both")
    if isinstance(x, numbers.Number):
        x, dx = None, x
    d = norm_dim(dim, y.ndim, "cumulative_trapezoid")
    if y.shape[d] == 0:
        return y
    return cumsum(_trapezoid_parts(y, x, dx, d, "cumulative_trapezoid"), d)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows (variables) over the columns (observations), with frequency and
    analytic weights, as torch.cov (numpy.cov's rule)."""
    x = _tensor(input, "cov")
    if x.ndim > 2:
        raise ValueError(f"cov: expected a 1-d or 2-d input, got shape {tuple(x.shape)}")
    if x.ndim < 2:
        x = reshape(x, (1, -1))
    if not x.dtype.is_floating_point:
        x = cast(x, "float32")
    n_obs = x.shape[1]
    w = None
    for wt, name in ((fweights, "fweights"), (aweights, "aweights")):
        if wt is None:
            continue
        wt = _tensor(wt, "cov", name)
        if wt.ndim > 1 or wt.numel() != n_obs:
            raise ValueError(f"cov: expected {name} to have {n_obs} entries (one per observation), "
                             f"got shape {tuple(wt.shape)}")
        if name == "fweights" and wt.dtype.is_floating_point:
            raise TypeError("cov: fweights must be integers")
        wt = reshape(wt, (-1,))
        w = wt if w is None else w * wt
    # the weights stay in their own dtype (float32 aweights with a float64 input: their sums
    # in float32), as torch computes them
    if w is None:
        w_sum = n_obs
        avg = mean(x, 1)
    else:
        w_sum = sum(w)
        avg = sum(x * w, 1) / w_sum
    if w is not None and aweights is not None and correction != 0:
        norm_factor = w_sum - sum(w * reshape(aweights, (-1,))) * correction / w_sum
    else:
        norm_factor = w_sum - correction
    if isinstance(norm_factor, Tensor):
        norm_factor = where(norm_factor <= 0, 0, norm_factor)
    else:
        norm_factor = builtins_max(norm_factor, 0)
    xc = x - reshape(avg, (-1, 1))
    c = matmul(xc, (xc if w is None else xc * w).transpose(0, 1))
    out = c / norm_factor if isinstance(norm_factor, Tensor) or norm_factor else c / 0.0
    return squeeze(out) if out.shape == (1, 1) else out


def builtins_max(a, b):
    return a if a > b else b


def corrcoef(input):
    """Pearson correlation coefficients of the rows (clamped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = sqrt(diagonal(c))
    c = c / reshape(d, (-1, 1))
    c = c / reshape(d, (1, -1))
    return clamp(c, -1.0, 1.0)


def renorm(input, p, dim, maxnorm):
    """Each slice along dim whose p-norm exceeds maxnorm scaled to norm maxnorm."""
    x = _tensor(input, "renorm")
    if x.ndim < 2:
        raise ValueError(f"renorm: expected at least a 2-d input, got shape {tuple(x.shape)}")
    if maxnorm < 0:
        raise ValueError(f"renorm: maxnorm must be non-negative, got {plain(maxnorm)}")
    d = norm_dim(dim, x.ndim, "renorm")
    others = tuple(i for i in range(x.ndim) if i != d)
    norms = norm(x, p, others, keepdim=True)
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return x * factor


def equal(input, other):
    """True when both have one shape and equal entries (a Python bool)."""
    _tensor(input, "equal")
    _tensor(other, "equal", "other")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(all_(eq(input, other)))


def renorm_(input, p, dim, maxnorm):
    """renorm in place: recorded on a clone while autograd records, as add_ is."""
    from .inplace import apply_inplace   # inplace builds on elementwise, as this module does
    return apply_inplace(input, "renorm_", lambda t: renorm(t, p, dim, maxnorm))
