"""Tensor creation: tensor, zeros, ones, full, empty, arange, linspace, eye, rand, randn,
randint, the *_like forms and from_numpy."""
import numpy as np

from .dtypes import bool_, from_any, from_numpy_dtype, get_default_dtype, int64, scalar_dtype
from .random import generator, integers, normal, uniform
from .device import CPU, get_device, to_device_array, array_context
from .core.function import Function
from .core.grad_mode import STATE, VMAP_WRAPPERS
from .core.tensor import Tensor, to_array


def _resolve(device, dtype, default=None):
    dev = get_device(device) if device is not None else CPU
    dt = from_any(dtype) if dtype is not None else (default or get_default_dtype())
    return dev, dt


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _finish(arr, dev, requires_grad):
    t = Tensor._make(arr, dev, False)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor copying `data` (nested lists, scalars, NumPy/CuPy arrays, Tensors)."""
    arr, dev = to_array(data, dtype, get_device(device) if device is not None else None)
    if arr is (data.data if isinstance(data, Tensor) else data):  # NumPy or CuPy: never share
        arr = arr.copy()
    return _finish(arr, dev, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like tensor() but shares memory with a NumPy/CuPy array when possible."""
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    arr, dev = to_array(data, dtype, get_device(device) if device is not None else None)
    return Tensor._make(arr, dev, False)


def from_numpy(array):
    """A tensor sharing memory with a NumPy array."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dt = from_numpy_dtype(array.dtype)  # validate
    if array.dtype != dt.np:  # uint8, int16, big-endian ...: no such tinytensor dtype, so copy
        array = array.astype(dt.np)
    return Tensor._make(array, CPU, False)


def _filled(fill, size, dtype, device, requires_grad):
    dev, dt = _resolve(device, dtype)
    if _sized_by_symbols(size, fill):
        return _created(Create.apply(how="full", args=(_sym_shape(size), fill), np_dtype=dt.np,
                                     device=dev), requires_grad)
    with array_context(dev):
        arr = dev.xp.full(_shape(size), fill, dtype=dt.np)
    return _finish(arr, dev, requires_grad)


class Create(Function):
    """A tensor made from sizes alone (ones(T, S), arange(past, past + T)), recorded as an
    op only while tt.compile(dynamic=True) captures a step and the sizes are symbolic: the
    replay makes it again for each call's sizes. Elsewhere creation makes a plain array."""
    name = "create"

    @staticmethod
    def forward(ctx, how, args, np_dtype, device):
        xp = device.xp
        with array_context(device):
            if how == "full":
                return xp.full(args[0], args[1], dtype=np_dtype)
            return xp.arange(*args).astype(np_dtype)

    @staticmethod
    def jvp(ctx):   # no tensor inputs: never called with a tangent (complete, as backward)
        return None


def _created(t, requires_grad):
    return t.requires_grad_(True) if requires_grad else t


def _sized_by_symbols(*values):
    """Whether tt.compile(dynamic=True) is capturing and sizes among `values` are formulas."""
    hooks = STATE.hooks
    return hooks.symbolic and hooks.holds_sizes(values)


def _sym_shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(size)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(0, size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(1, size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    if _sized_by_symbols(size):
        return _filled(0, size, dtype, device, requires_grad)
    dev, dt = _resolve(device, dtype)
    with array_context(dev):
        arr = dev.xp.empty(_shape(size), dtype=dt.np)
    return _finish(arr, dev, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = scalar_dtype(fill_value)
    return _filled(fill_value, (size,) if isinstance(size, int) else tuple(size), dtype, device,
                   requires_grad)


def _like(make, x, *args, dtype=None, device=None, **kw):
    """make(x.shape, *args, ...) with x's dtype and device unless others are given."""
    return make(x.shape, *args, dtype=x.dtype if dtype is None else dtype,
                device=x.device if device is None else device, **kw)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return _like(zeros, x, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return _like(ones, x, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    return _like(empty, x, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return _like(full, x, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, end, step))
        dtype = get_default_dtype() if is_float else int64
    dev, dt = _resolve(device, dtype)
    _refuse_bool(dt, "arange")
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if _sized_by_symbols(start, end, step):
        return _created(Create.apply(how="arange", args=(start, end, step), np_dtype=dt.np,
                                     device=dev), requires_grad)
    with array_context(dev):
        arr = dev.xp.arange(start, end, step).astype(dt.np)
    return _finish(arr, dev, requires_grad)


def _refuse_bool(dt, op):
    # a range of bools has no step; torch refuses it with this exception type
    if dt is bool_:
        raise NotImplementedError(f"{op}: dtype bool is not supported (as in torch); ask for an "
                                  f"integer or float dtype and compare, e.g. {op}(...) > 0")


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    # torch's tensor overload: a 0-d tensor endpoint is its number, so the points are computed
    # in the requested dtype, not in the endpoint's (a float32 start would round them)
    start, end = (v.item() if isinstance(v, Tensor) and v.ndim == 0 else v for v in (start, end))
    dev, dt = _resolve(device, dtype)
    _refuse_bool(dt, "linspace")
    with array_context(dev):
        arr = dev.xp.linspace(start, end, int(steps)).astype(dt.np)
    return _finish(arr, dev, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    dev, dt = _resolve(device, dtype)
    with array_context(dev):
        arr = dev.xp.eye(n, m if m is not None else n, dtype=dt.np)
    return _finish(arr, dev, requires_grad)


def _samples(draw, op, size, dtype, device, requires_grad):
    dev, dt = _resolve(device, dtype)
    if STATE.vmap:   # a draw outside the op tape: vmap's randomness= decides (func/batching_wrappers.py)
        out = VMAP_WRAPPERS["random_draw"](op, "uniform" if draw is uniform else "normal", _shape(size), dt, dev,
                          requires_grad)
        if out is not None:
            return out
    if dt.is_complex:  # as torch: real and imaginary parts drawn apart, randn's of variance 1/2 each
        with array_context(dev):
            parts = draw(dev, _shape(size) + (2,), dt.to_real())
        if draw is normal:
            parts = parts * parts.dtype.type(0.5 ** 0.5)
        arr = dev.xp.ascontiguousarray(parts).view(dt.np)[..., 0]
        return _finish(arr, dev, requires_grad)
    _require_float(dt, op)
    with array_context(dev):
        arr = draw(dev, _shape(size), dt)
    return _finish(arr, dev, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform samples on [0, 1)."""
    return _samples(uniform, "rand", size, dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal samples."""
    return _samples(normal, "randn", size, dtype, device, requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None):
    """Integers uniform on [low, high) (randint(high, size) also works, like torch)."""
    if isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    dev, dt = _resolve(device, dtype, default=int64)
    if STATE.vmap:
        VMAP_WRAPPERS["random_draw"]("randint", None, tuple(size), dt, dev, False)
    with array_context(dev):
        arr = integers(dev, low, high, tuple(size), dt)
    return _finish(arr, dev, False)


def rand_like(x, dtype=None, device=None, requires_grad=False):
    return _like(rand, x, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False):
    return _like(randn, x, dtype=dtype, device=device, requires_grad=requires_grad)


def randint_like(x, low, high=None, dtype=None, device=None):
    # randint takes the shape third
    return _like(lambda shape, **kw: randint(low, high, shape, **kw), x, dtype=dtype, device=device)


def _require_float(dt, op):
    if not dt.is_floating_point:
        raise TypeError(f"{op}: dtype must be floating, got {dt.name}")


def multinomial(probs, num_samples, replacement=False):
    """Sample category indices from rows of non-negative weights (1-d or 2-d), like
    torch.multinomial; without replacement each row needs num_samples non-zero weights."""
    if probs.ndim not in (1, 2):
        raise ValueError(f"multinomial: expects a 1-d or 2-d tensor of weights, got shape "
                         f"{tuple(probs.shape)}")
    STATE.hooks.read_value(probs, "multinomial")   # drawn on the host from the values: not a recorded op
    w = np.asarray(to_device_array(probs.data, CPU), dtype=np.float64)
    rows = w.reshape(-1, w.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise ValueError("multinomial: weights must be finite and non-negative")
    sums = rows.sum(-1)
    if (sums <= 0).any():
        raise ValueError("multinomial: every row needs a positive total weight")
    if not replacement and ((rows > 0).sum(-1) < num_samples).any():
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement "
                         "from a row with fewer non-zero weights")
    rng = generator(CPU)  # sampled on the host, seeded by manual_seed
    out = np.stack([rng.choice(len(r), size=num_samples, replace=replacement, p=r / r.sum())
                    for r in rows]).astype(np.int64)
    out = out.reshape(w.shape[:-1] + (num_samples,))
    return Tensor._make(to_device_array(out, probs.device), probs.device, False)
