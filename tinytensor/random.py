"""Random number generators, one per device, all seeded by `manual_seed`, with a state that
can be read and set back (`get_rng_state` / `set_rng_state`: what nn.recompute replays and
the compiler checks)."""
import os

import numpy as np

_seed = None
_generators = {}
_initial = {}   # device -> the state its generator was made with


def manual_seed(seed):
    """Seed every random op (rand, randn, randint, dropout, ...) on every device.

    The same seed gives the same numbers on every run, on the same device: each device has
    its own stream derived from the seed (NumPy's PCG64 on the CPU, a counter-based cuRAND
    stream per GPU), so a CPU draw and a GPU draw after one seed differ. None of these are
    torch's streams: `torch.manual_seed(0); torch.randn(3)` and the same with tinytensor
    give different numbers (copy the tensors, not the seed, to compare with torch)."""
    global _seed
    _seed = int(seed)
    _generators.clear()
    _initial.clear()
    # device._cupy is set when CuPy first loads: read it now, not at import
    from .device import _cupy
    if _cupy is not None:
        _cupy.random.seed(_seed)


def initial_seed():
    return _seed


def seed_cuda(seed, index=None):
    """torch.cuda.manual_seed(_all): reseed the CUDA generators only (device `index`, or
    all when None), leaving the CPU stream where it is. Without CUDA there is nothing to
    seed, and, as in torch, that is not an error."""
    from .device import Device, cuda_is_available, cupy_module
    if not cuda_is_available():
        return
    n = cupy_module().cuda.runtime.getDeviceCount()
    for i in range(n) if index is None else [index]:
        dev = Device(f"cuda:{i}")
        _generators[dev] = CudaGenerator(dev, int(seed) + 1000003 * (i + 1))
        _initial[dev] = get_rng_state(dev)


def generator(device):
    """The generator of `device`: a NumPy Generator on CPU, a `CudaGenerator` on CUDA."""
    g = _generators.get(device)
    if g is None:
        if device.type == "cpu":
            g = np.random.default_rng(_seed)
        else:
            seed = None if _seed is None else _seed + 1000003 * (device.index + 1)
            g = CudaGenerator(device, seed)
        _generators[device] = g
        _initial[device] = get_rng_state(device)
    return g


def initial_rng_state(device):
    """The state `device`'s generator had when it was made (the compiler replays the draws
    of a step from there when the generator was made during that step)."""
    generator(device)
    return _initial[device]


def get_rng_state(device):
    """The state of `device`'s generator, for `set_rng_state` (a NumPy bit-generator state
    dict on CPU, (seed, draws) on CUDA)."""
    g = generator(device)
    return g.bit_generator.state if device.type == "cpu" else g.state


def set_rng_state(device, state):
    """Put `device`'s generator back to `state` (from `get_rng_state` on the same device):
    the draws after it repeat those that followed when the state was read."""
    g = generator(device)
    if device.type == "cpu":
        g.bit_generator.state = state
    else:
        g.state = state


def _splitmix64(x):
    """A well-mixed 64-bit key from (seed, draw) so neighbouring draws get unrelated streams."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class CudaGenerator:
    """CUDA random numbers whose state is two ints, (seed, draws): each draw is a fresh
    cuRAND Philox stream keyed by both. CuPy's RandomState keeps its position inside cuRAND
    with no way to read or set it, so a single long stream could not be rewound (which
    nn.recompute needs to replay dropout); Philox makes a new stream cheap to start.
    Methods are the subset of CuPy's RandomState that tinytensor's random ops call."""

    def __init__(self, device, seed=None):
        self.device = device
        self.seed = int.from_bytes(os.urandom(8), "little") if seed is None else int(seed)
        self.draws = 0

    @property
    def state(self):
        return (self.seed, self.draws)

    @state.setter
    def state(self, state):
        seed, draws = state
        self.seed, self.draws = int(seed), int(draws)

    def next_key(self):
        """The cuRAND seed of the next draw (advances the state)."""
        key = _splitmix64(_splitmix64(self.seed) ^ self.draws) >> 1  # cuRAND takes < 2**63 here
        self.draws += 1
        return key

    def _stream(self):
        cp = self.device.xp
        with cp.cuda.Device(self.device.index):
            return cp.random.RandomState(self.next_key(), method=cp.cuda.curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)

    def random_sample(self, shape):
        return self._stream().random_sample(shape)

    def standard_normal(self, shape):
        return self._stream().standard_normal(shape)

    def randint(self, low, high, size):
        return self._stream().randint(low, high, size=size)


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
