"""Matrix and vector products in torch's BLAS-style spellings: addmm, baddbmm, addbmm, addmv,
addr (beta * input + alpha * product), addcmul, addcdiv, dot, vdot, inner, outer / ger, mv,
kron, tensordot, trace, block_diag, cdist and dist.

Every one is a composition of recorded ops (matmul, mul, sums, reshapes), so gradients and
double backward come from those ops and `tt.compile` lowers a product to its matmul. As in
torch, beta = 0 ignores `input` entirely (NaN and inf in it do not reach the result), and a
distance's gradient is 0 where the distance is 0 instead of 0/0."""
import builtins
import math
import numbers

from ..core.tensor import Tensor
from ..dtypes import promote
from ..messages import OpError, plain
from .diagonal import diagonal
from .elementwise import absolute, add, cast, div, eq, mul, ne, pow, sqrt, where
from .linalg import matmul
from .movement import (_where, broadcast_shapes, cat, expand, pad, permute, reshape, unsqueeze)
from .reduce import _SavesOutput, _saved_back, sum

__all__ = ["addmm", "baddbmm", "addbmm", "addmv", "addr", "addcmul", "addcdiv", "dot", "vdot",
           "inner", "outer", "ger", "mv", "kron", "tensordot", "trace", "block_diag", "cdist",
           "dist"]


def _tensor(x, op, what):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(x).__name__}{_where()}")
    return x


def _shape(x):
    return tuple(plain(x.shape))


def _scalar(v, x, op, what):
    """beta, alpha or value as torch takes them: a float factor of an integer tensor is
    refused (it would silently change the result's dtype), a bool one only for bool."""
    if isinstance(v, Tensor):
        raise TypeError(f"{op}: {what} must be a Python number, got a Tensor{_where()}")
    if not isinstance(v, numbers.Number):
        raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__}{_where()}")
    kind = x.data.dtype.kind
    if kind in "iub" and not isinstance(v, numbers.Integral):
        raise RuntimeError(f"{op}: for integral input tensors, argument {what} must not be a "
                           f"floating point number, got {plain(v)!r}{_where()}")
    return v


def _scaled(x, factor):
    return x if factor == 1 else mul(x, factor)


def _beta_input_plus(op, input, product, beta, alpha):
    """beta * input + alpha * product, where input must broadcast to product's shape (it
    is never the one that grows); beta = 0 leaves input out, so its NaNs do not show."""
    input = _tensor(input, op, "input")
    beta = _scalar(beta, input, op, "beta")
    alpha = _scalar(alpha, product, op, "alpha")
    out_shape = _shape(product)
    try:
        grown = broadcast_shapes(_shape(input), out_shape, op=op)
    except ValueError:
        grown = None
    if grown != out_shape:
        raise OpError(f"{op}: input of shape {_shape(input)} does not broadcast to the "
                      f"product's shape {out_shape}{_where()}")
    dt = promote(input.dtype, product.dtype)
    product = _scaled(cast(product, dt) if product.dtype is not dt else product, alpha)
    if beta == 0:
        return product
    input = cast(input, dt) if input.dtype is not dt else input
    return add(_scaled(input, beta), product)


def _ndim(x, n, op, what):
    _tensor(x, op, what)
    if x.ndim != n:
        kind = {1: "a vector (1-d)", 2: "a matrix (2-d)", 3: "a batch of matrices (3-d)"}[n]
        raise OpError(f"{op}: {what} must be {kind}, got shape {_shape(x)}{_where()}")
    return x


def _inner_sizes(op, a, b, ka, kb, what="sizes"):
    if ka != kb:
        raise OpError(f"{op}: shapes {_shape(a)} and {_shape(b)} cannot be multiplied "
                      f"({ka} != {kb}){_where()}")


# ---------------------------------------------------------------- matrix and vector products
def mv(input, vec):
    """Matrix (n, m) times vector (m,) -> (n,)."""
    _ndim(input, 2, "mv", "input"), _ndim(vec, 1, "mv", "vec")
    _inner_sizes("mv", input, vec, input.shape[1], vec.shape[0])
    return matmul(input, vec)


def _vectors(op, input, other):
    """Refuse what torch's dot and vdot refuse: not 1-d, other dtypes, other sizes."""
    _ndim(input, 1, op, "input"), _ndim(other, 1, op, "other")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{op}: expected both vectors to have the same dtype, got "
                           f"{input.dtype.name} and {other.dtype.name}{_where()}")
    if input.shape[0] != other.shape[0]:
        raise OpError(f"{op}: vectors of shapes {_shape(input)} and {_shape(other)} have "
                      f"different sizes{_where()}")


def dot(input, other):
    """Inner product of two vectors of one size and one dtype, as torch.dot."""
    _vectors("dot", input, other)
    return matmul(input, other)


def vdot(input, other):
    """dot with the first vector conjugated (torch.vdot)."""
    _vectors("vdot", input, other)
    if input.is_complex():
        from .complex import conj
        input = conj(input)
    return matmul(input, other)


def outer(input, vec2):
    """Outer product of two vectors: (n,) and (m,) -> (n, m)."""
    _ndim(input, 1, "outer", "input"), _ndim(vec2, 1, "outer", "vec2")
    return mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


ger = outer


def inner(input, other):
    """Sum over the last dimension of both: shapes (..a, k) and (..b, k) -> (..a, ..b); a
    0-d operand multiplies the other."""
    _tensor(input, "inner", "input"), _tensor(other, "inner", "other")
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise OpError(f"inner: the last dimensions of shapes {_shape(input)} and "
                      f"{_shape(other)} differ ({input.shape[-1]} != {other.shape[-1]}){_where()}")
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]), _op="inner")


def _dims_lists(dims, na, nb):
    if isinstance(dims, Tensor):   # a tensor of dims is read as torch reads it: its values
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise OpError(f"tensordot: expects dims >= 0, got {dims}{_where()}")
        if dims > min(na, nb):
            raise OpError(f"tensordot: dims {dims} exceeds the dimensions of the operands "
                          f"({na} and {nb}){_where()}")
        return list(range(na - dims, na)), list(range(dims))
    dims = list(dims)
    if len(dims) != 2:
        raise OpError(f"tensordot: dims must be an int or a pair of dim lists, got "
                      f"{plain(dims)!r}{_where()}")
    da, db = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
    if len(da) != len(db):
        raise OpError(f"tensordot: both dim lists must have the same length, got {da} and "
                      f"{db}{_where()}")
    return da, db


def tensordot(a, b, dims=2, out=None, _op="tensordot"):
    """Contract dims[0] of a with dims[1] of b: one matmul of the two reshaped to
    (free a, contracted) and (contracted, free b)."""
    if out is not None:
        raise TypeError(f"{_op}: out= is not supported; use the returned tensor{_where()}")
    _tensor(a, _op, "a"), _tensor(b, _op, "b")
    da, db = _dims_lists(dims, a.ndim, b.ndim)
    da = [_norm(d, a.ndim, _op) for d in da]
    db = [_norm(d, b.ndim, _op) for d in db]
    for x, y in zip(da, db):
        # a size-1 dimension contracted with a size-n one broadcasts, as in torch: the
        # other operand's n entries there are summed first
        if a.shape[x] == 1 and b.shape[y] != 1:
            b = sum(b, y, keepdim=True)
        elif b.shape[y] == 1 and a.shape[x] != 1:
            a = sum(a, x, keepdim=True)
        elif a.shape[x] != b.shape[y]:
            raise OpError(f"{_op}: contracted dimensions {x} of shape {_shape(a)} and {y} of "
                          f"shape {_shape(b)} differ ({a.shape[x]} != {b.shape[y]}){_where()}")
    if len(set(da)) != len(da) or len(set(db)) != len(db):
        raise OpError(f"{_op}: a dimension is contracted twice in dims {plain(dims)!r}{_where()}")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    sa, sb = [a.shape[d] for d in fa], [b.shape[d] for d in fb]
    if a.dtype is not b.dtype:
        dt = promote(a.dtype, b.dtype)
        a, b = cast(a, dt), cast(b, dt)
    a2 = reshape(permute(a, *fa, *da), (math.prod(sa), k))   # (free a, contracted)
    b2 = reshape(permute(b, *db, *fb), (k, math.prod(sb)))   # (contracted, free b)
    return reshape(matmul(a2, b2), (*sa, *sb))


def _norm(d, n, op):
    if not -max(n, 1) <= d < max(n, 1):
        raise IndexError(f"{op}: dimension {d} is out of range for a tensor with {n} "
                         f"dimensions{_where()}")
    return d % max(n, 1)


def kron(input, other):
    """Kronecker product: both padded to one rank with leading 1s; entry (i*q + k) of each
    dimension is input[i] * other[k]: one broadcast multiply of interleaved shapes."""
    _tensor(input, "kron", "input"), _tensor(other, "kron", "other")
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + _shape(input)
    sb = (1,) * (n - other.ndim) + _shape(other)
    a = reshape(input, tuple(v for s in sa for v in (s, 1)))   # (a0, 1, a1, 1, ...)
    b = reshape(other, tuple(v for s in sb for v in (1, s)))   # (1, b0, 1, b1, ...)
    return reshape(mul(a, b), tuple(x * y for x, y in zip(sa, sb)))


def trace(input):
    """Sum of the main diagonal of a matrix (integers sum to int64, as torch)."""
    _ndim(input, 2, "trace", "input")
    return sum(diagonal(input))


def block_diag(*tensors):
    """Tensors (0-d, 1-d as one row, 2-d) along the diagonal of one matrix of zeros: each
    block padded with zeros to the full width, then all stacked by rows."""
    blocks = []
    for i, t in enumerate(tensors):
        _tensor(t, "block_diag", f"tensor {i}")
        if t.ndim > 2:
            raise OpError(f"block_diag: input {i} must have 2 or fewer dimensions, got shape "
                          f"{_shape(t)}{_where()}")
        blocks.append(reshape(t, (1, 1)) if t.ndim == 0 else
                      reshape(t, (1, t.shape[0])) if t.ndim == 1 else t)
    if not blocks:
        from ..creation import empty
        return empty(1, 0)
    dt = blocks[0].dtype
    for t in blocks[1:]:
        dt = promote(dt, t.dtype)
    width = builtins.sum(t.shape[1] for t in blocks)
    rows, left = [], 0
    for t in blocks:
        t = cast(t, dt) if t.dtype is not dt else t
        rows.append(pad(t, (left, width - left - t.shape[1])))
        left += t.shape[1]
    return cat(rows, 0)


# ---------------------------------------------------------------- beta * input + alpha * product
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), input broadcast to (n, p) (HF's GPT-2 Conv1D)."""
    _ndim(mat1, 2, "addmm", "mat1"), _ndim(mat2, 2, "addmm", "mat2")
    _inner_sizes("addmm", mat1, mat2, mat1.shape[1], mat2.shape[0])
    return _beta_input_plus("addmm", input, matmul(mat1, mat2), beta, alpha)


def _batches(op, batch1, batch2):
    """Refuse what torch's baddbmm and addbmm refuse: not 3-d, other batch sizes, inner
    sizes that do not match."""
    _ndim(batch1, 3, op, "batch1"), _ndim(batch2, 3, op, "batch2")
    if batch1.shape[0] != batch2.shape[0]:
        raise OpError(f"{op}: batch1 {_shape(batch1)} and batch2 {_shape(batch2)} have "
                      f"different batch sizes{_where()}")
    _inner_sizes(op, batch1, batch2, batch1.shape[2], batch2.shape[1])


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2) for (b, n, m) and (b, m, p) batches."""
    _batches("baddbmm", batch1, batch2)
    return _beta_input_plus("baddbmm", input, matmul(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_b batch1[b] @ batch2[b]: one (n, b*m) @ (b*m, p) matmul."""
    _batches("addbmm", batch1, batch2)
    b, n, m = _shape(batch1)
    p = batch2.shape[2]
    a2 = reshape(permute(batch1, 1, 0, 2), (n, b * m))   # (n, b*m)
    b2 = reshape(batch2, (b * m, p))                     # (b*m, p)
    return _beta_input_plus("addbmm", input, matmul(a2, b2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    _ndim(mat, 2, "addmv", "mat"), _ndim(vec, 1, "addmv", "vec")
    _inner_sizes("addmv", mat, vec, mat.shape[1], vec.shape[0])
    return _beta_input_plus("addmv", input, matmul(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    _ndim(vec1, 1, "addr", "vec1"), _ndim(vec2, 1, "addr", "vec2")
    return _beta_input_plus("addr", input, outer(vec1, vec2), beta, alpha)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, all three broadcast together."""
    input, tensor1, tensor2 = _common("addcmul", input, tensor1, tensor2)
    value = _scalar(value, input, "addcmul", "value")
    return add(input, _scaled(mul(tensor1, tensor2), value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division; integer operands refused as torch)."""
    _tensor(input, "addcdiv", "input")
    for t in (tensor1, tensor2):
        if isinstance(t, Tensor) and t.data.dtype.kind in "iub":
            raise RuntimeError(f"addcdiv: integer division with addcdiv is not supported (as "
                               f"in torch); use addcmul(input, tensor1, 1 / tensor2) instead, got "
                               f"{t.dtype.name}{_where()}")
    input, tensor1, tensor2 = _common("addcdiv", input, tensor1, tensor2)
    value = _scalar(value, input, "addcdiv", "value")
    return add(input, _scaled(div(tensor1, tensor2), value))


def _common(op, *tensors):
    """The three operands in their common dtype: torch computes the whole expression in it,
    so a bfloat16 tensor1 beside a float64 input is not first divided in float32."""
    for i, t in enumerate(tensors):
        _tensor(t, op, ("input", "tensor1", "tensor2")[i])
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote(dt, t.dtype)
    return tuple(t if t.dtype is dt else cast(t, dt) for t in tensors)


# ---------------------------------------------------------------- distances
class _NormExtreme(_SavesOutput):
    """The inf (-inf) norm's max (min) of |d|. Unlike amax, which shares a gradient among
    tied entries, torch's norm gives every tied entry the whole gradient; so does this."""

    @staticmethod
    def backward(ctx, g):
        x, dims, out_k, g_k = _saved_back(ctx, g)
        return where(eq(x, out_k), g_k, 0.0)


class NormMax(_NormExtreme):
    reduce = "max"


class NormMin(_NormExtreme):
    reduce = "min"


def _extreme(cls, a, dims, op):
    dims = tuple(d % a.ndim for d in ((dims,) if isinstance(dims, int) else dims))
    for d in dims:
        if a.shape[d] == 0:
            raise OpError(f"{op}: the inf norm of an empty dimension (shape {_shape(a)}) is "
                          f"undefined{_where()}")
    return cls.apply(a, dims=dims, keepdim=False)


def _pnorm(d, p, dims, op):
    """The p-norm of d over `dims` with torch's gradient conventions: 0 where the norm (or,
    for p < 1, an entry) is 0, where the plain formula would give 0/0 or inf * 0."""
    p = float(p)
    if math.isnan(p) or p < 0:
        raise OpError(f"{op}: p must be a non-negative number, got {plain(p)}{_where()}")
    a = absolute(d)
    if p == 0:   # the count of nonzero entries: constant, so no gradient
        return sum(cast(ne(d, 0), d.dtype), dims)
    if p == 1:
        return sum(a, dims)
    if math.isinf(p):
        return _extreme(NormMax, a, dims, op)
    if p == 2:
        s = sum(mul(d, d), dims)
    else:
        nz = ne(a, 0)
        s = sum(where(nz, pow(where(nz, a, 1.0), p), 0.0), dims)  # 0 ** p without 0 ** (p - 1)
    pos = ne(s, 0)
    safe = where(pos, s, 1.0)
    root = sqrt(safe) if p == 2 else pow(safe, 1.0 / p)
    return where(pos, root, 0.0)


_COMPUTE_MODES = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                  "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of x1 (.., P, M) and x2 (.., R, M) -> (.., P, R),
    batch dims broadcast. Always the direct differences (torch's mm shortcut for p = 2 only
    trades accuracy for speed), so compute_mode changes nothing but is checked."""
    _tensor(x1, "cdist", "x1"), _tensor(x2, "cdist", "x2")
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"cdist: {plain(compute_mode)!r} is not a valid value for "
                         f"compute_mode{_where()}")
    if x1.ndim < 2 or x2.ndim < 2:
        raise OpError(f"cdist: x1 and x2 need at least 2 dimensions, got shapes {_shape(x1)} "
                      f"and {_shape(x2)}{_where()}")
    if x1.shape[-1] != x2.shape[-1]:
        raise OpError(f"cdist: x1 {_shape(x1)} and x2 {_shape(x2)} must have the same number "
                      f"of columns ({x1.shape[-1]} != {x2.shape[-1]}){_where()}")
    for x in (x1, x2):
        if x.data.dtype.kind not in "f":
            raise RuntimeError(f"cdist: only floating-point dtypes are supported, got "
                               f"{x.dtype.name}{_where()}")
    try:
        batch = broadcast_shapes(_shape(x1)[:-2], _shape(x2)[:-2], op="cdist")
    except ValueError:
        raise OpError(f"cdist: batch dimensions of {_shape(x1)} and {_shape(x2)} do not "
                      f"broadcast{_where()}") from None
    P, R, M = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    a = expand(unsqueeze(x1, -2), *batch, P, R, M)   # (.., P, 1, M) -> (.., P, R, M)
    b = unsqueeze(x2, -3)                            # (.., 1, R, M)
    return _pnorm(a - b, p, -1, "cdist")             # (.., P, R)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), over all entries; p = -inf is the smallest
    absolute difference, as in torch."""
    _tensor(input, "dist", "input"), _tensor(other, "dist", "other")
    if isinstance(p, Tensor):
        raise TypeError(f"dist: p must be a Python number, got a Tensor{_where()}")
    d = input - other
    if d.data.dtype.kind not in "f":
        raise RuntimeError(f"dist: only floating-point dtypes are supported, got "
                           f"{d.dtype.name}{_where()}")
    if p == -math.inf:
        return _extreme(NormMin, absolute(reshape(d, (-1,))), 0, "dist")
    return _pnorm(reshape(d, (-1,)), p, 0, "dist")
