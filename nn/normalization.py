"""BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, GroupNorm, LocalResponseNorm: torch.nn's
normalization layers, with torch's constructor arguments, defaults, parameter and buffer
names (weight, bias, running_mean, running_var, num_batches_tracked), so a torch
checkpoint (a torchvision ResNet's) loads as it is.

Training updates the running statistics in place (F.batch_norm); momentum=None averages
them over every batch seen (factor 1 / num_batches_tracked), as torch does. The factor is
computed in ops from the num_batches_tracked buffer, so tt.compile replays it.
"""
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.ops.buffers import read as _read_buffer, write as _write_buffer

from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "GroupNorm", "LocalResponseNorm"]


def _affine(module, affine, bias, size, device, dtype):
    """The per-channel weight (ones) and bias (zeros; None without `bias`) of a norm layer,
    or both None without `affine`; weight registered first, as torch's."""
    if affine:
        module.weight = Parameter(tt.ones(size, device=device, dtype=dtype))
        if bias:
            module.bias = Parameter(tt.zeros(size, device=device, dtype=dtype))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


class _NormBase(Module):
    """What batch and instance norm share: the affine parameters and the running statistics."""
    # checkpoints saved before torch 0.4.1 (torchvision's first ResNet weights among them)
    # have no num_batches_tracked: torch loads them and keeps the module's count, as here
    _state_optional = ("num_batches_tracked",)

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, device, dtype, bias):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine(self, affine, bias, num_features, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", tt.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", tt.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tt.zeros((), device=device, dtype=tt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with tt.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            with tt.no_grad():
                self.weight.fill_(1.0)
                if self.bias is not None:
                    self.bias.zero_()

    def _check_input_dim(self, x):
        if x.ndim not in self._ndims:
            want = " or ".join(f"{d}D" for d in self._ndims)
            raise ValueError(f"{type(self).__name__}: expected {want} input, got input of shape "
                             f"{tuple(x.shape)}")

    def _factor(self):
        """The running-average factor of this training call; counts the batch first."""
        nbt = self.num_batches_tracked
        if nbt is None:
            return 0.0 if self.momentum is None else self.momentum
        with tt.no_grad():
            src = _read_buffer(type(self).__name__, nbt, "num_batches_tracked", update=True)
            new = src + 1
            _write_buffer(type(self).__name__, nbt, new, src)
        if self.momentum is not None:
            return self.momentum
        return 1.0 / new.to(tt.float64)   # cumulative average: 1/n, as a tensor (not a frozen number)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias)

    def forward(self, x):
        self._check_input_dim(x)
        use_batch = self.training or self.running_mean is None
        factor = self._factor() if self.training and self.track_running_stats else 0.0
        # in training (or without running stats) the batch's statistics; the running ones
        # are updated only when training (eval without them: batch statistics, none kept)
        update = self.training
        return F.batch_norm(x, self.running_mean if update or not use_batch else None,
                            self.running_var if update or not use_batch else None,
                            self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input."""
    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input."""
    _ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) input."""
    _ndims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias)

    def forward(self, x):
        if x.ndim not in self._ndims:
            self._check_input_dim(x)
        unbatched = x.ndim == self._ndims[0]
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}: expected input's size at dim=1 to match "
                             f"num_features ({self.num_features}), got input of shape "
                             f"{tuple(x.shape)}")
        use_input_stats = self.training or not self.track_running_stats
        # torch: the momentum itself (0.0 for None), num_batches_tracked never counted
        factor = self.momentum if self.momentum is not None else 0.0
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_input_stats, factor, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or unbatched (C, L) input."""
    _ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) or unbatched (C, H, W) input."""
    _ndims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or unbatched (C, D, H, W) input."""
    _ndims = (4, 5)


class GroupNorm(Module):
    """torch.nn.GroupNorm(num_groups, num_channels, eps, affine): per-channel weight and bias."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine(self, affine, bias, num_channels, device, dtype)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """torch.nn.LocalResponseNorm(size, alpha, beta, k): across channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
