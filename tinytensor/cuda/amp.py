"""tt.cuda.amp as torch.cuda.amp: torch's older names for tt.amp with device "cuda"."""
from ..amp import autocast as _autocast
from ..grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler", "autocast"]


class GradScaler(_GradScaler):
    """torch.cuda.amp.GradScaler: tt.amp.GradScaler("cuda", ...). On a machine without
    CUDA it disables itself with torch's warning (its steps are then plain steps)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def autocast(enabled=True, dtype=None, cache_enabled=True):
    """torch.cuda.amp.autocast: tt.autocast("cuda", ...); float16 by default, as torch's."""
    from ..dtypes import float16
    return _autocast("cuda", dtype=float16 if dtype is None else dtype, enabled=enabled,
                     cache_enabled=cache_enabled)
