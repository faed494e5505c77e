"""NumPy-style composites of the movement ops: atleast_Nd, h/v/d/column stacking and
splitting, tensor_split, ravel, fliplr/flipud/rot90, cartesian_prod, combinations,
diagflat, constant_pad_nd, sum_to_size and the `*_copy` forms of the view ops.

Each one is written in ops that are already recorded (cat, reshape, flip, transpose,
getitem, ...), so gradients of every order and tt.compile come with them; index arrays
here depend on shapes only, never on values.
"""
import itertools

import numpy as np

from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..messages import OpError, plain
from .diagonal import diag, diagonal
from .elementwise import clone, view_dtype
from .movement import (_where, cat, expand, flatten, flip, norm_dim, pad, permute, reshape,
                       split, squeeze, stack, sum_to, t, transpose, unbind, unsqueeze, narrow)
from .shape_ops import meshgrid, unfold

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes",
           "ravel", "fliplr", "flipud", "rot90", "cartesian_prod", "combinations", "diagflat",
           "constant_pad_nd", "sum_to_size", "alias_copy", "diagonal_copy", "expand_copy",
           "narrow_copy", "permute_copy", "squeeze_copy", "t_copy", "transpose_copy",
           "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy", "split_with_sizes_copy"]


def _tensors(args, op):
    """torch's `f(a, b)` and `f([a, b])`: the tensors as a list, and whether one was passed bare."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0]), False
    for k, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(a).__name__} for argument {k}")
    return list(args), len(args) == 1


def _atleast(n, args, op):
    ts, single = _tensors(args, op)
    out = []
    for x in ts:
        if x.ndim == 0:
            x = reshape(x, (1,) * n)
        elif x.ndim == 1 and n >= 2:
            x = unsqueeze(x, 0)            # (N,) -> (1, N), as NumPy
        if x.ndim == 2 and n == 3:
            x = unsqueeze(x, -1)           # (M, N) -> (M, N, 1), as NumPy
        out.append(x)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors):
    return _atleast(1, tensors, "atleast_1d")


def atleast_2d(*tensors):
    return _atleast(2, tensors, "atleast_2d")


def atleast_3d(*tensors):
    return _atleast(3, tensors, "atleast_3d")


def _nonempty(tensors, op):
    tensors = list(tensors)
    if not tensors:
        raise OpError(f"{op}: expected a non-empty list of tensors{_where()}")
    return tensors


def hstack(tensors):
    ts = list(atleast_1d(_nonempty(tensors, "hstack")))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return cat(list(atleast_2d(_nonempty(tensors, "vstack"))), 0)


row_stack = vstack


def dstack(tensors):
    return cat(list(atleast_3d(_nonempty(tensors, "dstack"))), 2)


def column_stack(tensors):
    ts = _nonempty(tensors, "column_stack")
    return cat([reshape(x, (x.numel(), 1)) if x.ndim <= 1 else x for x in ts], 1)


# ---------------------------------------------------------------- splitting
def _pieces(x, d, bounds):
    return tuple(x[(slice(None),) * d + (slice(lo, hi),)] for lo, hi in bounds)


def tensor_split(input, indices_or_sections, dim=0):
    """Pieces of `input` along dim: n sections (the first n % size one longer) or cut at the
    given indices; a 0-d integer tensor is a section count, a 1-d one a list of indices."""
    if input.ndim == 0:
        raise OpError(f"tensor_split: expected at least a 1-dimensional tensor, got shape (){_where()}")
    d = norm_dim(dim, input.ndim, "tensor_split")
    n = int(input.shape[d])
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype.is_floating_point or ios.dtype.name == "bool" or ios.ndim > 1:
            raise OpError(f"tensor_split: indices_or_sections must be a 0-d or 1-d integer tensor "
                          f"(on the CPU), got {ios.dtype.name} of shape {tuple(ios.shape)}{_where()}")
        STATE.hooks.read_value(ios, "tensor_split")   # the pieces follow the values: not replayable
        ios = int(ios.item()) if ios.ndim == 0 else [int(v) for v in ios.tolist()]
    if isinstance(ios, (int, np.integer)):
        sections = int(ios)
        if sections <= 0:
            raise OpError(f"tensor_split: number of sections must be larger than 0, got {sections}"
                          f"{_where()}")
        size, extra = divmod(n, sections)
        starts = [k * size + min(k, extra) for k in range(sections + 1)]
        return _pieces(input, d, zip(starts[:-1], starts[1:]))
    # Python's slice rules, as torch: piece k is input[cut[k-1]:cut[k]] along dim
    cuts = [None] + [int(i) for i in ios] + [None]
    return _pieces(input, d, zip(cuts[:-1], cuts[1:]))


def _split_exact(x, ios, d, op):
    if isinstance(ios, (int, np.integer)):
        if int(ios) <= 0 or x.shape[d] % int(ios):
            raise OpError(f"{op}: dimension {d} of shape {tuple(x.shape)} (size {x.shape[d]}) is "
                          f"not divisible by the split_size {plain(ios)}{_where()}")
    return tensor_split(x, ios, d)


def hsplit(input, indices_or_sections):
    if input.ndim < 1:
        raise OpError(f"hsplit: requires a tensor with at least 1 dimension, got shape (){_where()}")
    return _split_exact(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit")


def vsplit(input, indices_or_sections):
    if input.ndim < 2:
        raise OpError(f"vsplit: requires a tensor with at least 2 dimensions, got shape "
                      f"{tuple(input.shape)}{_where()}")
    return _split_exact(input, indices_or_sections, 0, "vsplit")


def dsplit(input, indices_or_sections):
    if input.ndim < 3:
        raise OpError(f"dsplit: requires a tensor with at least 3 dimensions, got shape "
                      f"{tuple(input.shape)}{_where()}")
    return _split_exact(input, indices_or_sections, 2, "dsplit")


def split_with_sizes(input, split_sizes, dim=0):
    sizes = [int(s) for s in split_sizes]
    d = norm_dim(dim, input.ndim, "split_with_sizes")
    if any(s < 0 for s in sizes) or sum(sizes) != input.shape[d]:
        raise OpError(f"split_with_sizes: split_sizes {sizes} must be non-negative and add up to "
                      f"the size {input.shape[d]} of dimension {dim} of shape "
                      f"{tuple(input.shape)}{_where()}")
    return split(input, sizes, d)


# ---------------------------------------------------------------- reordering
def ravel(input):
    return flatten(input)


def fliplr(input):
    if input.ndim < 2:
        raise OpError(f"fliplr: input must be at least 2-d, got shape {tuple(input.shape)}{_where()}")
    return flip(input, (1,))


def flipud(input):
    if input.ndim < 1:
        raise OpError(f"flipud: input must be at least 1-d, got shape (){_where()}")
    return flip(input, (0,))


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane dims, from dims[0] towards dims[1]."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise OpError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}{_where()}")
    if input.ndim < 2:
        raise OpError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}{_where()}")
    d0, d1 = (norm_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise OpError(f"rot90: expected rotation dims to be different, but got dim0 = {dims[0]} "
                      f"and dim1 = {dims[1]}{_where()}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return clone(input)


# ---------------------------------------------------------------- products and diagonals
def cartesian_prod(*tensors):
    ts, _ = _tensors(tensors, "cartesian_prod")
    for k, x in enumerate(ts):
        if x.ndim != 1:
            raise OpError(f"cartesian_prod: expected 1-d tensors, got shape {tuple(x.shape)} for "
                          f"tensor {k}{_where()}")
    if len(ts) == 1:
        return ts[0]
    return stack([flatten(g) for g in meshgrid(*ts, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """Every length-r combination of a 1-d tensor's entries, one per row, in itertools' order."""
    if input.ndim != 1:
        raise OpError(f"combinations: expected a 1-d tensor, got shape {tuple(input.shape)}{_where()}")
    if r < 0:
        raise OpError(f"combinations: r must be non-negative, got {r}{_where()}")
    if r == 0:
        return input[0:0]    # torch: an empty 1-d tensor
    n = int(input.shape[0])  # the indices follow the size alone
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    return input[Tensor._make(input.device.xp.asarray(idx), input.device, False)]


def diagflat(input, offset=0):
    return diag(flatten(input), offset)


def constant_pad_nd(input, pad_, value=0):
    return pad(input, tuple(pad_), mode="constant", value=value)


def sum_to_size(input, *size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    lead = input.ndim - len(size)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(size, input.shape[lead:])):
        raise OpError(f"sum_to_size: size {size} is not expandable to the tensor's shape "
                      f"{tuple(input.shape)}{_where()}")
    return sum_to(input, size)


# ---------------------------------------------------------------- the *_copy forms: the view, copied
def alias_copy(input):
    return clone(input)


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return clone(diagonal(input, offset, dim1, dim2))


def expand_copy(input, size, implicit=False):
    return clone(expand(input, *size))


def narrow_copy(input, dim, start, length):
    return clone(narrow(input, dim, start, length))


def permute_copy(input, dims):
    return clone(permute(input, *dims))


def squeeze_copy(input, dim=None):
    return clone(squeeze(input, dim))


def t_copy(input):
    return clone(t(input))


def transpose_copy(input, dim0, dim1):
    return clone(transpose(input, dim0, dim1))


def unbind_copy(input, dim=0):
    return tuple(clone(p) for p in unbind(input, dim))


def unfold_copy(input, dimension, size, step):
    return clone(unfold(input, dimension, size, step))


def unsqueeze_copy(input, dim):
    return clone(unsqueeze(input, dim))


def view_copy(input, *size):
    if len(size) == 1 and not isinstance(size[0], (tuple, list, int, np.integer)):
        return clone(view_dtype(input, size[0]))   # view_copy(x, dtype)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return clone(reshape(input, size))


def split_with_sizes_copy(input, split_sizes, dim=0):
    return tuple(clone(p) for p in split_with_sizes(input, split_sizes, dim))

