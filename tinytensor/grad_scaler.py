"""GradScaler (tt.amp.GradScaler, tt.cuda.amp.GradScaler, nn.GradScaler): loss scaling for
float16 training, torch.amp.GradScaler's algorithm.

float16 gradients underflow below 6e-8; multiplying the loss by a large scale keeps them
representable, and the gradients are divided by it again before the step. A scale too large
makes some gradient inf or NaN: that step is skipped and the scale halved; after
`growth_interval` steps in a row without one it doubles. The scale lives in float32, as in
torch, so a run reproduces torch's schedule exactly (tests/nn/test_grad_scaler.py).

    scaler = nn.GradScaler("cpu")
    with tt.autocast("cpu", dtype=tt.float16):
        loss = model(x).loss
    scaler.scale(loss).backward()
    scaler.unscale_(opt)                  # optional: only to clip true gradients
    nn.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)                      # skipped when a gradient is inf or NaN
    scaler.update()
"""
import warnings

import numpy as np

from . import amp as _amp
from .core.tensor import Tensor
from .creation import tensor
from .device import cuda_is_available
from .dtypes import float16, float32

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        # `device` is accepted for torch code: the scale follows each loss to its device
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1.0, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval}")
        self.device = device
        if enabled and str(device).startswith("cuda") and not cuda_is_available():
            # torch's behaviour and words: a script written for a GPU still runs on a CPU,
            # with plain (unscaled) steps; GradScaler("cpu") scales on the CPU
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning,
                          stacklevel=2 + (type(self).__init__ is not GradScaler.__init__))
            enabled = False
        self._enabled = bool(enabled)
        self._scale = np.float32(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}   # id(optimizer) -> {"stage": ..., "found_inf": bool}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    # ------------------------------------------------------------------ the step
    def scale(self, outputs):
        """outputs times the scale: a Tensor, or a list/tuple of them (nested)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            # a float32 0-d factor, as torch's: a float16 loss of shape () comes back float32
            return outputs * tensor(self._scale, dtype=float32, device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or a list/tuple of Tensors, "
                        f"got {type(outputs).__name__}")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer):
        """Divide this optimizer's gradients by the scale, in place, and note whether any is
        inf or NaN. Call it before clipping; step() calls it when you did not."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since the "
                               "last update()")
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step() (call update() first)")
        # 1/scale rounded once to float32, as torch computes it (in double, then float)
        inv = np.float32(1.0 / np.float64(self._scale))
        found = False
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                if p.grad.dtype is float16:
                    raise ValueError(f"GradScaler.unscale_: gradient of {p.name or f'param_groups[{gi}][{pi}]'} "
                                     "is float16 (keep parameters float32 under autocast; float16 "
                                     "gradients cannot be unscaled safely)")
                g = p.grad.data
                xp = p.grad.device.xp
                found = found or not bool(xp.isfinite(g).all())
                g *= g.dtype.type(inv)
                p.grad._version[0] += 1
        state["found_inf"], state["stage"] = found, _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(...) unless a gradient is inf or NaN; returns its result, or None
        when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: a closure is not supported while the scaler is "
                               "enabled (as in torch)")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.step: already called since the last update()")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        retval = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return retval

    def update(self, new_scale=None):
        """Back off after a step with inf/NaN gradients, grow after `growth_interval` clean
        ones; or set `new_scale` outright."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = np.float32(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            seen = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not seen:
                raise RuntimeError("GradScaler.update: no inf checks were recorded: call "
                                   "scaler.step(optimizer) (or unscale_) first")
            if any(seen):
                self._scale = np.float32(self._scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = np.float32(self._scale * np.float32(self._growth_factor))
                    if np.isfinite(grown):   # never grow into inf
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self):
        """torch's keys; empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty, possibly "
                               "saved from a disabled GradScaler")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing {sorted(missing)}")
        self._scale = np.float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


# tt.amp.GradScaler, as torch.amp's: given from here (amp sits below, in core's layer, and
# names nothing above it); tinytensor/__init__.py imports this module
_amp.GradScaler = GradScaler
