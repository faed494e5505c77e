"""`tinytensor.functional` (imported as F): the functions of torch.nn.functional."""
from .ops.attention import scaled_dot_product_attention
from .ops.elementwise import gelu, sigmoid, softplus, softsign, tanh
from .ops.cross_entropy import cross_entropy
from .ops.losses import binary_cross_entropy_with_logits, mse_loss, nll_loss, one_hot
from .ops.losses import (binary_cross_entropy, cosine_similarity, huber_loss, kl_div, l1_loss,
                         normalize, smooth_l1_loss)
from .ops.movement import pad
from .ops.interpolate import interpolate
from .ops.nn import linear
from .ops.norms import layer_norm, rms_norm
from .ops.normalization import batch_norm, group_norm, instance_norm, local_response_norm
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

from .ops.embedding_bag import embedding, embedding_bag  # noqa: E402 - with max_norm and
# scale_grad_by_freq (issue 24)


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

# issue 24: the rest of torch.nn.functional (ops/activations_more.py, dropout_more.py,
# spatial.py, pooling_more.py, distances.py, embedding_bag.py, losses_more.py, ctc.py)
from .ops.activations_more import (glu, hardshrink, prelu, rrelu, softshrink, tanhshrink,
                                   threshold)
__all__ += ["glu", "hardshrink", "prelu", "rrelu", "softshrink", "tanhshrink", "threshold"]
from .ops.dropout_more import (alpha_dropout, dropout1d, dropout2d, dropout3d,
                               feature_alpha_dropout)
__all__ += ["alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout"]
from .ops.spatial import (affine_grid, channel_shuffle, grid_sample, pixel_shuffle,
                          pixel_unshuffle, upsample, upsample_bilinear, upsample_nearest)
__all__ += ["affine_grid", "channel_shuffle", "grid_sample", "pixel_shuffle", "pixel_unshuffle",
            "upsample", "upsample_bilinear", "upsample_nearest"]
from .ops.distances import bilinear, pairwise_distance, pdist
from .ops.losses_more import (cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss,
                              linear_cross_entropy, margin_ranking_loss, multi_margin_loss,
                              multilabel_margin_loss, multilabel_soft_margin_loss,
                              poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
                              triplet_margin_with_distance_loss)
__all__ += ["bilinear", "pairwise_distance", "pdist", "cosine_embedding_loss",
            "gaussian_nll_loss", "hinge_embedding_loss", "linear_cross_entropy",
            "margin_ranking_loss", "multi_margin_loss", "multilabel_margin_loss",
            "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss",
            "triplet_margin_loss", "triplet_margin_with_distance_loss"]
from .ops.pooling_more import (fractional_max_pool2d, fractional_max_pool3d, lp_pool1d,
                               lp_pool2d, lp_pool3d)
__all__ += ["fractional_max_pool2d", "fractional_max_pool3d", "lp_pool1d", "lp_pool2d",
            "lp_pool3d"]
__all__ += ["embedding_bag"]
from .ops.ctc import ctc_loss
__all__ += ["ctc_loss"]
