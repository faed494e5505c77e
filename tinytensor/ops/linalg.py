"""matmul (PyTorch semantics: 1-D, 2-D, batched, broadcast batch dims) and einsum."""
import math

import numpy as np

from ..core.function import Function, _Ctx, arrays_serve
from ..core.rules import Rule
from ..dtypes import BF16_NP, promote
from ..messages import OpError, plain
from ..amp import cast_inputs
from ..blas_threads import adapt
from ..kernels import c_eager as _c_eager
from .elementwise import binary_operands, cast
from .movement import broadcast_shapes, expand, reshape, squeeze, sum_to, unsqueeze, _where


class MatMul(Function):
    compile_rule = Rule(flops=lambda attrs, i, o: 2 * math.prod(o[0][0]) * i[0][0][-1])   # a multiply-add per (m, n, k)
    name = "matmul"

    @staticmethod
    def jvp(ctx, ta, tb):
        a, b = ctx.saved_tensors   # bilinear: ta b + a tb
        out = MatMul.apply(ta, b) if ta is not None else None
        if tb is not None:
            term = MatMul.apply(a, tb)
            out = term if out is None else out + term
        return out

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        if isinstance(a, np.ndarray):
            adapt()  # one BLAS thread while other processes hold the cores
            if _low_precision_cpu(a):  # accumulate in float32 as torch does, round once at the end
                return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)
            out = _c_eager.matmul(a, b)   # a big one on the C pool's threads, as a compiled step
            if out is not None:
                return out
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        # batch broadcasting is summed away by the engine
        ga = MatMul.apply(g, b.mT) if na else None
        gb = MatMul.apply(a.mT, g) if nb else None
        return ga, gb

    @staticmethod
    def backward_arrays(ctx, g):
        """backward's two products by MatMul's forward on the arrays (.mT is a swap of the
        last two axes); 2-d or more only, as backward's .mT needs."""
        if not arrays_serve(g):
            return NotImplemented
        a, b = ctx.saved_arrays
        if a.ndim < 2 or b.ndim < 2:
            return NotImplemented
        na, nb = ctx.needs_input_grad
        ga = MatMul.forward(_NO_SAVE, g, b.swapaxes(-1, -2)) if na else None
        gb = MatMul.forward(_NO_SAVE, a.swapaxes(-1, -2), g) if nb else None
        return ga, gb


_NO_SAVE = _Ctx()   # forward's ctx when backward_arrays runs it: nothing is kept


def _low_precision_cpu(a):
    """bfloat16 or float16 in NumPy: no BLAS for them (float16 takes NumPy's scalar loop, 40x
    slower than float32), so such products run in float32 and round once, as torch does."""
    return isinstance(a, np.ndarray) and (a.dtype == BF16_NP or a.dtype == np.float16)


def matmul(a, b):
    a, b = binary_operands(*cast_inputs("matmul", a, b), "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise OpError(f"matmul: both arguments need at least one dimension, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}{_where()}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise OpError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match "
                         f"({ka} != {kb}){_where()}")
    if a.ndim > 2 and b.ndim > 2:
        try:
            broadcast_shapes(a.shape[:-2], b.shape[:-2], op="matmul")
        except ValueError:
            raise OpError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} have batch "
                             f"dimensions {tuple(a.shape[:-2])} and {tuple(b.shape[:-2])} that do "
                             f"not broadcast{_where()}") from None
    if a.ndim == 1 and b.ndim == 1:
        return reshape(MatMul.apply(reshape(a, (1, ka)), reshape(b, (kb, 1))), ())
    if a.ndim == 1:
        return squeeze(MatMul.apply(unsqueeze(a, 0), b), -2)
    if b.ndim == 1:
        return squeeze(MatMul.apply(a, unsqueeze(b, -1)), -1)
    return MatMul.apply(a, b)


def mm(a, b):
    """Matrix product of two 2-d tensors (torch.mm): no broadcasting, no 1-d vectors."""
    if a.ndim != 2 or b.ndim != 2:
        raise OpError(f"mm: expects two 2-d tensors, got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}{_where()}")
    return matmul(a, b)


def bmm(a, b):
    """Batched matrix product of (B, n, k) and (B, k, m) tensors (torch.bmm), no broadcasting."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise OpError(f"bmm: expects (B, n, k) and (B, k, m) tensors with the same B, got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}{_where()}")
    return matmul(a, b)


# ---------------------------------------------------------------- einsum
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse_einsum(equation, operands):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise OpError(f"einsum: equation {plain(equation)!r} has {len(terms)} operands but "
                         f"{len(operands)} tensors were given")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _LETTERS if c not in used]
    ell_dims = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            ell_dims = max(ell_dims, x.ndim - (len(t) - 3))
    ell = "".join(spare[:ell_dims])
    new_terms = []
    for t, x in zip(terms, operands):
        if "..." in t:
            n = x.ndim - (len(t) - 3)
            t = t.replace("...", ell[ell_dims - n:] if n else "")
        if len(t) != x.ndim:
            raise OpError(f"einsum: subscripts {t!r} do not match an operand of shape "
                             f"{tuple(x.shape)}{_where()}")
        for c in set(t):
            sizes_c = {x.shape[k] for k, ck in enumerate(t) if ck == c}
            if len(sizes_c) > 1:
                raise OpError(f"einsum: subscript {c!r} is repeated in {t!r} (a diagonal) but "
                                 f"the operand's sizes there differ, shape {tuple(x.shape)}{_where()}")
        new_terms.append(t)
    if out is None:
        counts = {}
        for t in new_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
        if len(set(out)) != len(out):
            raise OpError(f"einsum: output subscripts {out!r} repeat a subscript in "
                             f"{plain(equation)!r}{_where()}")
    for c in out:
        if not any(c in t for t in new_terms):
            raise OpError(f"einsum: output subscript {c!r} does not appear in the inputs")
    sizes = {}
    for t, x in zip(new_terms, operands):
        for c, s in zip(t, x.shape):
            if c in sizes and sizes[c] != s and s != 1 and sizes[c] != 1:
                raise OpError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {s} in "
                                 f"{plain(equation)!r}{_where()}")
            sizes[c] = max(sizes.get(c, s), s)
    return new_terms, out, sizes


def _einsum_flops(attrs, in_meta, out_meta):
    """2 * the product of every subscript size (a multiply-add per point of the joint index
    space), 1 * that for a one-operand sum."""
    sizes = {}
    for term, meta in zip(attrs.get("terms", ()), in_meta):
        for c, s in zip(term, meta[0]):
            sizes[c] = max(sizes.get(c, 1), s)
    joint = math.prod(sizes.values())
    return joint if len(in_meta) == 1 else 2 * (len(in_meta) - 1) * joint


class Einsum(Function):
    compile_rule = Rule(flops=_einsum_flops)

    @staticmethod
    def jvp(ctx, *tangents):
        xs = ctx.saved_tensors   # multilinear: one term per operand with a tangent
        out = None
        for i, t in enumerate(tangents):
            if t is not None:
                term = Einsum.apply(*xs[:i], t, *xs[i + 1:], **ctx.attrs)
                out = term if out is None else out + term
        return out
    @staticmethod
    def forward(ctx, *xs, terms, output):
        ctx.save_for_backward(*xs)
        xp = np if isinstance(xs[0], np.ndarray) else __import__("cupy")
        eq = ",".join(terms) + "->" + output
        if _low_precision_cpu(xs[0]):  # bfloat16 refused, float16 slow: float32 inside, round once
            out = Einsum.forward(ctx, *[x.astype(np.float32) for x in xs], terms=terms, output=output)
            ctx.save_for_backward(*xs)
            return out.astype(xs[0].dtype)
        return xp.einsum(eq, *xs, optimize=len(xs) > 2) if xp is np else xp.einsum(eq, *xs)

    @staticmethod
    def backward(ctx, g):
        xs = ctx.saved_tensors
        terms, output = ctx.attrs["terms"], ctx.attrs["output"]
        grads = []
        for i, t in enumerate(terms):
            if not ctx.needs_input_grad[i]:
                grads.append(None)
                continue
            others = [(terms[j], xs[j]) for j in range(len(xs)) if j != i]
            avail = set(output).union(*[set(s) for s, _ in others]) if others else set(output)
            target = "".join(c for c in t if c in avail)
            gi = Einsum.apply(g, *[x for _, x in others], terms=(output,) + tuple(s for s, _ in others),
                              output=target)
            shape = ctx.in_meta[i][0]
            tshape = tuple(shape[t.index(c)] for c in target)
            if gi.shape != tshape:  # a size-1 subscript broadcast against the other operands
                gi = sum_to(gi, tuple(1 if s == 1 else n for s, n in zip(tshape, gi.shape)))
                gi = expand(gi, *tshape)
            if target != t:  # subscripts summed only inside this operand: broadcast back
                gi = reshape(gi, tuple(shape[k] if c in avail else 1 for k, c in enumerate(t)))
                gi = expand(gi, *shape)
            grads.append(gi)
        return tuple(grads)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = cast_inputs("einsum", *operands)
    dt = operands[0].dtype
    for x in operands[1:]:
        dt = promote(dt, x.dtype)
    operands = [cast(x, dt) for x in operands]
    terms, out, _ = _parse_einsum(equation, operands)
    for k, (x, t) in enumerate(zip(operands, terms)):
        if len(set(t)) != len(t):
            operands[k], terms[k] = _diagonals(x, t)
    return Einsum.apply(*operands, terms=tuple(terms), output=out)


def _diagonals(x, t):
    """x with every subscript that repeats within its term t ('ii', 'iij') replaced by the
    diagonal over those dimensions, as a last dimension: (x', t') with t' free of repeats.
    A gather, so gradients (to the diagonal only) and double backward come with it."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        dims = [k for k, ck in enumerate(t) if ck == c]
        rest = [k for k in range(len(t)) if t[k] != c]
        x = x.permute(*rest, *dims)
        n = x.shape[-1]
        x = x[(Ellipsis,) + (x.device.xp.arange(n),) * len(dims)]
        t = "".join(t[k] for k in rest) + c
    return x, t
