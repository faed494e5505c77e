"""Batching rules: how each op runs on physical (batched) tensors under tt.func.vmap.

A rule is `rule(cls, args, attrs, B) -> (out, bdim)`: `args` holds one (value, bdim) per
positional input (bdim None: the input is the same for every example), B is the batch size;
`out` is the op's result on the physical tensors (a tuple for a multi-output op), whose
batch lies along dim `bdim` (None: not batched). Rules call ordinary ops, so under nested
vmap the physical ops are batched again by the levels outside, and under autograd they are
recorded on the tape like any op (the backward of a batched computation is its physical
backward). Families (`register` at the bottom):

- elementwise with broadcasting (`front`): the batch goes first and a batched input gets
  size-1 dims after it up to the largest logical rank (`pad`): logical ranks differ between
  batched and unbatched inputs, and broadcasting aligns from the right; unbatched inputs
  stay as they are. Ops that only touch trailing dims (softmax over the last dim, tril,
  per-matrix linalg, one_hot) follow the same rule.
- reductions and dim-taking ops: batch first, every dim attribute shifted by one (None, "all
  dims", becomes every dim but the batch).
- movement: reshape / expand / sum_to / pad / repeat / permute / getitem get the batch
  prepended to their shape, widths, repeats, dims or key.
- own rules: matmul (a shared weight stays one GEMM: the batch is folded into the rows,
  and a weight lifted for per-example gradients keeps one GEMM forward, `SharedMatmul`),
  conv (folded into N, or groups=B for per-example weights), einsum (one more letter),
  layer/rms norm, attention, cross-entropy, gather/scatter, cat.
- anything else: `fallback`, the op once per example, stacked (a warning names the op once).
"""
import warnings

import numpy as np

from ..blas_threads import adapt
from ..core.function import Function
from ..core.primitives import Expand
from ..core.tensor import Tensor

RULES = {}
_WARNED = set()


# ---------------------------------------------------------------- helpers on physical tensors
def move(v, src, dst):
    """v with its dim `src` moved to `dst` (a view)."""
    from ..ops.movement import Permute
    n = v.ndim
    src, dst = src % n, dst % n
    if src == dst:
        return v
    perm = [i for i in range(n) if i != src]
    perm.insert(dst, src)
    return Permute.apply(v, dims=tuple(perm))


def reshape(v, shape):
    from ..ops.movement import Reshape
    shape = tuple(shape)
    return v if tuple(v.shape) == shape else Reshape.apply(v, shape=shape)


def expand_batch(v, B):
    """An unbatched tensor as a batched one: (B, *shape), stride 0 along the batch."""
    shape = tuple(v.shape)
    return Expand.apply(reshape(v, (1,) + shape), shape=(B,) + shape)


def pad(v, rank):
    """v (batch first) with size-1 dims after the batch up to logical rank `rank`."""
    k = v.ndim - 1
    if k >= rank:
        return v
    s = tuple(v.shape)
    return reshape(v, s[:1] + (1,) * (rank - k) + s[1:])


def batched_first(args, B):
    """Every input with the batch first, an unbatched one expanded (stride 0)."""
    return [move(v, d, 0) if d is not None else expand_batch(v, B) for v, d in args]


def select(v, d, i):
    from ..ops.indexing import GetItem
    return GetItem.apply(v, key=(slice(None),) * d + (i,), advanced=False)


def stack0(ts):
    from ..ops.movement import stack
    return stack(ts, 0)


def _shift(d, rank):
    return (d % rank if rank else 0) + 1


def _logical_rank(v, d):
    return v.ndim - (d is not None)


# ---------------------------------------------------------------- the fallback
def fallback(cls, args, attrs, B):
    """The op once per example (slices of the batched inputs), the results stacked: right
    for any op whose result has one shape for every example, and slow."""
    if cls.name not in _WARNED:
        _WARNED.add(cls.name)
        warnings.warn(f"vmap: op '{cls.name}' ({cls.__module__}.{cls.__qualname__}) has no "
                      "batching rule: it runs once per example and the results are stacked "
                      "(correct, but slow)", UserWarning, stacklevel=4)
    if B == 0:
        raise RuntimeError(f"vmap: op '{cls.name}' has no batching rule, and the per-example "
                           "fallback cannot run over an empty batch")
    outs = []
    for i in range(B):
        outs.append(cls.apply(*[select(v, d, i) if d is not None else v for v, d in args],
                              **attrs))
    if outs[0].__class__ is tuple:
        return tuple(stack0([o[j] for o in outs]) for j in range(len(outs[0]))), 0
    return stack0(outs), 0


# ---------------------------------------------------------------- families
def front(cls, args, attrs, B):
    """Elementwise with broadcasting (and ops on trailing dims only)."""
    rank = max(_logical_rank(v, d) for v, d in args)
    new = [v if d is None else pad(move(v, d, 0), rank) for v, d in args]
    return cls.apply(*new, **attrs), 0


def same_dim(cls, args, attrs, B):
    """An op that keeps every dim where it is (the identity alias of the transforms)."""
    (v, d), = args
    return cls.apply(v, **attrs), d


def front_first(cls, args, attrs, B):
    """Ops batched on the first input only (isin's test set, a linalg op's options)."""
    if any(d is not None for _, d in args[1:]):
        return fallback(cls, args, attrs, B)
    (v, d) = args[0]
    return cls.apply(move(v, d, 0), *[v for v, _ in args[1:]], **attrs), 0


def dims_attr(key, *, all_batched=False, none_ok=True):
    """A rule for ops whose attribute `key` (an int, a tuple of ints, or None for every dim)
    names dims of the first input."""
    def rule(cls, args, attrs, B):
        if all_batched:
            new = batched_first(args, B)
        elif any(d is not None for _, d in args[1:]):
            return fallback(cls, args, attrs, B)
        else:
            new = [move(args[0][0], args[0][1], 0)] + [v for v, _ in args[1:]]
        rank = new[0].ndim - 1
        dims = attrs[key]
        if dims is None and not none_ok:
            return fallback(cls, args, attrs, B)
        if rank == 0:
            return _scalar_examples(cls, new, attrs, key, dims, B)
        if dims is None:
            dims = tuple(range(1, rank + 1))
        elif isinstance(dims, (int, np.integer)):
            dims = _shift(int(dims), rank)
        else:
            dims = tuple(_shift(int(x), rank) for x in dims)
        return cls.apply(*new, **{**attrs, key: dims}), 0
    return rule


def _scalar_examples(cls, new, attrs, key, dims, B):
    """A dim-taking op on 0-d examples (torch reads a 0-d tensor as one entry along dim 0
    or -1): on (B, 1) along dim 1, the result back to one entry per example."""
    if len(new) > 1:
        return fallback(cls, [(v, 0) for v in new], attrs, B)
    one = 1 if isinstance(dims, (int, np.integer)) else (1,)
    extra = {"keepdim": False} if "keepdim" in attrs else {}
    out = cls.apply(reshape(new[0], (B, 1)), **{**attrs, key: one, **extra})
    fix = (lambda o: reshape(o, (B,)) if o.ndim == 2 else o)
    return (tuple(fix(o) for o in out) if out.__class__ is tuple else fix(out)), 0


def two_dims(k1, k2):
    def rule(cls, args, attrs, B):
        if len(args) > 1:
            return fallback(cls, args, attrs, B)
        v = move(args[0][0], args[0][1], 0)
        rank = v.ndim - 1
        return cls.apply(v, **{**attrs, k1: _shift(attrs[k1], rank),
                               k2: _shift(attrs[k2], rank)}), 0
    return rule


def argextreme(cls, args, attrs, B):
    """argmax / argmin: dim=None reads the flattened example."""
    (v, d), = args
    v = move(v, d, 0)
    rank = v.ndim - 1
    if attrs["dim"] is not None:
        if rank == 0:
            return fallback(cls, args, attrs, B)
        return cls.apply(v, **{**attrs, "dim": _shift(attrs["dim"], rank)}), 0
    out = cls.apply(reshape(v, (B, -1)), dim=1, keepdim=False)
    return (reshape(out, (B,) + (1,) * rank) if attrs["keepdim"] else out), 0


def permute_rule(cls, args, attrs, B):
    (v, d), = args
    v = move(v, d, 0)
    rank = v.ndim - 1
    return cls.apply(v, dims=(0,) + tuple(_shift(x, rank) for x in attrs["dims"])), 0


def roll_rule(cls, args, attrs, B):
    if attrs["dims"] is None:
        return fallback(cls, args, attrs, B)
    return dims_attr("dims")(cls, args, attrs, B)


def reshape_rule(cls, args, attrs, B):
    (v, d), = args
    return cls.apply(move(v, d, 0), shape=(B,) + tuple(attrs["shape"])), 0


def expand_rule(cls, args, attrs, B):
    (v, d), = args
    shape = tuple(attrs["shape"])
    return cls.apply(pad(move(v, d, 0), len(shape)), shape=(B,) + shape), 0


def sum_to_rule(cls, args, attrs, B):
    from ..ops.reduce import Sum
    (v, d), = args
    v = move(v, d, 0)
    shape = tuple(attrs["shape"])
    lead = v.ndim - 1 - len(shape)
    if lead:
        v = Sum.apply(v, dims=tuple(range(1, 1 + lead)), keepdim=False)
    return (v if tuple(v.shape) == (B,) + shape else cls.apply(v, shape=(B,) + shape)), 0


def pad_rule(cls, args, attrs, B):
    (v, d), = args
    return cls.apply(move(v, d, 0), **{**attrs, "widths": ((0, 0),) + tuple(attrs["widths"])}), 0


def repeat_rule(cls, args, attrs, B):
    (v, d), = args
    reps = tuple(attrs["repeats"])
    return cls.apply(pad(move(v, d, 0), len(reps)), repeats=(1,) + reps), 0


def getitem_rule(cls, args, attrs, B):
    """x[key] for a batched x and a constant key: the key gets a full slice for the batch.
    NumPy moves the dims of index arrays that are not next to each other to the front,
    which would move the batch too: that case falls back."""
    from ..ops.indexing import IntsFirst
    (v, d), = args
    v = move(v, d, 0)
    key, advanced = attrs["key"], attrs["advanced"]
    full = (slice(None),)
    if isinstance(key, IntsFirst):
        first, rest = key
        if not _adjacent_arrays(rest):
            return fallback(cls, args, attrs, B)
        key = IntsFirst((full + tuple(first), full + tuple(rest)))
    else:
        if advanced and not _adjacent_arrays(key):
            return fallback(cls, args, attrs, B)
        key = full + tuple(key)
    return cls.apply(v, key=key, advanced=advanced), 0


def _adjacent_arrays(key):
    pos = [i for i, k in enumerate(key) if hasattr(k, "ndim")]
    return not pos or pos[-1] - pos[0] + 1 == len(pos)


def einsum_rule(cls, args, attrs, B):
    terms, output = list(attrs["terms"]), attrs["output"]
    used = set("".join(terms) + output)
    if "." in used:
        return fallback(cls, args, attrs, B)
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in used)
    new = []
    for i, (v, d) in enumerate(args):
        if d is not None:
            new.append(move(v, d, 0))
            terms[i] = letter + terms[i]
        else:
            new.append(v)
    return cls.apply(*new, terms=tuple(terms), output=letter + output), 0


# ---------------------------------------------------------------- matmul
class SharedMatmul(Function):
    """a @ w for a batched `a` (B, ..., n) and a weight `w` (B, n, m) lifted into the batch
    (stride 0: one matrix for every example): one GEMM forward, and a per-example weight
    gradient (B, n, m) backward, the one a gradient taken inside vmap asks for."""
    name = "vmap_shared_matmul"

    @staticmethod
    def forward(ctx, a, w):
        ctx.save_for_backward(a, w)
        if isinstance(a, np.ndarray):
            adapt()   # one BLAS thread while other processes hold the cores, as MatMul
        w0 = w[0]
        n = a.shape[-1]
        rows = int(np.prod(a.shape[:-1]))
        return (a.reshape(rows, n) @ w0).reshape(a.shape[:-1] + (w0.shape[-1],))

    @staticmethod
    def backward(ctx, g):
        from ..ops.linalg import MatMul
        a, w = ctx.saved_tensors
        na, nw = ctx.needs_input_grad
        ga = SharedMatmul.apply(g, w.mT) if na else None
        gw = None
        if nw:
            from ..ops.elementwise import Mul
            B, n, m = w.shape
            p = int(np.prod(a.shape[1:-1]))
            if p == 1:   # outer products
                gw = Mul.apply(reshape(a, (B, n, 1)), reshape(g, (B, 1, m)))
            else:
                gw = MatMul.apply(reshape(a, (B, p, n)).mT, reshape(g, (B, p, m)))
        return ga, gw

    @staticmethod
    def jvp(ctx, ta, tw):
        """Forward mode (vmap of jvp with a lifted weight): ta @ w + a @ tw, the second as a
        batched product (a tangent of w need not be one matrix for every example)."""
        from ..ops.elementwise import Add
        from ..ops.linalg import MatMul
        a, w = ctx.saved_tensor(0), ctx.saved_tensor(1)
        out = SharedMatmul.apply(ta, w) if ta is not None else None
        if tw is not None:
            B, n, m = w.shape
            p = int(np.prod(a.shape[1:-1]))
            t = reshape(MatMul.apply(reshape(a, (B, p, n)), tw), tuple(a.shape[:-1]) + (m,))
            out = t if out is None else Add.apply(out, t)
        return out

    @staticmethod
    def backward_arrays(ctx, g):
        a, w = ctx.saved_arrays
        na, nw = ctx.needs_input_grad
        if isinstance(a, np.ndarray):
            adapt()
        B, n, m = w.shape
        ga = (g.reshape(int(np.prod(g.shape[:-1])), m) @ w[0].T).reshape(g.shape[:-1] + (n,)) \
            if na else None
        gw = None
        if nw:
            p = int(np.prod(a.shape[1:-1]))
            if p == 1:   # one row per example: outer products, which a stacked GEMM does slowly
                gw = a.reshape(B, n, 1) * g.reshape(B, 1, m)
            else:
                xp = np if isinstance(a, np.ndarray) else __import__("cupy")
                gw = xp.matmul(a.reshape(B, p, n).transpose(0, 2, 1), g.reshape(B, p, m))
        return ga, gw


def _rows(shape):
    return int(np.prod(shape[:-1]))


def _shared(v, d):
    """Whether v is a plain tensor whose batch dim d has stride 0 (a lifted weight)."""
    return v._level is None and v.data.strides[d] == 0 and v.data.shape[d] > 1


def matmul_rule(cls, args, attrs, B):
    (a, da), (b, db) = args   # MatMul.apply gets 2-d or larger operands (matmul() reshapes 1-d)
    if da is not None and db is None and b.ndim == 2:
        a = move(a, da, 0)    # (B, ..., n) @ (n, m): the batch folds into the rows, one GEMM
        out = cls.apply(reshape(a, (_rows(a.shape), a.shape[-1])), b)
        return reshape(out, tuple(a.shape[:-1]) + (b.shape[-1],)), 0
    if da is None and db is not None and a.ndim == 2:
        b = move(b, db, 0)    # (n, k) @ (B, ..., k, m) = ((B, ..., m, k) @ (k, n))^T: one GEMM
        bt = b.mT
        out = cls.apply(reshape(bt, (_rows(bt.shape), bt.shape[-1])), a.mT)
        return reshape(out, tuple(bt.shape[:-1]) + (a.shape[0],)).mT, 0
    if da is not None and db is not None and b.ndim == 3 and _shared(b, db) and a._level is None:
        return SharedMatmul.apply(move(a, da, 0), move(b, db, 0)), 0
    rank = max(_logical_rank(a, da), _logical_rank(b, db))
    new = [v if d is None else pad(move(v, d, 0), rank) for v, d in args]
    return cls.apply(*new), 0


# ---------------------------------------------------------------- conv, norms, attention, losses
def conv_rule(cls, args, attrs, B):
    (x, dx), (w, dw) = args
    if dw is None:            # one weight: the batch folds into N
        x = move(x, dx, 0)
        s = tuple(x.shape)
        out = cls.apply(reshape(x, (B * s[1],) + s[2:]), w, **attrs)
        return reshape(out, (B, s[1]) + tuple(out.shape[1:])), 0
    # a weight per example: the examples become groups of one conv over N
    x = move(x, dx, 0) if dx is not None else expand_batch(x, B)     # (B, N, C, ...)
    w = move(w, dw, 0)                                                # (B, O, C/g, ...)
    s, ws = tuple(x.shape), tuple(w.shape)
    x2 = reshape(move(x, 0, 1), (s[1], B * s[2]) + s[3:])            # (N, B*C, ...)
    w2 = reshape(w, (B * ws[1],) + ws[2:])                            # (B*O, C/g, ...)
    out = cls.apply(x2, w2, **{**attrs, "groups": attrs["groups"] * B})
    o = tuple(out.shape)
    return reshape(out, (o[0], B, ws[1]) + o[2:]), 1


def fused_norm_rule(cls, args, attrs, B):
    """layer_norm / rms_norm over the last `nd` dims: the batch first leaves them last; a
    batched weight or bias (per-example, or lifted) is applied after the plain norm."""
    from ..ops.elementwise import Add, Mul
    (x, dx), params = args[0], args[1:]
    x = move(x, dx, 0) if dx is not None else expand_batch(x, B)
    if all(d is None for _, d in params):
        return cls.apply(x, *[v for v, _ in params], **attrs), 0
    y = cls.apply(x, **{**attrs, "has_weight": False, "has_bias": False})
    rank = x.ndim - 1
    it = iter(params)
    for has, op in ((attrs["has_weight"], Mul), (attrs["has_bias"], Add)):
        if has:
            v, d = next(it)
            y = op.apply(y, v if d is None else pad(move(v, d, 0), rank))
    return y, 0


def attention_rule(cls, args, attrs, B):
    (q, dq), (k, dk), (v, dv) = args[:3]
    rank = max(_logical_rank(t, d) for t, d in args[:3])
    qkv = [pad(t, rank) for t in batched_first(args[:3], B)]
    mask = []
    if len(args) > 3:
        m, dm = args[3]
        mask = [m if dm is None else pad(move(m, dm, 0), rank)]
    return cls.apply(*qkv, *mask, **attrs), 0


def cross_entropy_rule(cls, args, attrs, B):
    """The fused cross-entropy with class-index targets: the batch folds into N with
    reduction='none', then each example reduces its own rows."""
    from ..ops.elementwise import Ne
    from ..ops.reduce import Sum
    if len(args) > 2 and args[2][1] is not None:
        return fallback(cls, args, attrs, B)
    x, t = batched_first(args[:2], B)
    extra = [v for v, _ in args[2:]]
    s = tuple(x.shape)                         # (B, C) or (B, N, C, d...)
    xs = x if len(s) == 2 else reshape(x, (B * s[1],) + s[2:])
    ts = t if len(s) == 2 else reshape(t, (B * s[1],) + tuple(t.shape[2:]))
    red = attrs["reduction"]
    none = cls.apply(xs, ts, *extra, **{**attrs, "reduction": "none"})
    per = none if len(s) == 2 else reshape(none, (B, s[1]) + tuple(none.shape[1:]))
    if red == "none":
        return per, 0
    dims = tuple(range(1, per.ndim))
    total = Sum.apply(per, dims=dims, keepdim=False) if dims else per
    if red == "sum":
        return total, 0
    from ..core.primitives import cast
    from ..ops.elementwise import Div, Mul, Where
    from ..ops.indexing import GetItemCopy
    valid = Ne.apply(t, _scalar_like(t, attrs["ignore_index"]))
    w = cast(valid, x.dtype)
    if extra:           # a weighted mean divides by the weights of the counted targets
        if t._level is not None:
            return fallback(cls, args, attrs, B)
        safe = Where.apply(valid, t, _scalar_like(t, 0))
        w = Mul.apply(w, GetItemCopy.apply(extra[0], key=(safe.data,), advanced=True))
    tdims = tuple(range(1, t.ndim))
    count = Sum.apply(w, dims=tdims, keepdim=False) if tdims else w
    return Div.apply(total, count), 0


def _scalar_like(t, value):
    return Tensor._make(t._device.xp.asarray(value, dtype=t.data.dtype), t._device, False)


# ---------------------------------------------------------------- the table
def register(rule, *classes):
    for c in classes:
        RULES[c] = rule


def _build():
    import importlib
    from ..core import primitives

    def mod(name):   # the module, not the function of that name ops/__init__ exports
        return importlib.import_module(f"tinytensor.{name}")
    (activations, attention, cplx, conv, cross_entropy, cumulative, diagonal, elementwise,
     elementwise_more, indexing, linalg, linalg_decomp, linalg_misc, linalg_solve, losses,
     math_functions, movement, norms, products, reduce, softmax, sorting, special_functions,
     split_parts, order_stats, scatter, linalg_eig) = [mod(n) for n in (
        "ops.activations", "ops.attention", "ops.complex", "ops.conv", "ops.cross_entropy",
        "ops.cumulative", "ops.diagonal", "ops.elementwise", "ops.elementwise_more",
        "ops.indexing", "ops.linalg", "ops.linalg_decomp", "ops.linalg_misc", "ops.linalg_solve",
        "ops.losses", "ops.math_functions", "ops.movement", "ops.norms", "ops.products",
        "ops.reduce", "ops.softmax", "ops.sorting", "ops.special_functions", "ops.split_parts",
        "ops.order_stats", "ops.scatter", "linalg_eig")]

    def functions_of(*modules):
        out = []
        for m in modules:
            for v in vars(m).values():
                if isinstance(v, type) and issubclass(v, Function) and v.__module__ == m.__name__ \
                        and not v.__name__.startswith("_"):
                    out.append(v)
        return out

    not_elementwise = {elementwise.ViewDtype, elementwise.ToDevice, elementwise_more.HashTensor,
                       elementwise_more.Isin}
    register(front, *[c for c in functions_of(elementwise, elementwise_more, math_functions,
                                              special_functions, activations, cplx)
                      if c not in not_elementwise])
    register(front, primitives.Cast, elementwise.ToDevice, elementwise.ViewDtype,
             softmax.FusedSoftmax, softmax.FusedLogSoftmax, movement.Tril, movement.Triu,
             losses.OneHot, linalg_solve.Cholesky, linalg_solve.CholeskyInfo, linalg_solve.Inv,
             linalg_solve.Det, linalg_solve.Slogdet, linalg_solve.LuInfo, linalg_solve.Cofactor,
             linalg_decomp.Eigh, linalg_decomp.Svd, linalg_decomp.Qr, linalg_decomp.Pinv,
             linalg_misc.MatrixExp, linalg_eig.Eig)
    register(front_first, elementwise_more.Isin)
    register(dims_attr("dims"), reduce.Sum, reduce.Prod, reduce.Amax, reduce.Amin, reduce.All,
             reduce.Any, reduce.LogSumExp, reduce.Norm, reduce.Std, products.NormMax,
             products.NormMin, movement.Flip, norms.LayerNormCore, norms.RMSNormCore)
    register(dims_attr("dim"), reduce.Cumsum, cumulative.Cumprod, cumulative.Logcumsumexp,
             cumulative.CumExtremeIndex, softmax.Softmax, softmax.LogSoftmax, sorting.Argsort,
             split_parts.SplitParts, order_stats._SelectIndex, elementwise_more.HashTensor)
    register(dims_attr("dim", all_batched=True), movement.Cat, indexing._GatherOp,
             indexing.ScatterAdd, scatter.Scatter, scatter.ScatterReduce)
    register(argextreme, reduce.Argmax, reduce.Argmin)
    register(two_dims("dim1", "dim2"), diagonal.Diagonal)
    register(permute_rule, movement.Permute)
    register(roll_rule, movement.Roll)
    register(reshape_rule, movement.Reshape)
    register(expand_rule, primitives.Expand)
    register(sum_to_rule, primitives.SumTo)
    register(pad_rule, movement.Pad)
    register(repeat_rule, movement.Repeat)
    register(getitem_rule, indexing.GetItem, indexing.GetItemCopy)
    register(einsum_rule, linalg.Einsum)
    register(matmul_rule, linalg.MatMul)
    register(conv_rule, conv.Conv)
    register(fused_norm_rule, norms.FusedNorm, norms.FusedRMSNorm)
    register(attention_rule, attention.FlashAttention)
    register(cross_entropy_rule, cross_entropy.FusedCrossEntropy)
    from ._alias import Alias
    register(same_dim, Alias)


_build()
