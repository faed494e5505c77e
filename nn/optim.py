"""Optimizers: SGD, Adam, AdamW, over parameter groups.

An optimizer step is not part of the model's computation, so it runs outside the tape:
it updates each parameter's array in place with raw array math (NumPy or CuPy, whichever
holds the parameter) and bumps the parameter's version counter, so a backward that
still needs the old value raises instead of silently using the new one.

The update formulas follow torch.optim's single-tensor implementations term by term,
so the same gradients give the same trajectory (tests check 20 steps in float64).

Inside a function compiled with tt.compile, a step is captured instead (`_captured_step`):
the same formulas in tinytensor ops, out of place, recorded with role "optimizer"; what
changes from call to call (the learning rate, the bias corrections of the step count, the
state arrays) is read by the program as inputs, and the new parameters and state are
written back into their own arrays after every replay (the compiler's
`CaptureTape.assign`). The ops round as the array math does (a Python float meets a
float32 array as a float32 in both), so a replay gives eager's numbers.

Parameter groups are dicts: `{"params": [...], "lr": ..., "weight_decay": ...}`; keys a
group leaves out take the optimizer's defaults. A common use is no weight decay for
biases and norm weights:

    opt = AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=3e-4)
"""
import copy
import functools
import math
import numbers
import os

import numpy as np

import tinytensor as tt
from tinytensor.autograd import plain
from tinytensor.core.grad_mode import STATE
from tinytensor.device import xp_of as _xp, to_device_array
from tinytensor.kernels import c_optim as _c_optim

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]

_GROUP_EXTRAS = ("params", "initial_lr", "name")  # group keys that are not hyperparameters


def _check_hyperparameter(optimizer, key, value):
    """Refuse NaN, infinite and negative values: `lr < 0` alone lets NaN through, and one NaN
    step turns every parameter into NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value >= 0):
        what = "learning rate (lr)" if key == "lr" else key
        raise ValueError(f"{optimizer}: invalid {what} {plain(value)!r}; it must be a finite "
                         "number >= 0")


def _torch_flags(name, maximize, foreach, differentiable, fused):
    """torch's implementation switches, kept in each group as torch keeps them. `foreach` and
    `fused` pick among torch's kernels for the same update; there is one implementation here
    (array math eagerly, generated kernels under tt.compile), so they are accepted and
    recorded. `maximize` ascends instead. `differentiable=True` (a step autograd can see
    through) is refused: steps here run outside the tape."""
    for key, v in (("foreach", foreach), ("fused", fused)):
        if v is not None and not isinstance(v, bool):
            raise TypeError(f"{name}: {key} must be None, True or False, got {v!r}")
    if differentiable:
        raise ValueError(f"{name}: differentiable=True is not supported (an optimizer step "
                         "runs outside autograd here)")
    return dict(maximize=bool(maximize), foreach=foreach, differentiable=False, fused=fused)


class Optimizer:
    """Holds parameter groups and per-parameter state; subclasses write `_update`."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}          # parameter -> {name: array or number}
        self.param_groups = []
        if isinstance(params, tt.Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors or "
                            "of dicts, not a single Tensor")
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group):
        """Add a group {"params": [...], <option>: value, ...}; options it leaves out take
        the optimizer's defaults. Raises if a parameter is already in a group, is not a
        floating-point leaf Tensor, or an option is unknown (a typo would be ignored)."""
        if not isinstance(group, dict):
            raise TypeError(f"{type(self).__name__}: a parameter group must be a dict, got "
                            f"{type(group).__name__}")
        group = dict(group)
        ps = group.get("params")
        if ps is None:
            raise ValueError(f"{type(self).__name__}: parameter group has no 'params'")
        ps = [ps] if isinstance(ps, tt.Tensor) else list(ps)
        for p in ps:
            if not isinstance(p, tt.Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, got "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__} can't optimize a non-leaf Tensor "
                                 f"(shape {tuple(p.shape)}); optimize the leaf it came from")
            if not p.is_floating_point():
                raise TypeError(f"{type(self).__name__} can only optimize floating-point "
                                f"Tensors, got {p.dtype.name}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in ps}) != len(ps) or any(id(p) in seen for p in ps):
            raise ValueError(f"{type(self).__name__}: a parameter appears more than once among "
                             "the parameter groups")
        group["params"] = ps
        # a typo such as "weight_decy" would otherwise be silently ignored
        unknown = [k for k in group if k not in self.defaults and k not in _GROUP_EXTRAS]
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown option(s) in a parameter group: "
                            + ", ".join(unknown))
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        for key in ("lr", "weight_decay", "eps", "momentum", "dampening"):
            if key in group:
                _check_hyperparameter(type(self).__name__, key, group[key])

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none=True):
        """Clear the gradient of every parameter, before the next backward accumulates.

        With set_to_none=True (the default, as in torch) each `.grad` becomes None: its memory
        is freed and the next backward stores its gradient instead of adding to zeros, and
        step() skips parameters that got none. With set_to_none=False each `.grad` is
        filled with zeros instead (a new array; tensors sharing the old one keep it)."""
        hooks = STATE.hooks
        for group in self.param_groups:
            for p in group["params"]:
                hooks.grad_cleared(p)  # a compiled step no longer depends on this .grad
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif hooks.capturing:  # a new tensor: the replay must not read the old .grad
                    p.grad = tt.Tensor._make(p.grad.device.xp.zeros_like(p.grad.data),
                                             p.grad.device, False)
                else:
                    # a fresh array: backward may share one gradient array between
                    # parameters, or hand out a read-only broadcast view
                    p.grad.data = p.grad.device.xp.zeros_like(p.grad.data)
                    p.grad._version[0] += 1

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure()'s loss."""
        loss = None
        if closure is not None:
            with tt.enable_grad():
                loss = closure()
        hooks = STATE.hooks
        if hooks.capturing:
            self._captured_step(hooks)
            return loss
        with tt.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad.data
                    if g.shape != p.data.shape:
                        raise RuntimeError(f"{type(self).__name__}.step: gradient of shape "
                                           f"{tuple(g.shape)} for a parameter of shape "
                                           f"{tuple(p.shape)}" + (f" ({p.name})" if p.name else ""))
                    if g.dtype != p.data.dtype:
                        g = g.astype(p.data.dtype)
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = {}
                    self._update(p.data, g, state, group)
                    p._version[0] += 1
        return loss

    def _update(self, param, grad, state, group):
        raise NotImplementedError

    # ------------------------------------------------------------------ captured (tt.compile)
    def _captured_step(self, hooks):
        """The step as ops a compiled program repeats, through the capture hooks
        (core/hooks.py): state reads are per-call inputs, new values assignments."""
        hooks.optimizer_step(self, hooks.where(skip=(os.path.dirname(__file__),)))
        reads = _Reads(self)
        hooks.each_call(reads.refresh)  # first: the others read what it looks up
        with tt.no_grad(), hooks.recording_as("optimizer"):
            for gi, group in enumerate(self.param_groups):
                for pi, p in enumerate(group["params"]):
                    if p.grad is None:
                        continue
                    g = p.grad
                    if g.shape != p.shape:
                        raise RuntimeError(f"{type(self).__name__}.step: gradient of shape "
                                           f"{tuple(g.shape)} for a parameter of shape "
                                           f"{tuple(p.shape)}" + (f" ({p.name})" if p.name else ""))
                    if g.dtype != p.dtype:
                        g = g.to(p.dtype)
                    name = p.name or f"param_groups[{gi}]['params'][{pi}]"
                    new = self._update_ops(_Captured(reads, hooks, gi, p, name), p, g, group)
                    hooks.assign(new, functools.partial(_write_param, p), target=p)

    def _update_ops(self, c, p, g, group):
        """The new value of parameter `p` as ops; state through `c` (a _Captured)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be captured by tt.compile: it "
                                  "has no _update_ops; call its step() outside the compiled "
                                  "function")

    def _state_of(self, p, group):
        """p's state, made (as the first eager step makes it) if it is empty."""
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {}
        return state

    # ------------------------------------------------------------------ state
    def state_dict(self):
        """{"state": {index: {name: Tensor or number}}, "param_groups": [{..., "params": [index]}]}.

        Parameters are named by their position across the groups. Tensors are copies:
        updates happen in place, so a snapshot sharing memory would keep changing."""
        index, groups, k = {}, [], 0
        for group in self.param_groups:
            g = {key: copy.deepcopy(v) for key, v in group.items() if key != "params"}
            g["params"] = list(range(k, k + len(group["params"])))
            for p in group["params"]:
                index[id(p)] = k
                k += 1
            groups.append(g)
        state = {}
        for p, s in self.state.items():
            state[index[id(p)]] = {key: (tt.Tensor._make(v.copy(), p.device, False)
                                         if _is_array(v) else v) for key, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state. Every mismatch (group count, group sizes,
        state shapes) is reported in one error."""
        name = type(self).__name__
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and "
                             "'param_groups' (from Optimizer.state_dict())")
        saved_groups = state_dict["param_groups"]
        problems = []
        if len(saved_groups) != len(self.param_groups):
            problems.append(f"the state has {len(saved_groups)} parameter group(s), this "
                            f"optimizer has {len(self.param_groups)}")
        params_by_index = {}
        for gi, (saved, own) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(own["params"]):
                problems.append(f"group {gi} has {len(saved['params'])} parameter(s) in the state "
                                f"but {len(own['params'])} here")
                continue
            for i, p in zip(saved["params"], own["params"]):
                params_by_index[int(i)] = p
        new_state = {}
        for i, s in state_dict["state"].items():
            p = params_by_index.get(int(i))
            if p is None:
                if not problems:
                    problems.append(f"state for parameter {i}, which no group lists")
                continue
            entry = {}
            for key, v in s.items():
                if key == "step" and (isinstance(v, (tt.Tensor, np.ndarray)) or _is_array(v)):
                    # torch keeps the step count in a 0-d float tensor; here it is a number
                    v = float(v.item())
                    v = int(v) if v.is_integer() else v
                if isinstance(v, (tt.Tensor, np.ndarray)) or _is_array(v):
                    arr = v.data if isinstance(v, tt.Tensor) else v
                    if tuple(arr.shape) != tuple(p.shape):
                        problems.append(f"state '{key}' of parameter {i} has shape "
                                        f"{tuple(arr.shape)}, the parameter {tuple(p.shape)}"
                                        + (f" ({p.name})" if p.name else ""))
                        continue
                    arr = to_device_array(arr, p.device)
                    entry[key] = arr.astype(p.data.dtype, copy=True)  # never alias the input
                else:
                    entry[key] = copy.deepcopy(v)
            new_state[p] = entry
        if problems:
            raise ValueError(f"{name}.load_state_dict: the state does not fit this optimizer: "
                             + "; ".join(problems))
        self.state = new_state
        for saved, own in zip(saved_groups, self.param_groups):
            for key, v in saved.items():
                if key != "params":
                    own[key] = copy.deepcopy(v)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            opts = ", ".join(f"{k}={v}" for k, v in g.items() if k != "params")
            n = sum(p.numel() for p in g["params"])
            lines.append(f"  group {i}: {len(g['params'])} tensors, {n:,} values, {opts}")
        return "\n".join(lines) + "\n)"


def _write_param(p, a):
    if a is not p.data:  # a compiled runner may have computed it in place already
        p.data[...] = a  # into the parameter's own array: it keeps its identity and memory
    p._version[0] += 1


class _Reads:
    """The group and state of each parameter a captured step updates, looked up once per
    call of the compiled program (`refresh`, the first of its before_call functions) for all
    the ~5 inputs per parameter that read them: load_state_dict, add_param_group or a new
    group dict may have replaced either since the last call, but nothing does during one."""

    def __init__(self, opt):
        self.opt = opt
        self.params = []    # (group index, parameter), in capture order
        self.groups = []    # this call's group dict of each
        self.states = []    # this call's state dict of each (opt._state_of: made if empty)

    def add(self, gi, p):
        """p's index into `groups` and `states`, which hold its group and state from now."""
        group = self.opt.param_groups[gi]
        self.params.append((gi, p))
        self.groups.append(group)
        self.states.append(self.opt._state_of(p, group))
        return len(self.params) - 1

    def refresh(self):
        groups, state_of = self.opt.param_groups, self.opt._state_of
        self.groups = [groups[gi] for gi, _ in self.params]
        self.states = [state_of(p, g) for (_, p), g in zip(self.params, self.groups)]


class _Captured:
    """What an optimizer's captured update reads at each call of the compiled program:
    numbers of its group options and state (`scalar`), state arrays (`state`), and how it
    writes state back (`update`), for parameter `p`, through `reads`."""

    def __init__(self, reads, hooks, gi, p, name):
        self.reads, self.hooks, self.p, self.name = reads, hooks, p, name
        self.k = reads.add(gi, p)
        self._inputs = {}   # state key -> the input tensor reading it (where update writes back)

    def group(self):
        return self.reads.groups[self.k]

    def state_dict(self):
        """p's state as it is now (load_state_dict may have replaced it since the capture)."""
        return self.reads.states[self.k]

    def scalar(self, fn, what):
        """A 0-d input of p's dtype holding fn(group, state) at each call."""
        reads, k, dtype, xp = self.reads, self.k, self.p.data.dtype, self.p.device.xp
        if xp is not np:
            return self.hooks.input(
                lambda: xp.asarray(fn(reads.groups[k], reads.states[k]), dtype=dtype),
                f"{self.name}.{what}")
        # one array refilled at each call, for a third of xp.asarray's cost: no replay hands
        # an input's array on (api._Entry copies a result or .grad that shares its memory,
        # and the writes copy into the parameter's and state's own arrays), so nothing the
        # caller holds sees the refill
        held = np.empty((), dtype)

        def read():
            held[()] = fn(reads.groups[k], reads.states[k])  # rounds as asarray(dtype) does
            return held
        return self.hooks.input(read, f"{self.name}.{what}")

    def state(self, key, zeros_if_missing=False):
        """State array `key` as an input; its new value is written back by `update`."""
        p, reads, k = self.p, self.reads, self.k

        def read():
            a = reads.states[k].get(key)
            return p.device.xp.zeros_like(p.data) if a is None and zeros_if_missing else a
        t = self._inputs[key] = self.hooks.input(read, f"{self.name}.{key}")
        return t

    def update(self, key, new):
        reads, k = self.reads, self.k

        def write(a):
            state = reads.states[k]
            if state.get(key) is None:
                state[key] = a.copy()  # never the program's own memory
            elif state[key] is not a:  # (a compiled runner may have computed it in place)
                state[key][...] = a
        self.hooks.assign(new, write, into=self._inputs.get(key))

    def each_call(self, fn):
        """fn() now, and before every replay reads its inputs."""
        fn()
        self.hooks.each_call(fn)


def _is_array(v):
    return isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy")


class SGD(Optimizer):
    """p -= lr * d, where d is the gradient (plus weight_decay * p), or with momentum
    the buffer b = momentum * b + (1 - dampening) * g (b = g on the first step), or with
    nesterov g + momentum * b."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_hyperparameter("SGD", "momentum", momentum)
        _check_hyperparameter("SGD", "dampening", dampening)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening == 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      **_torch_flags("SGD", maximize, foreach, differentiable,
                                                     fused)))

    def _update(self, p, g, state, group):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        if group.get("maximize"):
            g = -g
        if wd != 0:
            g = g + wd * p
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.copy()
            else:
                buf *= momentum
                buf += (1.0 - group["dampening"]) * g
            g = g + momentum * buf if group["nesterov"] else buf
        p -= lr * g

    def _update_ops(self, c, p, g, group):
        momentum, wd = group["momentum"], group["weight_decay"]
        if group.get("maximize"):
            g = -g
        if wd != 0:
            g = g + wd * p
        if momentum != 0:
            # b = a * b + k * g with (a, k) = (0, 1) before a buffer exists (b = g exactly,
            # as eager's copy) and (momentum, 1 - dampening) after: one program for both
            has = lambda s: s.get("momentum_buffer") is not None
            a = c.scalar(lambda gr, s: gr["momentum"] if has(s) else 0.0, "momentum")
            k = c.scalar(lambda gr, s: 1.0 - gr["dampening"] if has(s) else 1.0, "1-dampening")
            buf = a * c.state("momentum_buffer", zeros_if_missing=True) + k * g
            c.update("momentum_buffer", buf)
            g = g + momentum * buf if group["nesterov"] else buf
        return p - c.scalar(lambda gr, s: gr["lr"], "lr") * g


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with bias correction; weight_decay adds wd * p to the
    gradient (L2), amsgrad keeps the running maximum of the second moment."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"{type(self).__name__}: invalid betas {plain(tuple(betas))}")
        _check_hyperparameter(type(self).__name__, "eps", eps)
        flags = _torch_flags(type(self).__name__, maximize, foreach, differentiable, fused)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad, **flags,
                                      capturable=bool(capturable),
                                      decoupled_weight_decay=bool(decoupled_weight_decay)))

    @staticmethod
    def _init_state(state, p, group):
        xp = _xp(p)
        state["step"] = 0
        state["exp_avg"] = xp.zeros_like(p)
        state["exp_avg_sq"] = xp.zeros_like(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = xp.zeros_like(p)

    def _state_of(self, p, group):
        state = super()._state_of(p, group)
        if not state:
            self._init_state(state, p.data, group)
        if group["amsgrad"] and state.get("max_exp_avg_sq") is None:
            state["max_exp_avg_sq"] = _xp(p.data).zeros_like(p.data)  # amsgrad switched on later
        return state

    def _update(self, p, g, state, group):
        xp = _xp(p)
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            self._init_state(state, p, group)
        state["step"] += 1
        step = state["step"]
        decoupled = group.get("decoupled_weight_decay", self.decoupled)
        if _c_optim.adam(p, g, state["exp_avg"], state["exp_avg_sq"], lr=lr, betas=(beta1, beta2),
                         eps=eps, wd=wd, decoupled=decoupled, step=step, amsgrad=group["amsgrad"],
                         maximize=group.get("maximize")):
            return   # the lines below in one C pass, bit for bit (kernels/c_optim.py)
        if group.get("maximize"):
            g = -g
        if wd != 0:
            if decoupled:
                p *= 1.0 - lr * wd
            else:
                g = g + wd * p
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1.0 - beta1) * (g - m)           # lerp towards g, as torch's lerp_ for weight < 0.5
        v *= beta2
        v += (1.0 - beta2) * (g * g)
        step_size = lr / (1.0 - beta1 ** step)
        bias_correction2_sqrt = (1.0 - beta2 ** step) ** 0.5
        if group["amsgrad"]:
            vmax = state.get("max_exp_avg_sq")
            if vmax is None:  # amsgrad switched on after some steps
                vmax = state["max_exp_avg_sq"] = xp.zeros_like(p)
            xp.maximum(vmax, v, out=vmax)
            v = vmax
        denom = xp.sqrt(v) / bias_correction2_sqrt
        denom += eps
        p -= step_size * (m / denom)

    def _update_ops(self, c, p, g, group):
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]

        def count():
            c.state_dict()["step"] += 1
        c.each_call(count)
        if group.get("maximize"):
            g = -g
        if wd != 0:
            if group.get("decoupled_weight_decay", self.decoupled):
                p = p * c.scalar(lambda gr, s: 1.0 - gr["lr"] * gr["weight_decay"], "decay")
            else:
                g = g + wd * p
        m = c.state("exp_avg")
        v = c.state("exp_avg_sq")
        m = m + (1.0 - beta1) * (g - m)
        v = v * beta2 + (1.0 - beta2) * (g * g)
        c.update("exp_avg", m)
        c.update("exp_avg_sq", v)
        # the bias corrections depend on the step count: inputs, so a replay at step k uses k
        step_size = c.scalar(lambda gr, s: gr["lr"] / (1.0 - gr["betas"][0] ** s["step"]), "step_size")
        bc2 = c.scalar(lambda gr, s: (1.0 - gr["betas"][1] ** s["step"]) ** 0.5, "bias_correction2_sqrt")
        if group["amsgrad"]:
            v = tt.maximum(c.state("max_exp_avg_sq"), v)
            c.update("max_exp_avg_sq", v)
        denom = tt.sqrt(v) / bc2 + eps
        return p - step_size * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019): p *= 1 - lr * wd
    before the Adam update, instead of adding wd * p to the gradient."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
