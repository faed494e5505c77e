"""The ops namespace: every op, grouped by family in the modules below. Each op is a
`Function` (forward on arrays, backward in tinytensor ops, optionally backward_arrays)
plus the thin function users call. Tensor methods (core/methods.py) call into this
namespace; the families import one another in one direction:

    elementwise -> movement -> inplace -> indexing -> reduce -> linalg, sorting
                -> nn (with the fused kernels of tinytensor.kernels) -> losses, attention
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
from .losses import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from ..creation import full, multinomial, ones, tensor, zeros  # noqa: F401  (the new_* methods)
