"""Folding an eval-mode BatchNorm into the convolution or linear layer before it (torch's
nn.utils.fuse_*): y = gamma * (W x + b - mean) / sqrt(var + eps) + beta is one layer with
W' = W * s and b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps) per channel.

The *_eval forms take any batch-norm module with torch's attribute names (running_mean,
running_var, eps, weight, bias, training)."""
import copy

import tinytensor as tt

from ..module import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _bn_scale_shift(bias, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    scale = tt.rsqrt(bn_rv + bn_eps)
    if bn_w is not None:
        scale = scale * bn_w
    b = tt.zeros_like(bn_rm) if bias is None else bias
    shift = (b - bn_rm) * scale
    return scale, (shift if bn_b is None else shift + bn_b)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(fused weight, fused bias) as Parameters; `transpose` for a ConvTranspose weight,
    whose output channels are its dim 1."""
    scale, bias = _bn_scale_shift(conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    shape = [1, -1] if transpose else [-1, 1]
    weight = conv_w * scale.reshape(shape + [1] * (conv_w.ndim - 2))
    b_dtype = conv_w.dtype if conv_b is None else conv_b.dtype
    return (Parameter(weight.to(conv_w.dtype).detach(), requires_grad=conv_w.requires_grad),
            Parameter(bias.to(b_dtype).detach(),
                      requires_grad=conv_b is not None and conv_b.requires_grad))


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    scale, bias = _bn_scale_shift(linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    if scale.shape[0] == 1 and linear_w.shape[0] != 1:  # one BatchNorm feature for all
        scale, bias = scale.expand(linear_w.shape[0]), bias.expand(linear_w.shape[0])
    weight = linear_w * scale.reshape(-1, 1)
    return (Parameter(weight.detach(), requires_grad=linear_w.requires_grad),
            Parameter(bias.detach(), requires_grad=linear_b is not None and linear_b.requires_grad))


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` computing conv followed by `bn` (both in eval mode)."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                    bn.running_var, bn.eps, bn.weight, bn.bias,
                                                    transpose)
    return fused


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` computing linear followed by `bn` (both in eval mode)."""
    _check_eval(linear, bn)
    n = int(bn.running_mean.shape[0])
    if linear.out_features != n and n != 1:
        raise AssertionError(f"fuse_linear_bn_eval: to fuse, linear.out_features "
                             f"({linear.out_features}) must equal the BatchNorm's num_features "
                             f"({n}), or the BatchNorm have one feature")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                      bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused
