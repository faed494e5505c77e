"""Neural-network ops: dropout and linear (compositions of primitive ops).

softmax and log_softmax are in ops/softmax.py, layer_norm and rms_norm in ops/norms.py,
each beside its fused form and the rule that picks one."""
from ..amp import cast_inputs
from .random_ops import dropout_mask
from .elementwise import mul
from .linalg import matmul
from .movement import _where


# ---------------------------------------------------------------- dropout and linear
def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    return mul(x, dropout_mask(x, p))  # a recorded draw, so a compiled replay redraws it


def linear(x, weight, bias=None):
    """x @ weight.T + bias, with weight of shape (out_features, in_features)."""
    x, weight, bias = cast_inputs("linear", x, weight, bias)
    if weight.ndim not in (1, 2) or x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input shape {tuple(x.shape)} does not match weight shape "
                         f"{tuple(weight.shape)} (need a 1-d or 2-d weight whose last dimension, "
                         f"in_features, equals the input's last){_where()}")
    out_shape = tuple(weight.shape[:-1])  # (out_features,), or () for a 1-d weight
    if x.ndim > 2 and weight.ndim == 2:
        # (B, T, C) -> (B*T, C): one GEMM forward and one for the weight gradient,
        # instead of a batched product whose weight gradient is then summed over B
        lead = x.shape[:-1]
        out = matmul(x.reshape(-1, x.shape[-1]), weight.mT).reshape(*lead, weight.shape[0])
    else:
        out = matmul(x, weight.mT if weight.ndim == 2 else weight)
    if bias is not None:
        if bias.ndim > len(out_shape) or any(b not in (1, o) for b, o in
                                             zip(bias.shape[::-1], out_shape[::-1])):
            raise ValueError(f"linear: bias shape {tuple(bias.shape)} does not fit the "
                             f"{out_shape[0] if out_shape else 1} output features of weight "
                             f"{tuple(weight.shape)}{_where()}")
        out = out + bias
    return out
