"""tinytensor: a from-scratch tensor library with tape-based reverse-mode autodiff on
NumPy (cpu) and CuPy (cuda)."""
import os as _os

from . import heap as _heap
_heap.tune()   # keep an eager step's arrays in the heap, not fresh pages per op (heap.py)
from . import dtypes
from .dtypes import (bool_ as bool, float16, float32, float64, int32, int64, get_default_dtype,
                     set_default_dtype, result_type)
from .dtypes import float16 as half, float32 as float, float64 as double, int64 as long
from .dtypes import uint8, int8, int16, uint16, uint32, uint64, int16 as short
from .dtypes import bfloat16
from .dtypes import complex64, complex128, complex64 as cfloat, complex128 as cdouble
from .device import Device, Device as device, cuda_is_available, cupy_module
from .core import (Tensor, Function, grad, no_grad, inference_mode, enable_grad, set_grad_enabled,
                   is_grad_enabled, detect_anomaly, record, module_scope, Tape, Node, AnomalyError)
from .messages import OpError
from . import autograd
from .random import manual_seed
from .interop import from_dlpack
from .creation_more import (tril_indices, triu_indices, logspace, scalar_tensor, empty_strided,
                            empty_permuted)
from .creation import (tensor, as_tensor, from_numpy, zeros, ones, empty, full, arange, linspace,
                       eye, rand, randn, randint, zeros_like, ones_like, empty_like, full_like,
                       rand_like, randn_like, randint_like, multinomial)
from .ops.elementwise import (add, sub, mul, div, neg, pow, exp, log, log1p, sqrt, rsqrt, sign,
                              sin, cos, tanh, sigmoid, relu, leaky_relu, gelu, silu, softplus, erf,
                              maximum, minimum, clamp, where, eq, ne, lt, le, gt, ge, logical_and,
                              logical_or, logical_not, logical_xor, isfinite, isnan, isinf,
                              square, reciprocal, remainder, absolute, absolute as abs)
from .ops.elementwise import clamp as clip
from .ops.reduce import (sum, mean, prod, max, min, amax, amin, argmax, argmin, var, std,
                         logsumexp, norm, all, any, cumsum)
from .ops.movement import (reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose,
                           movedim, expand, broadcast_to, broadcast_tensors, broadcast_shapes,
                           repeat_interleave, cat, concat, concatenate, stack, split, chunk,
                           unbind, flip, roll, tril, triu, tile)
from .ops.indexing import gather, scatter_add, masked_fill, index_select, embedding
from .ops.linalg import matmul, einsum, mm, bmm
from .ops.sorting import sort, argsort, topk
from .ops.elementwise import floor, ceil, trunc, round_half_even as round
from .ops.movement import t, narrow, select
from .ops.softmax import softmax, log_softmax
from .ops.math_functions import (tan, asin, acos, atan, atan2, sinh, cosh, asinh, acosh, atanh,
                                 log2, log10, exp2, expm1, copysign, fmod, lerp, logaddexp, hypot,
                                 arcsin, arccos, arctan, arctan2, arcsinh, arccosh, arctanh)
from .ops.cumulative import cumprod, cummax, cummin, logcumsumexp
from .ops.activations import selu, celu
from .ops.scatter import scatter, scatter_reduce, masked_select, nonzero
from .ops.diagonal import diag, diagonal, diag_embed
from .ops.index_ops import (index_add, index_copy, index_fill, index_reduce, index_put, take, put,
                            take_along_dim, masked_scatter, select_scatter, slice_scatter,
                            diagonal_scatter, as_strided, as_strided_scatter, fill)
from .ops.memory_format import contiguous_format, preserve_format, channels_last, channels_last_3d
from .ops.search_ops import (searchsorted, bucketize, unravel_index, argwhere, unique,
                             unique_consecutive)
from .ops.torch_aliases import unsafe_chunk, unsafe_split, as_strided_copy, nonzero_static
from .ops.spatial import grid_sampler_2d, grid_sampler_3d  # issue 24
from .ops.elementwise import clone
from .ops.inplace import zero_
from .ops.shape_ops import meshgrid
from .ops.stats import isclose, allclose, var_mean, std_mean
from .ops.stacking import (atleast_1d, atleast_2d, atleast_3d, hstack, vstack, row_stack, dstack,
                           column_stack, tensor_split, hsplit, vsplit, dsplit, split_with_sizes,
                           ravel, fliplr, flipud, rot90, cartesian_prod, combinations, diagflat,
                           constant_pad_nd, alias_copy, diagonal_copy, expand_copy, narrow_copy,
                           permute_copy, squeeze_copy, t_copy, transpose_copy, unbind_copy,
                           unfold_copy, unsqueeze_copy, view_copy, split_with_sizes_copy)
from .ops.resize import resize_as_
from .ops.distributions import normal, bernoulli
from .ops.order_stats import (nansum, nanmean, median, nanmedian, kthvalue, mode, quantile,
                              nanquantile, aminmax, count_nonzero, msort)
from .ops.series_stats import (diff, gradient, trapezoid, trapz, cumulative_trapezoid, cov,
                               corrcoef, renorm, equal)
from .ops.histograms import bincount, histc, histogram, histogramdd
from .ops.products import (addmm, baddbmm, addbmm, addmv, addr, addcmul, addcdiv, dot, vdot, inner,
                           outer, ger, mv, kron, tensordot, trace, block_diag, cdist, dist)
from .ops.elementwise import (bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift,
                              bitwise_right_shift, rsub)
from . import masked
from . import linalg
from .ops.linalg_solve import (det, slogdet, logdet, inverse, cholesky_top as cholesky,
                               cholesky_solve, cholesky_inverse, triangular_solve, matrix_power)
from .ops.linalg_decomp import (pinverse, svd_top as svd, qr_top as qr, geqrf, ormqr, svd_lowrank,
                                pca_lowrank)
from .ops.linalg_misc import matrix_exp, cross_top as cross
from .ops.linalg_lu import lu_top as lu, lu_solve_top as lu_solve, lu_unpack
from .ops.complex import (complex, polar, view_as_real, view_as_complex, real, imag, angle, conj,
                          conj_physical, resolve_conj, resolve_neg, sgn, is_conj, is_neg, isreal)
from . import fft
from .spectral import stft, istft
from . import linalg_eig  # noqa: F401  (attaches eig, eigvals to tt.linalg)
from . import signal  # tt.signal.windows
from . import special  # tt.special
from .ops.special_functions import (erfc, erfinv, lgamma, digamma, polygamma, mvlgamma, i0,
                                    igamma, igammac, xlogy, logit, sinc)
from .ops.elementwise_more import (fmax, fmin, frac, frexp, ldexp, gcd, lcm, heaviside, nextafter,
                                   signbit, isneginf, isposinf, isin, nan_to_num,
                                   clamp_min, clamp_max, deg2rad, rad2deg, true_divide,
                                   floor_divide, positive, float_power, logaddexp2, hash_tensor)
from . import amp
from .amp import autocast, is_autocast_enabled, get_autocast_dtype
from . import grad_scaler as _grad_scaler  # noqa: F401  (gives tt.amp its GradScaler)
from .torch_names import (is_tensor, numel, initial_seed, dtype, finfo, iinfo,
                          set_float32_matmul_precision, get_float32_matmul_precision)
from . import functional
from . import testing
from . import viz
from . import func  # tt.func: grad, jvp, vjp, jacrev, jacfwd, hessian, functional_call (issue 27)
from .compiler import compile  # noqa: A001  (also binds tt.compiler, the subpackage)


def is_complex(x):
    return x.is_complex()


def cuda_device_count():
    return cupy_module().cuda.runtime.getDeviceCount() if cuda_is_available() else 0


# nn/, models/ and tools/ install as tinytensor.nn, .models, .tools, and optim/ (torch.optim's
# names over nn's optimizers) is tinytensor.optim; they
# import tinytensor themselves, so they load on first use: `tt.nn.Linear` as `torch.nn.Linear`
_SUBPACKAGES = ("nn", "models", "tools", "optim", "cuda", "backends", "utils")
# torch's top-level names that live above the engine: (module, name), imported on first use
_LAZY = {"save": ("tinytensor.nn.serialization", "save"),
         "load": ("tinytensor.nn.serialization", "load")}
# In a source checkout they sit beside this package: search the checkout's root too, so that
# `tinytensor.nn` is always the nn/ next to the tinytensor/ that was imported (an editable
# install maps it to the one checkout it was installed from, not a worktree or a copy).
_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (_os.path.isfile(_os.path.join(_ROOT, "pyproject.toml"))
        and _os.path.isfile(_os.path.join(_ROOT, "nn", "__init__.py"))):
    __path__.append(_ROOT)


def __getattr__(name):
    if name in _SUBPACKAGES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tinytensor' has no attribute '{name}'")


__version__ = "0.1.0"
