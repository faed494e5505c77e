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
from .elementwise import abs_, round_  # noqa: F401
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
from ..creation import full, multinomial, ones, tensor, zeros  # noqa: F401  (the new_* methods)
