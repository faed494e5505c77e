"""Learning-rate schedules: multiplier functions of the step, and LambdaLR to apply them.

Each factory returns `f(step) -> factor`; `LambdaLR(optimizer, f)` sets every group's lr
to base_lr * f(step), where `step` counts the scheduler.step() calls so far (0 before the
first optimizer step), exactly like torch.optim.lr_scheduler.LambdaLR, so a factory can
also be handed to torch's LambdaLR and gives the same numbers.

    opt = AdamW(model.parameters(), lr=3e-4)
    sched = LambdaLR(opt, cosine_with_warmup(warmup_steps=100, total_steps=10_000, min_ratio=0.1))
    for batch in data:
        loss = ...; loss.backward(); opt.step(); opt.zero_grad(); sched.step()

Warmups follow the HuggingFace `get_*_schedule_with_warmup` convention: the factor is
step / warmup_steps during warmup (so the first update, at step 0, has lr 0).
"""
import math

__all__ = ["LambdaLR", "transformer_schedule", "cosine_with_warmup", "linear_with_warmup",
           "constant_with_warmup"]


def transformer_schedule(d_model, warmup_steps=4000):
    """'Attention Is All You Need' (eq. 3): d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)
    with n = step + 1, the paper's 1-based step number. Use it with base lr 1.0 (the
    factor is the learning rate itself) or a scale of it."""
    if warmup_steps <= 0:
        raise ValueError(f"transformer_schedule: warmup_steps must be positive, got {warmup_steps}")
    scale = d_model ** -0.5
    w = warmup_steps ** -1.5

    def factor(step):
        n = step + 1
        return scale * min(n ** -0.5, n * w)
    return factor


def _warmup(step, warmup_steps):
    return step / max(1, warmup_steps)


def cosine_with_warmup(warmup_steps, total_steps, min_ratio=0.0):
    """Linear warmup from 0 to 1 over `warmup_steps`, then half a cosine from 1 down to
    `min_ratio` at `total_steps` (and min_ratio after that)."""
    _check(warmup_steps, total_steps, min_ratio, "cosine_with_warmup")

    def factor(step):
        if step < warmup_steps:
            return _warmup(step, warmup_steps)
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return factor


def linear_with_warmup(warmup_steps, total_steps, min_ratio=0.0):
    """Linear warmup from 0 to 1, then linear decay to `min_ratio` at `total_steps`."""
    _check(warmup_steps, total_steps, min_ratio, "linear_with_warmup")

    def factor(step):
        if step < warmup_steps:
            return _warmup(step, warmup_steps)
        remaining = max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * remaining
    return factor


def constant_with_warmup(warmup_steps):
    """Linear warmup from 0 to 1, then 1."""
    if warmup_steps < 0:
        raise ValueError(f"constant_with_warmup: warmup_steps must be >= 0, got {warmup_steps}")

    def factor(step):
        return _warmup(step, warmup_steps) if step < warmup_steps else 1.0
    return factor


def _check(warmup_steps, total_steps, min_ratio, name):
    if warmup_steps < 0 or total_steps < warmup_steps:
        raise ValueError(f"{name}: need 0 <= warmup_steps <= total_steps, got warmup_steps="
                         f"{warmup_steps}, total_steps={total_steps}")
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"{name}: min_ratio must be in [0, 1], got {min_ratio}")


class _SetsLR:
    """What every scheduler does after finding its rates (here and in tt.optim.lr_scheduler):
    write get_lr() into the groups and keep them for get_last_lr()."""

    def _apply(self):
        lrs = self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        self._last_lr = lrs

    def get_last_lr(self):
        """The learning rates the next optimizer.step() will use, one per group."""
        return list(self._last_lr)


class LambdaLR(_SetsLR):
    """Sets each group's lr to its initial lr times lr_lambda(step) (one function, or one
    per group). Creating it applies step 0; call step() after each optimizer.step()."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        groups = optimizer.param_groups
        if last_epoch == -1:
            for g in groups:
                g["initial_lr"] = g["lr"]
        else:
            missing = [i for i, g in enumerate(groups) if "initial_lr" not in g]
            if missing:
                raise KeyError(f"LambdaLR: resuming at last_epoch={last_epoch} needs 'initial_lr' "
                               f"in every parameter group, missing in group(s) {missing}")
        if callable(lr_lambda):
            self.lr_lambdas = [lr_lambda] * len(groups)
        else:
            self.lr_lambdas = list(lr_lambda)
            if len(self.lr_lambdas) != len(groups):
                raise ValueError(f"LambdaLR: {len(groups)} parameter groups but "
                                 f"{len(self.lr_lambdas)} lr_lambdas")
        self.base_lrs = [g["initial_lr"] for g in groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def step(self):
        self.last_epoch += 1
        self._apply()

    def state_dict(self):
        """Plain numbers only (the lambdas are code, rebuilt by whoever builds the scheduler)."""
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs),
                "_last_lr": list(self._last_lr)}

    def load_state_dict(self, state_dict):
        self.last_epoch = int(state_dict["last_epoch"])
        self.base_lrs = list(state_dict["base_lrs"])
        self._last_lr = list(state_dict.get("_last_lr", self.get_lr()))
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr
