"""Random number generators, one per device, all seeded by `manual_seed`."""
import numpy as np

_seed = None
_generators = {}


def manual_seed(seed):
    """Seed every random op (rand, randn, randint, dropout, ...) on every device."""
    global _seed
    _seed = int(seed)
    _generators.clear()
    # device._cupy is set when CuPy first loads: read it now, not at import
    from .device import _cupy
    if _cupy is not None:
        _cupy.random.seed(_seed)


def initial_seed():
    return _seed


def generator(device):
    """The generator of `device`: a NumPy Generator on CPU, a CuPy RandomState on CUDA."""
    g = _generators.get(device)
    if g is None:
        if device.type == "cpu":
            g = np.random.default_rng(_seed)
        else:
            cp = device.xp
            with cp.cuda.Device(device.index):
                g = cp.random.RandomState(None if _seed is None else _seed + 1000003 * (device.index + 1))
        _generators[device] = g
    return g


def uniform(device, shape, dtype):
    g = generator(device)
    if device.type == "cpu":
        if dtype.np in (np.float32, np.float64):
            return g.random(shape, dtype=dtype.np)
        a = g.random(shape)
    else:
        a = g.random_sample(shape)
        if dtype.np != np.float16:
            return a.astype(dtype.np, copy=False)
    if dtype.np == np.float16:  # values just below 1 would round up to 1.0: keep [0, 1)
        a = device.xp.minimum(a, 1.0 - 2.0 ** -11)
    return a.astype(dtype.np)


def normal(device, shape, dtype):
    g = generator(device)
    if device.type == "cpu":
        if dtype.np in (np.float32, np.float64):
            return g.standard_normal(shape, dtype=dtype.np)
        return g.standard_normal(shape).astype(dtype.np)
    return g.standard_normal(shape).astype(dtype.np, copy=False)


def integers(device, low, high, shape, dtype):
    g = generator(device)
    if device.type == "cpu":
        if np.dtype(dtype.np).kind in "iu":
            return g.integers(low, high, size=shape, dtype=dtype.np)
        return g.integers(low, high, size=shape).astype(dtype.np)  # randint(..., dtype=float32)
    return g.randint(low, high, size=shape).astype(dtype.np, copy=False)
