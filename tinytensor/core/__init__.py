"""The core: Tensor, Function, the tape (Node, Tape, record), the engine (backward, grad,
hooks, anomaly) and grad modes. It imports no op: Tensor methods reach `tinytensor.ops`
through a namespace bound on first use (core/methods.py). Its only ops are the ones the
engine needs itself (core/primitives.py: sum_to, expand, cast)."""
from .engine import grad, run_backward
from .function import Function
from .grad_mode import (STATE, AnomalyError, current_module_path, detect_anomaly, enable_grad,
                        inference_mode, is_grad_enabled, module_scope, no_grad, set_grad_enabled)
from .node import Node, Tape, record
from .tensor import Tensor
