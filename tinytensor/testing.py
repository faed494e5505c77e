"""Testing utilities: finite-difference gradient checks and comparison against PyTorch.

    from tinytensor.testing import compare_with_torch
    compare_with_torch(lambda x, w: (x @ w).tanh(), lambda x, w: (x @ w).tanh(),
                       [(4, 3), (3, 5)], double_backward=True)

PyTorch is imported only when `compare_with_torch` runs; tinytensor never needs it.
"""
import numpy as np

from .core import Tensor, enable_grad, grad, no_grad
from .core import grad as tt_grad  # compare_with_torch has an argument named grad
from .dtypes import from_any


class GradcheckError(AssertionError):
    pass


def _as_tuple(x):
    return x if isinstance(x, (tuple, list)) else (x,)


def _float_outputs(outs):
    return [o for o in outs if isinstance(o, Tensor) and o.is_floating_point()]


def _check_float64(inputs, op):
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad and t.dtype.name != "float64":
            raise TypeError(f"{op}: inputs that require grad should be float64 for finite "
                            f"differences to be meaningful, got {t.dtype.name}")


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, n_directions=2, seed=0):
    """Compare backward() of `fn` with central finite differences, in float64.

    For a few random output cotangents v, the vector-Jacobian product v^T J from autograd
    is compared with (f(x + eps e_i) - f(x - eps e_i)) / 2 eps . v for every input element
    i. Raises GradcheckError naming the worst entry; returns True otherwise.
    """
    inputs = list(_as_tuple(inputs))
    _check_float64(inputs, "gradcheck")
    rng = np.random.default_rng(seed)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    outs = _float_outputs(_as_tuple(fn(*inputs)))
    for _ in range(n_directions):
        vs = [rng.standard_normal(o.shape) for o in outs]
        total = sum((o * Tensor(v, dtype=o.dtype, device=o.device)).sum() for o, v in zip(outs, vs))
        analytic = grad(total, [inputs[i] for i in diff], retain_graph=True, allow_unused=True) \
            if total.requires_grad else [None] * len(diff)  # an output cut off from the inputs
        for k, i in enumerate(diff):
            x = inputs[i]
            a = np.zeros(x.shape) if analytic[k] is None else np.asarray(analytic[k].detach())
            numeric = _numeric_vjp(fn, inputs, i, vs, eps)
            _compare(a, numeric, atol, rtol, f"gradcheck: input {i} (shape {tuple(x.shape)})",
                     "analytical", "numerical", GradcheckError)
    return True


def _numeric_vjp(fn, inputs, i, vs, eps):
    x = inputs[i]
    out = np.zeros(x.shape)
    flat = x.data.reshape(-1)  # perturbations must reach x itself: a view, not a copy
    if isinstance(flat, np.ndarray) and not np.shares_memory(flat, x.data):
        raise ValueError("gradcheck: inputs must be contiguous so that they can be perturbed in place")
    with no_grad():
        for j in range(flat.size):
            old = flat[j].item()
            vals = []
            for delta in (eps, -eps):
                flat[j] = old + delta
                outs = _float_outputs(_as_tuple(fn(*inputs)))
                vals.append(sum(float((np.asarray(o.detach()) * v).sum()) for o, v in zip(outs, vs)))
            flat[j] = old
            out.reshape(-1)[j] = (vals[0] - vals[1]) / (2 * eps)
    return out


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """gradcheck of the gradient: checks create_graph=True backward against finite differences."""
    inputs = list(_as_tuple(inputs))
    _check_float64(inputs, "gradgradcheck")
    rng = np.random.default_rng(seed + 1)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    outs = _float_outputs(_as_tuple(fn(*inputs)))
    vs = [Tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=o.device) for o in outs]

    def first_grads(*xs):
        with enable_grad():  # finite differences call this under no_grad
            outs = _float_outputs(_as_tuple(fn(*xs)))
            total = sum((o * v).sum() for o, v in zip(outs, vs))
            gs = grad(total, [xs[i] for i in diff], create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs, eps, atol, rtol, seed=seed + 2)


def _compare(actual, expected, atol, rtol, what, name_a, name_b, err=AssertionError):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise err(f"{what}: {name_a} has shape {actual.shape} but {name_b} has shape {expected.shape}")
    if actual.size == 0:
        return
    same_nonfinite = (~np.isfinite(actual) & ~np.isfinite(expected)) & (
        np.isnan(actual) == np.isnan(expected)) & ((actual == expected) | np.isnan(actual))
    err_abs = np.where(same_nonfinite, 0.0, np.abs(actual - expected))
    err_abs = np.where(np.isnan(err_abs), np.inf, err_abs)
    bound = atol + rtol * np.abs(np.where(np.isfinite(expected), expected, 0.0))
    excess = err_abs - bound
    if np.all(excess <= 0):
        return
    k = np.unravel_index(int(np.argmax(excess)), actual.shape)
    n_bad = int((excess > 0).sum())
    raise err(f"{what}: {n_bad} of {actual.size} entries differ; worst at index {tuple(int(i) for i in k)}: "
              f"{name_a} {actual[k].item()!r} vs {name_b} {expected[k].item()!r} "
              f"(|diff| {err_abs[k]:.3g}, allowed {bound[k]:.3g})")


# ------------------------------------------------------------------ against PyTorch
_TOL = {"float64": (1e-9, 1e-7), "float32": (1e-5, 1e-4), "float16": (1e-2, 1e-2)}


def compare_with_torch(tt_fn, torch_fn, inputs, dtype="float64", grad=True, double_backward=False,
                       atol=None, rtol=None, low=-2.0, high=2.0, seed=0, device="cpu"):
    """Run `tt_fn` and `torch_fn` on the same random inputs and compare everything.

    `inputs` is a list whose entries are shapes (tuples: random floats in [low, high) that
    require grad), NumPy arrays (used as given; float arrays require grad) or anything else
    (passed to both functions unchanged). Compares the outputs, the gradient of every
    float input for a random output cotangent, and with `double_backward=True` the
    gradient of those gradients. Raises AssertionError naming the worst entry; returns
    the tinytensor outputs.
    """
    try:
        # PyTorch is optional: only compare_with_torch needs it
        import torch
    except ImportError as e:
        if e.name != "torch":  # torch is there but broken: its own error says why
            raise
        raise ModuleNotFoundError("compare_with_torch needs PyTorch: pip install -e '.[test]' "
                                  "(or pip install torch==2.13.0)", name="torch") from e

    rng = np.random.default_rng(seed)
    dt = from_any(dtype)
    d_atol, d_rtol = _TOL[dt.name]
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    tt_in, th_in, diff = [], [], []
    for k, spec in enumerate(inputs):
        if isinstance(spec, tuple) and all(isinstance(s, int) for s in spec):
            spec = rng.uniform(low, high, size=spec).astype(dt.np)
        if isinstance(spec, np.ndarray):
            is_float = spec.dtype.kind == "f"
            arr = spec.astype(dt.np) if is_float else spec
            t = Tensor(arr.copy(), device=device)
            th = torch.tensor(arr.copy())
            if is_float and grad:
                t.requires_grad_(True)
                th.requires_grad_(True)
                diff.append(k)
            tt_in.append(t)
            th_in.append(th)
        else:
            tt_in.append(spec)
            th_in.append(spec)
    tt_out = _as_tuple(tt_fn(*tt_in))
    th_out = _as_tuple(torch_fn(*th_in))
    if len(tt_out) != len(th_out):
        raise AssertionError(f"tinytensor returned {len(tt_out)} outputs, torch {len(th_out)}")
    for i, (a, b) in enumerate(zip(tt_out, th_out)):
        a_np, b_np = _np(a), b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        if isinstance(a, Tensor) and isinstance(b, torch.Tensor) and str(b.dtype) != f"torch.{a.dtype.name}":
            raise AssertionError(f"output {i}: tinytensor dtype {a.dtype.name} vs torch {b.dtype}")
        _compare(a_np, b_np, atol, rtol, f"output {i}", "tinytensor", "torch")
    if not grad or not diff:
        return tt_out if len(tt_out) > 1 else tt_out[0]
    pairs = [(a, b) for a, b in zip(tt_out, th_out)
             if isinstance(a, Tensor) and a.requires_grad and b.requires_grad]
    if not pairs:
        return tt_out if len(tt_out) > 1 else tt_out[0]
    cot = [rng.standard_normal(a.shape).astype(dt.np) for a, _ in pairs]
    tt_total = sum((a * Tensor(c, device=device)).sum() for (a, _), c in zip(pairs, cot))
    th_total = sum((b * torch.tensor(c)).sum() for (_, b), c in zip(pairs, cot))
    tt_g = tt_grad(tt_total, [tt_in[k] for k in diff], create_graph=double_backward, allow_unused=True)
    th_g = torch.autograd.grad(th_total, [th_in[k] for k in diff], create_graph=double_backward,
                               allow_unused=True)
    for k, a, b in zip(diff, tt_g, th_g):
        a_np = np.zeros(tt_in[k].shape) if a is None else _np(a)
        b_np = np.zeros(tt_in[k].shape) if b is None else b.detach().numpy()
        _compare(a_np, b_np, atol, rtol, f"gradient of input {k}", "tinytensor", "torch")
    if double_backward:
        live = [(a, b, k) for a, b, k in zip(tt_g, th_g, diff)
                if a is not None and b is not None and b.requires_grad]
        if live:
            cot2 = [rng.standard_normal(a.shape).astype(dt.np) for a, _, _ in live]
            tt_t2 = sum((a * Tensor(c, device=device)).sum() for (a, _, _), c in zip(live, cot2))
            th_t2 = sum((b * torch.tensor(c)).sum() for (_, b, _), c in zip(live, cot2))
            tt_gg = tt_grad(tt_t2, [tt_in[k] for k in diff], allow_unused=True) if tt_t2.requires_grad \
                else [None] * len(diff)
            th_gg = torch.autograd.grad(th_t2, [th_in[k] for k in diff], allow_unused=True)
            for k, a, b in zip(diff, tt_gg, th_gg):
                a_np = np.zeros(tt_in[k].shape) if a is None else _np(a)
                b_np = np.zeros(tt_in[k].shape) if b is None else b.detach().numpy(force=True)  # torch may return a ZeroTensor
                _compare(a_np, b_np, atol, rtol, f"double-backward gradient of input {k}",
                         "tinytensor", "torch")
    return tt_out if len(tt_out) > 1 else tt_out[0]


def _np(x):
    if isinstance(x, Tensor):
        return np.asarray(x.detach())
    return np.asarray(x)
