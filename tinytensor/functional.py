"""`tinytensor.functional` (imported as F): the functions of torch.nn.functional."""
from .ops.attention import scaled_dot_product_attention
from .ops.elementwise import (gelu, leaky_relu, relu, sigmoid, silu, softplus, softsign, tanh)
from .ops.indexing import embedding as _embedding
from .ops.losses import (binary_cross_entropy_with_logits, cross_entropy, mse_loss, nll_loss,
                         one_hot)
from .ops.movement import pad
from .ops.nn import dropout, layer_norm, linear, log_softmax, rms_norm, softmax


def embedding(input, weight, padding_idx=None):
    """torch.nn.functional.embedding(input, weight): rows of weight for integer ids."""
    return _embedding(input, weight, padding_idx)


__all__ = ["scaled_dot_product_attention", "gelu", "leaky_relu", "relu", "sigmoid", "silu",
           "softplus", "softsign", "tanh", "embedding", "binary_cross_entropy_with_logits", "cross_entropy",
           "mse_loss", "nll_loss", "one_hot", "pad", "dropout", "layer_norm", "linear",
           "log_softmax", "rms_norm", "softmax"]
