"""Movement ops: shape changes, broadcasting, joining, splitting, flipping, padding.

Ops that can return a view of their input (reshape, transpose, expand, ...) set
`is_view`, so the output shares the input's version counter and in-place changes to
either are seen by autograd's saved-tensor checks.
"""
import builtins

import numpy as np

from ..core.function import Function, arrays_serve
from ..core.rules import Rule
from ..core.grad_mode import STATE
from ..core.primitives import Expand, SumTo, sum_to  # noqa: F401  (broadcasting, owned by core)
from ..core.tensor import Tensor
from ..core.forward_ad import linear_jvp
from ..dtypes import promote
from ..kernels import c_copy as _c_copy
from ..messages import OpError, plain
from .elementwise import cast, clone
from ..device import xp_of as _xp


def _where():
    return f" in {STATE.scope_path}" if STATE.scope_path else ""


def norm_dim(dim, ndim, op):
    """A dimension index in range, accepting negatives; errors name the op."""
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor with {ndim} "
                         f"dimensions (expected {-n}..{n - 1}){_where()}")
    return dim % n


def norm_dims(dim, ndim, op):
    """None -> all dims; int or sequence -> sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    dims = tuple(sorted({norm_dim(d, ndim, op) for d in dim}))
    return dims


def broadcast_shapes(*shapes, op="broadcast"):
    shapes = [(s,) if isinstance(s, (int, np.integer)) else s for s in shapes]  # torch: 5 is (5,)
    ndim = builtins.max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            k = i - (ndim - len(s))
            if k < 0:
                continue
            d = s[k]
            if d != 1:
                if size != 1 and d != size:
                    raise OpError(f"{op}: shapes {' and '.join(str(plain(tuple(x))) for x in shapes)} "
                                     f"cannot be broadcast together (dimension {i - ndim}: "
                                     f"{size} vs {d}){_where()}")
                size = d
        out.append(size)
    return tuple(out)


# ---------------------------------------------------------------- broadcasting
def expand(x, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise OpError(f"expand: the number of sizes ({len(sizes)}) must be at least the "
                         f"tensor's dimensions ({x.ndim}), shape {tuple(x.shape)}{_where()}")
    sizes = _sizes(sizes)
    for i, s in enumerate(sizes):
        if s < 0 and not (s == -1 and i >= lead):  # -1 keeps a size, so a new dim has none
            raise OpError(f"expand: size {s} is not allowed at dimension {i} when expanding "
                             f"shape {tuple(x.shape)} to {sizes}{_where()}")
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    if shape == x.shape:
        return x
    for i, s in enumerate(x.shape):
        t = shape[i + lead]
        if s != 1 and s != t:
            raise OpError(f"expand: cannot expand shape {tuple(x.shape)} to {tuple(sizes)} "
                             f"(dimension {i} has size {s}, not 1){_where()}")
    return Expand.apply(x, shape=shape)


def broadcast_to(x, shape):
    return expand(x, *shape)


def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*(t.shape for t in tensors), op="broadcast_tensors")
    return tuple(expand(t, *shape) for t in tensors)


class _Movement(Function):
    """An op that moves or picks elements: no arithmetic, and linear (its tangent is the op
    applied to the input's tangent)."""
    compile_rule = Rule(flops=0)
    jvp = staticmethod(linear_jvp)


# ---------------------------------------------------------------- reshaping
class Reshape(_Movement):
    is_view = True

    @staticmethod
    def forward(ctx, x, shape):
        if type(x) is np.ndarray and not x.flags.c_contiguous and not _viewable(x, shape):
            c = _c_copy.contiguous(x)   # the copy NumPy would make, on the C pool's threads
            if c is not None:
                return c.reshape(shape)
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return reshape(g, ctx.in_meta[0][0])

    @staticmethod
    def backward_arrays(ctx, g):
        """backward's reshape on the array: the same forward, without a Tensor or an op."""
        if not arrays_serve(g):
            return NotImplemented
        shape = ctx.in_meta[0][0]
        return g if g.shape == shape else Reshape.forward(None, g, shape)


def _sizes(seq):
    """Sizes as ints; an int subclass (a symbolic size while tt.compile(dynamic=True)
    captures) is kept as it is, so the op records the formula, not today's number."""
    return tuple([s if isinstance(s, int) else int(s) for s in seq])


def _infer_shape(x, shape, op):
    shape = _sizes(shape)
    if not STATE.hooks.symbolic and -1 not in shape:
        # the usual call (plain ints, none inferred): one pass over the sizes; the general
        # path below says what is wrong when they do not fit
        total = 1
        for s in shape:
            if s < 0:
                break
            total *= s
        else:
            if total == x.numel():
                return shape
    n = x.numel()
    if shape.count(-1) > 1:
        raise OpError(f"{op}: only one dimension can be -1, got {shape}{_where()}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or n % known:
            raise OpError(f"{op}: shape {shape} is invalid for a tensor of shape "
                             f"{tuple(x.shape)} ({n} elements){_where()}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    total = 1
    for s in shape:
        if s < 0:
            raise OpError(f"{op}: negative size in shape {shape}{_where()}")
        total *= s
    if total != n:
        raise OpError(f"{op}: shape {shape} is invalid for a tensor of shape "
                         f"{tuple(x.shape)} ({n} elements){_where()}")
    return shape


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    shape = _infer_shape(x, shape, "reshape")
    if shape == x.shape:
        return x
    return Reshape.apply(x, shape=shape)


def view(x, *shape):
    """torch's view: the same memory under a new shape, or an error where that needs a copy
    (reshape copies then). A transposed or otherwise strided tensor can be viewed only when
    each run of dimensions being merged or split is contiguous in memory; torch's rule, and
    NumPy's for a reshape without a copy, which is what decides it here. Were it to copy, a
    write into the "view" would be lost."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    shape = _infer_shape(x, shape, "view")
    if shape == x.shape:
        return x
    if not _viewable(x.data, shape):
        raise OpError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead. "
            f"(view: shape {tuple(x.shape)} with strides {_elem_strides(x.data)} -> {shape})"
            f"{_where()}")
    return Reshape.apply(x, shape=shape)


def _viewable(a, shape):
    if type(a) is np.ndarray:
        if a.flags.c_contiguous:   # read in C order as it lies: every shape is a view (0.2 us, not 1)
            return True
        # NumPy 2.1+ refuses a copying reshape at once (2 us); setting .shape on a strided
        # view first works out the copy it refuses (2.4 ms on a transposed 2M array)
        try:
            np.reshape(a, shape, copy=False)
            return True
        except ValueError:
            return False
        except TypeError:   # an older NumPy: no copy= (below)
            pass
    v = a.view()
    try:
        v.shape = shape  # NumPy and CuPy refuse this exactly when the reshape would copy
    except (AttributeError, ValueError):
        return False
    return True


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides) if a.itemsize else tuple(a.strides)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s = norm_dim(start_dim, x.ndim, "flatten")
    e = norm_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise OpError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:s] + (-1,) + x.shape[e + 1:]
    if 0 in x.shape:
        mid = 1
        for d in x.shape[s:e + 1]:
            mid *= d
        shape = x.shape[:s] + (mid,) + x.shape[e + 1:]
    return reshape(x, shape)


def unflatten(x, dim, sizes):
    d = norm_dim(dim, x.ndim, "unflatten")
    sizes = _sizes(sizes)
    n = x.shape[d]
    known = 1
    for s in sizes:
        known *= s if s != -1 else 1
    if sizes.count(-1) > 1 or (-1 not in sizes and known != n) or (
            -1 in sizes and (known == 0 or n % known)) or any(s < -1 for s in sizes):
        raise OpError(f"unflatten: sizes {sizes} do not multiply up to the size {n} of dimension "
                         f"{dim} of shape {tuple(x.shape)}{_where()}")
    sizes = tuple(n // known if s == -1 else s for s in sizes)
    return reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


def squeeze(x, dim=None):
    if dim is None:
        shape = tuple(s for s in x.shape if s != 1)
    else:
        dims = norm_dims(dim, x.ndim, "squeeze")
        shape = tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1))
    return reshape(x, shape)


def unsqueeze(x, dim):
    d = norm_dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


class Permute(_Movement):
    is_view = True

    @staticmethod
    def forward(ctx, x, dims):
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        return Permute.apply(g, dims=_inverse(ctx.attrs["dims"]))

    @staticmethod
    def backward_arrays(ctx, g):
        if not arrays_serve(g):
            return NotImplemented
        return Permute.forward(None, g, _inverse(ctx.attrs["dims"]))


def _inverse(dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return tuple(inverse)


def permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    if len(dims) != x.ndim:
        raise OpError(f"permute: got {len(dims)} dims {plain(tuple(dims))} for a tensor with "
                         f"{x.ndim} dimensions, shape {tuple(x.shape)}{_where()}")
    dims = tuple(norm_dim(d, x.ndim, "permute") for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise OpError(f"permute: dims {plain(dims)} are not a permutation of 0..{x.ndim - 1}")
    if dims == tuple(range(x.ndim)):
        return x
    return Permute.apply(x, dims=dims)


def transpose(x, dim0, dim1):
    n = x.ndim
    if n < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return x
    d0, d1 = norm_dim(dim0, n, "transpose"), norm_dim(dim1, n, "transpose")
    if d0 == d1:
        return x   # permute's answer for the identity
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return Permute.apply(x, dims=tuple(dims))   # a permutation by construction: permute's checks hold


def movedim(x, source, destination):
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise OpError(f"movedim: source {source} and destination {destination} must have the "
                         f"same number of dims{_where()}")
    src = [norm_dim(d, x.ndim, "movedim") for d in src]
    dst = [norm_dim(d, x.ndim, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise OpError(f"movedim: repeated dim in source {source} or destination "
                         f"{destination}{_where()}")
    dims = [None] * x.ndim
    for s, d in zip(src, dst):
        dims[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    dims = [next(rest) if d is None else d for d in dims]
    return permute(x, dims)


# ---------------------------------------------------------------- joining and splitting
class Cat(_Movement):
    @staticmethod
    def forward(ctx, *xs, dim):
        return _xp(xs[0]).concatenate(xs, axis=dim)

    @staticmethod
    def forward_into(out, *xs, dim):
        """forward's result written into `out` (C-contiguous, of the result's shape and dtype)."""
        return _xp(xs[0]).concatenate(xs, axis=dim, out=out)

    @staticmethod
    def backward(ctx, g):
        dim = ctx.attrs["dim"]
        sizes = [m[0][dim] for m in ctx.in_meta]
        return tuple(split(g, sizes, dim))


def _listed(tensors, op):
    tensors = list(tensors)
    if not tensors:
        raise OpError(f"{op}: expected a non-empty list of tensors")
    return tensors


def cat(tensors, dim=0):
    tensors = _listed(tensors, "cat")
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote(dt, t.dtype)
    tensors = [cast(t, dt) for t in tensors]
    # torch's legacy rule: a 1-d tensor of size 0 is skipped next to tensors of more dims
    legacy = [t for t in tensors if t.ndim == 1 and t.shape[0] == 0]
    if legacy and len(legacy) < len(tensors):
        tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    ref = tensors[0]
    d = norm_dim(dim, ref.ndim, "cat")
    for t in tensors[1:]:
        if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise OpError(f"cat: tensors must match in every dimension but {dim}; got shapes "
                             + ", ".join(str(tuple(x.shape)) for x in tensors) + _where())
    return Cat.apply(*tensors, dim=d)  # also for one tensor: the result is a new tensor, as in torch


concat = cat
concatenate = cat


def stack(tensors, dim=0):
    tensors = _listed(tensors, "stack")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise OpError("stack: all tensors must have the same shape; got "
                             + ", ".join(str(tuple(x.shape)) for x in tensors) + _where())
    d = norm_dim(dim, len(shape) + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(x, split_size_or_sections, dim=0):
    d = norm_dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise OpError(f"split: split size must be positive, got {size}")
        m = int(n)   # the number of pieces follows the size: pinned while capturing
        sizes = [builtins.min(size, m - i) for i in range(0, m, size)] or [0]
    else:
        sizes = list(_sizes(split_size_or_sections))
        if builtins.sum(sizes) != n:
            raise OpError(f"split: sections {sizes} do not add up to the size {n} of "
                             f"dimension {dim} of shape {tuple(x.shape)}{_where()}")
    out, start = [], 0
    for s in sizes:
        idx = (slice(None),) * d + (slice(start, start + s),)
        out.append(x[idx])
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    d = norm_dim(dim, x.ndim, "chunk")
    chunks = int(chunks)
    if chunks <= 0:
        raise OpError(f"chunk: the number of chunks must be positive, got {chunks}{_where()}")
    n = x.shape[d]
    size = -(-n // chunks) if n else 1
    return split(x, size, d)


def unbind(x, dim=0):
    d = norm_dim(dim, x.ndim, "unbind")
    if x.shape[d] == 0:
        return ()
    return tuple(squeeze(t, d) for t in split(x, 1, d))


# ---------------------------------------------------------------- reordering
class Flip(_Movement):
    # a copy, as torch.flip (NumPy's flip is a view): writing into the result leaves x alone
    @staticmethod
    def forward(ctx, x, dims):
        return _xp(x).flip(x, axis=dims).copy()

    @staticmethod
    def backward(ctx, g):
        return Flip.apply(g, dims=ctx.attrs["dims"])


def flip(x, dims):
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    seen = [norm_dim(d, x.ndim, "flip") for d in dims]
    for i, d in enumerate(seen):
        if d in seen[:i]:  # norm_dims would merge them silently; torch refuses
            raise RuntimeError(f"flip: dim {d} appears multiple times in the list of dims "
                               f"{tuple(dims)}{_where()}")
    dims = norm_dims(dims, x.ndim, "flip")
    return Flip.apply(x, dims=dims)


class Roll(_Movement):
    @staticmethod
    def forward(ctx, x, shifts, dims):
        if dims is None:
            return _xp(x).roll(x, shifts)
        return _xp(x).roll(x, shifts, axis=dims)

    @staticmethod
    def backward(ctx, g):
        shifts = ctx.attrs["shifts"]
        neg = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return Roll.apply(g, shifts=neg, dims=ctx.attrs["dims"])


def roll(x, shifts, dims=None):
    if dims is None and not isinstance(shifts, (int, np.integer)):
        shifts = tuple(int(s) for s in shifts)
        if len(shifts) != 1:
            raise OpError(f"roll: {len(shifts)} shifts {shifts} need as many dims; without dims "
                             f"the tensor is rolled as if flattened by one int shift{_where()}")
        shifts = shifts[0]
    if dims is None:
        shifts = int(shifts)
    else:
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        dims = tuple(norm_dim(d, x.ndim, "roll") for d in dims)
        shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
        shifts = tuple(int(s) for s in shifts)
        if len(shifts) != len(dims):
            raise OpError(f"roll: got {len(shifts)} shifts {shifts} for {len(dims)} dims "
                             f"{plain(dims)}{_where()}")
    return Roll.apply(x, shifts=shifts, dims=dims)


class Repeat(_Movement):
    @staticmethod
    def forward(ctx, x, repeats):
        return _xp(x).tile(x, repeats)

    @staticmethod
    def backward(ctx, g):
        reps = ctx.attrs["repeats"]
        shape = ctx.in_meta[0][0]
        shape = (1,) * (len(reps) - len(shape)) + tuple(shape)
        # view the gradient as (r0, s0, r1, s1, ...) and sum over the repeat axes
        split_shape = []
        for r, s in zip(reps, shape):
            split_shape += [r, s]
        g = reshape(g, split_shape)
        g = g.sum(dim=tuple(range(0, 2 * len(reps), 2)))  # reduce lies above movement: via the method
        return reshape(g, ctx.in_meta[0][0])


def repeat(x, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:
        raise OpError(f"repeat: number of repeat dims ({len(sizes)}) cannot be smaller than "
                         f"the tensor's dimensions ({x.ndim}), shape {tuple(x.shape)}{_where()}")
    sizes = _sizes(sizes)
    if any(s < 0 for s in sizes):
        raise OpError(f"repeat: repeats {sizes} must be non-negative, shape {tuple(x.shape)}{_where()}")
    return Repeat.apply(x, repeats=sizes)


def tile(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = (1,) * (x.ndim - len(dims)) + tuple(dims)
    return repeat(x, dims)


def repeat_interleave(x, repeats, dim=None, *, output_size=None):
    """Each entry along dim repeated `repeats` times (one count, or one per entry);
    `output_size`, torch's hint of the result's length there, must be that length."""
    if dim is None:
        x, dim = flatten(x), 0
    d = norm_dim(dim, x.ndim, "repeat_interleave")
    if output_size is not None:
        out = repeat_interleave(x, repeats, d)
        if out.shape[d] != output_size:
            raise OpError(f"repeat_interleave: output_size={output_size} does not match the "
                          f"repeated length {out.shape[d]} along dimension {dim} (input shape "
                          f"{tuple(x.shape)}){_where()}")
        return out
    shape = x.shape
    if not isinstance(repeats, (int, np.integer)):
        counts = np.asarray(repeats.tolist() if isinstance(repeats, Tensor) else repeats).reshape(-1)
        if counts.dtype.kind not in "iu" or (counts.size != 1 and counts.size != shape[d]) or (
                counts < 0).any():
            raise OpError(f"repeat_interleave: repeats must be non-negative integers, one per "
                             f"entry of dimension {dim} (size {shape[d]}), got {counts.tolist()}"
                             f"{_where()}")
        if counts.size != 1:  # per-entry counts: a gather along dim
            index = np.repeat(np.arange(shape[d]), counts)
            return x[(slice(None),) * d + (x.device.xp.asarray(index),)]
        repeats = counts[0]
    repeats = int(repeats)
    if repeats < 0:
        raise OpError(f"repeat_interleave: repeats must be non-negative, got {repeats}{_where()}")
    y = unsqueeze(x, d + 1)
    y = expand(y, *shape[:d + 1], repeats, *shape[d + 1:])
    return reshape(y, shape[:d] + (shape[d] * repeats,) + shape[d + 1:])


# ---------------------------------------------------------------- padding and triangles
class Pad(Function):
    compile_rule = Rule(flops=0)   # moves or picks elements: no arithmetic

    @staticmethod
    def jvp(ctx, t):
        return Pad.apply(t, widths=ctx.attrs["widths"], value=0.0)   # the fill is a constant
    @staticmethod
    def forward(ctx, x, widths, value):
        return _xp(x).pad(x, widths, mode="constant", constant_values=value)

    @staticmethod
    def backward(ctx, g):
        idx = tuple(slice(lo, lo + s) for (lo, _), s in zip(ctx.attrs["widths"], ctx.in_meta[0][0]))
        return g[idx]


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x, pad, mode="constant", value=0.0):
    """PyTorch's F.pad: `pad` lists (left, right) pairs starting from the last dimension.
    'reflect', 'replicate' and 'circular' pad the last 1, 2 or 3 dimensions of a batched or
    unbatched input, as torch allows; each padded dimension is one gather (x[index])."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: mode {plain(mode)!r} is not supported; expected one of "
                                  f"{_PAD_MODES}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise OpError(f"pad: expected an even number of pads at most 2*{x.ndim}, got {pad}")
    if mode != "constant":
        return _pad_gather(x, pad, str(mode))  # str: np.str_ would print as np.str_('reflect')
    if any(p < 0 for p in pad):
        # negative padding crops: crop first, then pad with the non-negative part
        idx = [slice(None)] * x.ndim
        for k in range(len(pad) // 2):
            d = x.ndim - 1 - k
            lo, hi = pad[2 * k], pad[2 * k + 1]
            idx[d] = slice(-lo if lo < 0 else 0, x.shape[d] + hi if hi < 0 else x.shape[d])
            if x.shape[d] + builtins.min(lo, 0) + builtins.min(hi, 0) < 0:
                raise OpError(f"pad: pads {pad} crop dimension {d} of shape {tuple(x.shape)} "
                                 f"below size 0{_where()}")
        x = x[tuple(idx)]
        pad = tuple(builtins.max(p, 0) for p in pad)
    widths = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        widths[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    if all(w == (0, 0) for w in widths):
        return clone(x)  # a new tensor, as in torch: writing into it must not change x
    return Pad.apply(x, widths=tuple(widths), value=value)


def _pad_index(n, lo, hi, mode):
    """Indices into a dimension of size n that pad it by lo before and hi after."""
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return i % n
    i = np.abs(i)  # reflect about the first and the last entry, which are not repeated
    return np.where(i > n - 1, 2 * (n - 1) - i, i)


def _pad_gather(x, pad, mode):
    k = len(pad) // 2
    if x.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad: mode {mode!r} with {len(pad)} pads needs a {k + 1}-d (unbatched) or {k + 2}-d "
            f"(batched) input, as in torch, got shape {tuple(x.shape)}{_where()}")
    if mode != "circular" and 0 in x.shape[x.ndim - k - 1:]:
        raise RuntimeError(f"pad: mode {mode!r} needs non-empty dimensions other than the batch "
                           f"dimension, got shape {tuple(x.shape)}{_where()}")
    # negative pads crop first and the rest pads what is left, as torch does; 'replicate'
    # clamps into the uncropped input (torch: a pad of -4 then 5 repeats the last entry)
    if builtins.min(pad) < 0 and mode != "replicate":
        idx = [slice(None)] * x.ndim
        for j in range(k):
            d = x.ndim - 1 - j
            idx[d] = slice(-builtins.min(pad[2 * j], 0), x.shape[d] + builtins.min(pad[2 * j + 1], 0))
        x = x[tuple(idx)]
    for j in range(k):
        d = x.ndim - 1 - j
        lo, hi, n = pad[2 * j], pad[2 * j + 1], x.shape[d]
        if mode != "replicate":
            lo, hi = builtins.max(lo, 0), builtins.max(hi, 0)
        if not lo and not hi:
            continue
        if n + lo + hi < 0:
            raise RuntimeError(f"pad: pads ({lo}, {hi}) crop dimension {d} of shape "
                               f"{tuple(x.shape)} below size 0{_where()}")
        if mode == "reflect" and builtins.max(lo, hi) >= n:
            raise RuntimeError(f"pad: mode 'reflect' needs pads smaller than the dimension they "
                               f"pad, got ({lo}, {hi}) for dimension {d} of shape "
                               f"{tuple(x.shape)}{_where()}")
        if mode == "circular" and builtins.max(lo, hi) > n:
            raise RuntimeError(f"pad: mode 'circular' pads ({lo}, {hi}) wrap around dimension {d} "
                               f"of shape {tuple(x.shape)} more than once{_where()}")
        index = x.device.xp.asarray(_pad_index(n, lo, hi, mode))
        x = x[(slice(None),) * d + (index,)]
    return x


class _Triangle(_Movement):
    """x with the elements above (tril) or below (triu) the `diagonal`-th diagonal zeroed."""
    np_name = None

    @classmethod
    def forward(cls, ctx, x, diagonal):
        return getattr(_xp(x), cls.np_name)(x, diagonal)

    @classmethod
    def backward(cls, ctx, g):
        return cls.apply(g, diagonal=ctx.attrs["diagonal"])

    @classmethod
    def call(cls, x, diagonal):
        if x.ndim < 2:
            raise OpError(f"{cls.name}: expected at least 2 dimensions, got shape {tuple(x.shape)}")
        return cls.apply(x, diagonal=_sizes((diagonal,))[0])


class Tril(_Triangle):
    np_name = "tril"


class Triu(_Triangle):
    np_name = "triu"


def tril(x, diagonal=0):
    return Tril.call(x, diagonal)


def triu(x, diagonal=0):
    return Triu.call(x, diagonal)


def contiguous(x, memory_format=None):
    """x itself when its memory is C-contiguous, else a C-contiguous copy (like torch);
    the copy is also writable, unlike an expand() view. memory_format=channels_last lays
    it out channels innermost instead (ops/memory_format.py)."""
    if memory_format is not None:
        from .memory_format import format_name, apply_memory_format
        if format_name(memory_format, "contiguous") != "contiguous_format":
            if format_name(memory_format, "contiguous") == "preserve_format":
                raise ValueError("contiguous: memory_format=preserve_format is not a layout "
                                 "contiguous() can produce (as in torch)")
            return apply_memory_format(x, memory_format, "contiguous")
    flags = x.data.flags
    if flags.c_contiguous and getattr(flags, "writeable", True):
        return x
    return clone(x)


def t(x):
    """Transpose of a matrix (0-d and 1-d tensors are returned as they are), like torch.t."""
    if x.ndim > 2:
        raise OpError(f"t: expects a tensor with at most 2 dimensions, got shape {tuple(x.shape)}; "
                         "use transpose(dim0, dim1) or mT")
    return transpose(x, 0, 1) if x.ndim == 2 else x


def narrow(x, dim, start, length):
    """x sliced to [start, start + length) along dim (a view), like torch.narrow."""
    d = norm_dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length <= n - start):
        raise IndexError(f"narrow: start {start} and length {length} do not fit dimension {dim} "
                         f"of size {n} (shape {tuple(x.shape)}){_where()}")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def select(x, dim, index):
    """x indexed at `index` along dim, which is removed, like torch.select."""
    d = norm_dim(dim, x.ndim, "select")
    return x[(slice(None),) * d + (int(index),)]
