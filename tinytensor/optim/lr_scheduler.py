"""tt.optim.lr_scheduler as torch.optim.lr_scheduler: schedules that set each group's lr.

Each scheduler sets `group["lr"]` when made (epoch 0) and at every `step()` (call it after
`optimizer.step()`, as in torch). The rates are torch's closed forms (the values torch's
`_get_closed_form_lr` gives); torch's `step()` updates some of them recursively, so the two
agree to float64 rounding (a few ulps), not bit for bit. `state_dict()` holds plain numbers,
so a schedule resumes from a checkpoint.
"""
import math

from tinytensor.nn.schedules import LambdaLR as _LambdaLR, _SetsLR

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "LinearLR", "ConstantLR"]


class LRScheduler(_SetsLR):
    """Base: `lr_at(base_lr, epoch)` is the schedule; the rest is bookkeeping."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        groups = optimizer.param_groups
        if last_epoch == -1:
            for g in groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            missing = [i for i, g in enumerate(groups) if "initial_lr" not in g]
            if missing:
                raise KeyError(f"{type(self).__name__}: param 'initial_lr' is not specified in "
                               f"param_groups[{missing[0]}] when resuming an optimizer")
        self.base_lrs = [g["initial_lr"] for g in groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, base_lr, epoch):
        raise NotImplementedError

    def get_lr(self):
        return [self.lr_at(base, self.last_epoch) for base in self.base_lrs]

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        self._apply()

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


LambdaLR = _LambdaLR  # lr = initial lr * lr_lambda(epoch) (nn/schedules.py)


class StepLR(LRScheduler):
    """lr = base * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = int(step_size), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base * gamma ** (how many milestones epoch has passed)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(int(m) for m in milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** sum(1 for m in self.milestones if m <= epoch)


class ExponentialLR(LRScheduler):
    """lr = base * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** epoch


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
    """lr = base * factor, the factor going linearly from start_factor to end_factor over
    total_iters epochs, then staying at end_factor."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        t = min(self.total_iters, epoch)
        return base * (self.start_factor
                       + (self.end_factor - self.start_factor) * t / self.total_iters)


class ConstantLR(LRScheduler):
    """lr = base * factor until total_iters epochs, then base."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("ConstantLR: factor must be in [0, 1]")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * (self.factor if epoch < self.total_iters else 1.0)
