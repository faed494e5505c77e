"""The ops namespace: every op, grouped by family in the modules below. Each op is a
`Function` (forward on arrays, backward in tinytensor ops, optionally backward_arrays)
plus the thin function users call. Tensor methods (core/methods.py) call into this
namespace; the families import one another in one direction:

    elementwise -> movement -> inplace -> indexing -> reduce -> linalg, sorting
                -> nn -> softmax -> norms -> losses -> cross_entropy -> attention

softmax, norms, cross_entropy and attention each hold a reference op, its fused form
(device launch in tinytensor.kernels) and the rule that picks one. `tinytensor.ops.softmax`
and `.cross_entropy` are the functions; reach the files with `from .softmax import ...`.
"""
from .elementwise import *  # noqa: F401,F403
from .elementwise import absolute, round_half_even  # noqa: F401
from .movement import *  # noqa: F401,F403
from .inplace import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .softmax import *  # noqa: F401,F403
from .norms import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .cross_entropy import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403  (uses elementwise, movement)
from .pooling import *  # noqa: F401,F403  (uses conv, indexing, linalg)
from .math_functions import *  # noqa: F401,F403  (uses elementwise)
from .cumulative import *  # noqa: F401,F403  (uses movement, indexing, reduce)
from .activations import *  # noqa: F401,F403  (uses elementwise, inplace)
from .scatter import *  # noqa: F401,F403  (uses indexing, movement)
from .diagonal import *  # noqa: F401,F403
from .index_ops import *  # noqa: F401,F403  (uses indexing, scatter, movement)
from .search_ops import *  # noqa: F401,F403  (uses scatter, elementwise)
from .torch_aliases import *  # noqa: F401,F403  (uses index_ops, movement)
from .memory_format import *  # noqa: F401,F403
from .index_inplace import *  # noqa: F401,F403  (the in-place forms of index_ops)
from .shape_ops import *  # noqa: F401,F403  (uses conv, indexing, movement)
from .stats import *  # noqa: F401,F403  (uses reduce)
from .interpolate import *  # noqa: F401,F403  (uses movement, pooling)
from .stacking import *  # noqa: F401,F403  (uses movement, diagonal, shape_ops)
from .resize import *  # noqa: F401,F403
from .distributions import *  # noqa: F401,F403  (uses inplace, movement)
from .order_stats import *  # noqa: F401,F403  (uses reduce, sorting)
from .series_stats import *  # noqa: F401,F403  (uses reduce, linalg, cumulative)
from .histograms import *  # noqa: F401,F403
from .special_functions import *  # noqa: F401,F403  (uses elementwise, math_functions)
from .elementwise_more import *  # noqa: F401,F403  (uses elementwise, math_functions)
# torch's top-level linear algebra names, for the Tensor methods (tt.linalg has the rest)
from .linalg_solve import (det, slogdet, logdet, inverse, cholesky_top as cholesky,  # noqa: F401
                           cholesky_solve, cholesky_inverse, triangular_solve, matrix_power)
from .linalg_decomp import pinverse, svd_top as svd, qr_top as qr, geqrf, ormqr  # noqa: F401
from .linalg_misc import matrix_exp, cross_top as cross  # noqa: F401
from .linalg_lu import lu_top as lu, lu_solve_top as lu_solve  # noqa: F401
from .products import *  # noqa: F401,F403  (uses linalg, reduce, movement)
from .complex import *  # noqa: F401,F403  (uses elementwise)
from . import complex_rules  # noqa: F401  (which ops take complex tensors)
from ..creation import empty, full, multinomial, ones, tensor, zeros  # noqa: F401  (the new_* methods)
from ..creation_more import empty_strided  # noqa: F401
from . import methods as _methods

_methods.attach()   # every op above is loaded: the Tensor methods go onto core's mixin
