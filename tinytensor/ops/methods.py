"""Every Tensor op method and operator, in one place: names and signatures follow
PyTorch, and each one is, or calls, a function of `tinytensor.ops`. Core cannot import ops
(ops import core), so the methods are attached from this side: `attach()`, which
ops/__init__.py calls once every op is loaded, copies this class body onto core's
`TensorMethods`, the mixin `Tensor` inherits (core/methods.py). An IDE finds `x.sum` here
and goes on to `ops.sum`."""

import numpy as np

from .. import ops   # run from the end of ops/__init__.py: every op is loaded by then
from ..core import methods as _core
from ..core.tensor import Tensor
from ..device import get_device
from ..dtypes import DType, from_any


def _ops(names):
    """`exp, log = _ops("exp log")`: the op functions themselves, as methods: `x.sum(...)`
    calls `ops.sum(x, ...)` with no method frame in between (a Python call is a large share
    of a small op's cost). Only for methods whose signature is the op's, self first; the
    others are written out below."""
    return tuple(getattr(ops, name) for name in names.split())


def _reflected(names):
    """Python's reflected operators: `2 - x` calls `x.__rsub__(2)`, which is `ops.sub(2, x)`."""
    def method(op):
        def reflected(self, other):
            return getattr(ops, op)(other, self)
        reflected.__name__ = reflected.__qualname__ = f"reflected_{op}"
        return reflected
    return tuple(method(op) for op in names.split())


class TensorMethods:
    __slots__ = ()

    # ------------------------------------------------------------------ the op functions themselves
    add, sub, mul, div, pow, neg, remainder, matmul, mm, bmm = _ops(
        "add sub mul div pow neg remainder matmul mm bmm")
    __add__, __sub__, __mul__, __truediv__, __pow__, __neg__, __mod__, __matmul__, __abs__ = _ops(
        "add sub mul div pow neg remainder matmul absolute")
    __iadd__, __isub__, __imul__, __itruediv__ = _ops("add_ sub_ mul_ div_")

    eq, ne, lt, le, gt, ge = _ops("eq ne lt le gt ge")
    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = _ops("eq ne lt le gt ge")
    # __invert__ is logical on bool, as in torch
    __and__, __or__, __xor__, __invert__ = _ops("bitwise_and bitwise_or bitwise_xor bitwise_not")
    __lshift__, __rshift__ = _ops("bitwise_left_shift bitwise_right_shift")
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = _ops(
        "bitwise_and bitwise_or bitwise_xor bitwise_not")
    bitwise_left_shift, bitwise_right_shift = _ops("bitwise_left_shift bitwise_right_shift")
    logical_and, logical_or, logical_not, logical_xor = _ops(
        "logical_and logical_or logical_not logical_xor")
    isfinite, isnan, isinf = _ops("isfinite isnan isinf")

    exp, log, log1p, sqrt, rsqrt, sign, sin, cos, tanh, sigmoid, relu, erf = _ops(
        "exp log log1p sqrt rsqrt sign sin cos tanh sigmoid relu erf")
    square, reciprocal, maximum, minimum, clamp, floor, ceil, trunc = _ops(
        "square reciprocal maximum minimum clamp floor ceil trunc")
    abs, absolute, clip, round = _ops("absolute absolute clamp round_half_even")
    tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh = _ops(
        "tan asin acos atan sinh cosh asinh acosh atanh")
    arcsin, arccos, arctan, arcsinh, arccosh, arctanh = _ops(
        "arcsin arccos arctan arcsinh arccosh arctanh")
    log2, log10, exp2, expm1, atan2, arctan2, hypot, logaddexp, copysign, fmod, lerp = _ops(
        "log2 log10 exp2 expm1 atan2 arctan2 hypot logaddexp copysign fmod lerp")
    softmax, log_softmax = _ops("softmax log_softmax")
    erfc, erfinv, lgamma, digamma, mvlgamma, i0, igamma, igammac, xlogy, logit, sinc = _ops(
        "erfc erfinv lgamma digamma mvlgamma i0 igamma igammac xlogy logit sinc")
    logaddexp2, float_power, fmax, fmin, frac, frexp, ldexp, gcd, lcm, heaviside = _ops(
        "logaddexp2 float_power fmax fmin frac frexp ldexp gcd lcm heaviside")
    nextafter, signbit, isneginf, isposinf, isreal, nan_to_num, clamp_min, clamp_max = _ops(
        "nextafter signbit isneginf isposinf isreal nan_to_num clamp_min clamp_max")
    deg2rad, rad2deg, true_divide, floor_divide, positive, hash_tensor = _ops(
        "deg2rad rad2deg true_divide floor_divide positive hash_tensor")

    def polygamma(self, n):
        """x.polygamma(n) is torch.polygamma(n, x): the order comes first in the function."""
        return ops.polygamma(n, self)

    sum, mean, prod, max, min, amax, amin, argmax, argmin = _ops(
        "sum mean prod max min amax amin argmax argmin")
    var, std, logsumexp, norm, all, any = _ops("var std logsumexp norm all any")
    cumsum, cumprod, cummax, cummin, logcumsumexp = _ops("cumsum cumprod cummax cummin logcumsumexp")
    sort, argsort, topk, multinomial = _ops("sort argsort topk multinomial")
    nansum, nanmean, median, nanmedian, kthvalue, mode, quantile, nanquantile = _ops(
        "nansum nanmean median nanmedian kthvalue mode quantile nanquantile")
    aminmax, count_nonzero, msort = _ops("aminmax count_nonzero msort")
    diff, cov, corrcoef, renorm, renorm_, equal = _ops("diff cov corrcoef renorm renorm_ equal")
    bincount, histc, histogram = _ops("bincount histc histogram")
    det, logdet, slogdet, inverse, matrix_power, matrix_exp, pinverse = _ops(
        "det logdet slogdet inverse matrix_power matrix_exp pinverse")
    cholesky, cholesky_solve, cholesky_inverse, triangular_solve, lu, lu_solve = _ops(
        "cholesky cholesky_solve cholesky_inverse triangular_solve lu lu_solve")
    svd, qr, geqrf, ormqr, cross = _ops("svd qr geqrf ormqr cross")
    addmm, baddbmm, addbmm, addmv, addr, addcmul, addcdiv = _ops(
        "addmm baddbmm addbmm addmv addr addcmul addcdiv")
    dot, vdot, inner, outer, ger, mv, kron, trace, dist = _ops(
        "dot vdot inner outer ger mv kron trace dist")

    reshape, flatten, unflatten, squeeze, unsqueeze = _ops(
        "reshape flatten unflatten squeeze unsqueeze")
    permute, transpose, t, movedim, expand, broadcast_to, contiguous = _ops(
        "permute transpose t movedim expand broadcast_to contiguous")
    repeat, tile, repeat_interleave, split, chunk, unbind = _ops(
        "repeat tile repeat_interleave split chunk unbind")
    flip, roll, tril, triu, narrow, select = _ops("flip roll tril triu narrow select")

    __getitem__, __setitem__ = _ops("getitem setitem")
    gather, scatter_add, masked_fill, index_select = _ops("gather scatter_add masked_fill index_select")
    scatter, scatter_reduce, masked_select, nonzero = _ops("scatter scatter_reduce masked_select nonzero")
    diag, diagonal, diag_embed, unfold, isclose, allclose = _ops(
        "diag diagonal diag_embed unfold isclose allclose")
    tensor_split, hsplit, vsplit, dsplit, split_with_sizes, ravel, fliplr, flipud, rot90 = _ops(
        "tensor_split hsplit vsplit dsplit split_with_sizes ravel fliplr flipud rot90")
    diagflat, sum_to_size = _ops("diagflat sum_to_size")
    bernoulli, normal_, uniform_, bernoulli_, exponential_, geometric_, cauchy_, log_normal_ = _ops(
        "bernoulli normal_ uniform_ bernoulli_ exponential_ geometric_ cauchy_ log_normal_")
    add_, sub_, mul_, div_, zero_, fill_, copy_, clamp_, masked_fill_ = _ops(
        "add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ masked_fill_")
    index_add, index_copy, index_fill, index_reduce, index_put, take, put, take_along_dim = _ops(
        "index_add index_copy index_fill index_reduce index_put take put take_along_dim")
    masked_scatter, select_scatter, slice_scatter, diagonal_scatter = _ops(
        "masked_scatter select_scatter slice_scatter diagonal_scatter")
    as_strided, as_strided_scatter, argwhere, unique, unique_consecutive = _ops(
        "as_strided as_strided_scatter argwhere unique unique_consecutive")
    index_add_, index_copy_, index_fill_, index_reduce_, index_put_, put_, masked_scatter_ = _ops(
        "index_add_ index_copy_ index_fill_ index_reduce_ index_put_ put_ masked_scatter_")
    scatter_, scatter_add_, scatter_reduce_ = _ops("scatter_ scatter_add_ scatter_reduce_")
    conj, conj_physical, resolve_conj, resolve_neg, angle, sgn, is_conj, is_neg = _ops(
        "conj conj_physical resolve_conj resolve_neg angle sgn is_conj is_neg")
    vdot, isreal = _ops("vdot isreal")
    real = property(lambda self: ops.real(self))   # properties in torch, views of complex tensors
    imag = property(lambda self: ops.imag(self))

    # ------------------------------------------------------------------ reflected and derived forms
    __radd__, __rmul__, __rtruediv__, __rpow__, __rmatmul__, __rmod__ = _reflected(
        "add mul div pow matmul remainder")
    __rand__, __ror__, __rxor__ = _reflected("bitwise_and bitwise_or bitwise_xor")
    __rlshift__, __rrshift__ = _reflected("bitwise_left_shift bitwise_right_shift")

    def __rsub__(self, other):
        if not isinstance(self, Tensor):   # Tensor.__rsub__(2, x), called unbound: not
            return NotImplemented                 # an operator call; torch answers the same
        return ops.sub(other, self)

    def __floordiv__(self, other):
        return ops.div(self, other, rounding_mode="floor")

    def __rfloordiv__(self, other):
        return ops.div(other, self, rounding_mode="floor")

    def where(self, condition, other):
        return ops.where(condition, self, other)

    def expand_as(self, other):
        return ops.expand(self, *other.shape)

    def view(self, *shape):  # view(shape) never copies (ops.view); view(dtype) reinterprets the bits
        if len(shape) == 1 and isinstance(shape[0], (DType, str, type, np.dtype)):
            return ops.view_dtype(self, shape[0])
        return ops.view(self, *shape)

    def view_as(self, other):
        return ops.view(self, other.shape)

    def pin_memory(self, device=None):
        """Accepted for torch code (`x.pin_memory().to(device, non_blocking=True)`): copies
        to the GPU are synchronous here, so there is nothing to pin; returns self."""
        return self

    def is_pinned(self, device=None):
        return False

    def __format__(self, spec):
        # torch's: a 0-d tensor formats as its number (f"{loss:.4f}"); any other tensor
        # only with an empty spec (its str), else object.__format__'s TypeError
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def reshape_as(self, other):
        return ops.reshape(self, other.shape)

    # ------------------------------------------------------------------ conversions
    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False, memory_format=None):
        """`.to(device)`, `.to(dtype)`, `.to(device, dtype)` or `.to(other_tensor)`, each
        optionally followed by torch's positional `non_blocking, copy` (copies are
        synchronous here), and memory_format= (ops/memory_format.py)."""
        if len(args) == 1 and dtype is None and device is None and not copy and memory_format is None:
            # the usual call, .to(its own device) or .to(its own dtype) (clip_grad_norm_ makes
            # 4 per parameter): self, as the general path below finds, in 0.2 us instead of 1
            a = args[0]
            if a is self._device or (a.__class__ is DType and a is self.dtype):
                return self
        flags = []
        for a in args:
            if isinstance(a, bool):
                flags.append(a)
            elif flags:
                raise TypeError(f"to: a positional {type(a).__name__} after the bool flags "
                                "(non_blocking, copy)")
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (DType, np.dtype, type)) or (
                    isinstance(a, str) and not a.startswith(("cpu", "cuda"))):
                dtype = a
            else:
                device = a
        if len(flags) > 2:
            raise TypeError(f"to: at most two positional bools (non_blocking, copy), got {len(flags)}")
        if len(flags) == 2:
            copy = flags[1]
        out = self
        if device is not None:
            dev = get_device(device)
            if dev is not self._device:
                out = ops.to_device(out, dev)
        if dtype is not None:
            dt = from_any(dtype)
            if dt is not out.dtype:
                out = ops.cast(out, dt)
        if memory_format is not None:
            out = ops.apply_memory_format(out, memory_format, "to")
        if copy and out is self:
            out = self.clone()
        return out

    def clone(self, *, memory_format=None):
        return ops.clone(self, memory_format=memory_format)

    # ------------------------------------------------------------------ new tensors like this one
    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return ops.zeros(*size, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return ops.ones(*size, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return ops.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return ops.empty(*size, dtype=dtype or self.dtype, device=device or self.device,
                     requires_grad=requires_grad)

    def new_empty_strided(self, size, stride, dtype=None, device=None, requires_grad=False):
        return ops.empty_strided(size, stride, dtype=dtype or self.dtype,
                             device=device or self.device, requires_grad=requires_grad)

    def resize_(self, *size):
        return ops.resize_(self, *size)

    def resize_as_(self, other):
        return ops.resize_as_(self, other)

    @property
    def mH(self):   # conj() is the tensor itself for real dtypes
        return ops.conj(ops.transpose(self, -2, -1))

    @property
    def H(self):
        if self.ndim not in (0, 2):
            raise RuntimeError(f"H: tensor.H is only supported on matrices (2-d tensors), got "
                               f"shape {tuple(self.shape)}; use .mH for batches of matrices")
        return ops.conj(ops.t(self))

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return ops.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)


def attach():
    """Put every method and operator above on core's TensorMethods, the mixin Tensor
    inherits (what Tensor defines itself still comes first). Called once, by
    ops/__init__.py after its last op loaded."""
    skip = {"__module__", "__qualname__", "__doc__", "__slots__", "__dict__", "__weakref__"}
    for name, value in vars(TensorMethods).items():
        if name not in skip:
            setattr(_core.TensorMethods, name, value)
