"""`tinytensor.autograd`, like `torch.autograd`: the autograd API in one place (its code
lives in tinytensor/core/)."""
from .core.engine import grad, run_backward  # noqa: F401
from .core.function import Function  # noqa: F401
from .core.grad_mode import (STATE, AnomalyError, check_anomaly, current_module_path,  # noqa: F401
                             detect_anomaly, enable_grad, enter_scope, exit_scope, inference_mode,
                             is_grad_enabled, module_scope, no_grad, set_grad_enabled)
from .core.node import Node, Tape, record  # noqa: F401
from .messages import plain  # noqa: F401  (nn/ imports it from here)
