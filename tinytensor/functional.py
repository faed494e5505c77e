"""`tinytensor.functional` (imported as F): the functions of torch.nn.functional."""
from .ops.attention import scaled_dot_product_attention
from .ops.elementwise import (gelu, leaky_relu, relu, sigmoid, silu, softplus, softsign, tanh)
from .ops.indexing import embedding as _embedding
from .ops.cross_entropy import cross_entropy
from .ops.losses import binary_cross_entropy_with_logits, mse_loss, nll_loss, one_hot
from .ops.losses import (binary_cross_entropy, cosine_similarity, huber_loss, kl_div, l1_loss,
                         normalize, smooth_l1_loss)
from .ops.movement import pad
from .ops.interpolate import interpolate
from .ops.nn import dropout, linear
from .ops.norms import layer_norm, rms_norm
from .ops.normalization import batch_norm, group_norm, instance_norm, local_response_norm
from .ops.softmax import log_softmax, softmax
from .ops.activations import (celu, elu, hardsigmoid, hardswish, hardtanh, logsigmoid, mish,
                              relu6, selu, softmin)
from .ops.conv import (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                       conv_transpose3d)
from .ops.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,
                          adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d,
                          avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d, max_unpool1d,
                          max_unpool2d, max_unpool3d)

from .ops.shape_ops import col2im as fold, im2col as unfold
# torch.nn.functional's signatures (inplace=, softmax's implicit dim) over the ops above
from .ops.functional_torch import (dropout, leaky_relu, leaky_relu_, log_softmax, relu, relu_,
                                   silu, softmax)
from .ops.mha import multi_head_attention_forward

def embedding(input, weight, padding_idx=None):
    """torch.nn.functional.embedding(input, weight): rows of weight for integer ids."""
    return _embedding(input, weight, padding_idx)


__all__ = ["scaled_dot_product_attention", "gelu", "leaky_relu", "relu", "sigmoid", "silu",
           "softplus", "softsign", "tanh", "embedding", "binary_cross_entropy_with_logits", "cross_entropy",
           "mse_loss", "nll_loss", "one_hot", "pad", "dropout", "layer_norm", "linear",
           "log_softmax", "rms_norm", "softmax"]
__all__ += ["celu", "elu", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid", "mish", "relu6",
            "selu", "softmin"]
__all__ += ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
            "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
            "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "adaptive_max_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"]
__all__ += ["binary_cross_entropy", "cosine_similarity", "huber_loss", "kl_div", "l1_loss",
            "normalize", "smooth_l1_loss"]
__all__ += ["fold", "unfold"]
__all__ += ["interpolate"]
__all__ += ["batch_norm", "group_norm", "instance_norm", "local_response_norm"]
__all__ += ["relu_", "leaky_relu_", "multi_head_attention_forward"]
