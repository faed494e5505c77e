"""nn.SyncBatchNorm: batch norm whose statistics are those of the whole batch spread over
the ranks of a tinytensor.distributed process group, as torch.nn.SyncBatchNorm.

In training each rank sums its part of the batch, the sums (and counts) are added over the
ranks with `all_reduce_sum` (an op on the tape, so backward adds the gradients of the
statistics over the ranks too), then the variance about that global mean likewise: two
ranks on half batches compute what one process computes on the whole batch. Outside a
process group, with one rank, or in eval mode it is BatchNorm.
"""
import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor.distributed.differentiable import all_reduce_sum
from tinytensor.ops.normalization import _affine, _channel_shape, _update_running

from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm(num_features, eps, momentum, affine, track_running_stats,
    process_group): the default (only) group of tinytensor.distributed is used."""
    _ndims = (2, 3, 4, 5)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        if process_group is not None:
            raise ValueError("SyncBatchNorm: process_group must be None: tinytensor.distributed "
                             "has one group, the one init_process_group made")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, x):
        self._check_input_dim(x)
        if x.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected {self.num_features} channels at dim 1, got "
                             f"input of shape {tuple(x.shape)}")
        synced = self.training and dist.is_initialized() and dist.get_world_size() > 1
        if not synced:
            return super().forward(x)
        factor = self._factor() if self.track_running_stats else 0.0
        c, shape = x.shape[1], _channel_shape(x)
        dims = (0,) + tuple(range(2, x.ndim))
        local = x.numel() // c
        if local == 0:
            raise ValueError(f"SyncBatchNorm: rank {dist.get_rank()} has an empty batch (input of "
                             f"shape {tuple(x.shape)}); every rank needs at least one sample")
        # [sum per channel..., count]: one collective for both (ranks may hold unequal parts)
        counted = all_reduce_sum(tt.cat([x.sum(dim=dims), tt.full((1,), float(local), dtype=x.dtype,
                                                                  device=x.device)]), "SyncBatchNorm")
        n = counted[c:]
        mean = (counted[:c] / n).reshape(shape)
        xc = x - mean
        var = (all_reduce_sum((xc * xc).sum(dim=dims), "SyncBatchNorm") / n).reshape(shape)
        # n: the count over all ranks, a tensor (the unbiased variance's n / (n - 1) in ops)
        _update_running("SyncBatchNorm", self.running_mean, mean, n, factor, False, "running_mean")
        _update_running("SyncBatchNorm", self.running_var, var, n, factor, True, "running_var")
        return _affine(xc * tt.rsqrt(var + self.eps), self.weight, self.bias, shape)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm1d/2d/3d replaced by a SyncBatchNorm holding the same
        parameters and buffers (torch's helper of the same name)."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, bias=module.bias is not None)
            for store in ("_parameters", "_buffers"):
                getattr(out, store).update(getattr(module, store))
            out.training = module.training
            return out
        for name, child in list(module._modules.items()):
            new = cls.convert_sync_batchnorm(child, process_group)
            if new is not child:
                setattr(module, name, new)
        return module
