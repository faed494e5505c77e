"""Devices and array-module dispatch: `cpu` is NumPy, `cuda[:N]` is CuPy.

Every op's forward asks its inputs' device for `xp` (numpy or cupy) and calls the same
code on it; nothing else in the engine knows which backend it runs on.
"""
import numpy as np

from .messages import plain

_INSTALL_HINT = ("install CuPy for your CUDA version: pip install 'tinytensor[cuda]' "
                 "(cupy-cuda12x) or pip install cupy-cuda13x for CUDA 13")

_cupy = None
_cupy_error = None


def cupy_module():
    """Import CuPy on first use; raise a clear error if it or a GPU is missing."""
    global _cupy, _cupy_error
    if _cupy is not None:
        return _cupy
    if _cupy_error is None:
        try:
            # CuPy is optional: imported on first use of a CUDA device
            import cupy
            n = cupy.cuda.runtime.getDeviceCount()
            if n < 1:
                raise RuntimeError("no CUDA device is visible")
            _cupy = cupy
            return cupy
        except ImportError as e:
            _cupy_error = f"CuPy is not installed ({e}); {_INSTALL_HINT}"
        except Exception as e:  # CuPy present but no driver / no GPU
            _cupy_error = f"CuPy cannot reach a CUDA GPU ({type(e).__name__}: {e})"
    raise RuntimeError(f"device 'cuda' is not available: {_cupy_error}")


def cuda_is_available():
    try:
        cupy_module()
        return True
    except RuntimeError:
        return False


class Device:
    """A device: `Device('cpu')`, `Device('cuda')`, `Device('cuda:1')`. Instances are interned."""
    __slots__ = ("type", "index")
    _cache = {}

    def __new__(cls, spec="cpu", index=None):
        if isinstance(spec, Device):
            return spec
        key = (spec, index)
        dev = cls._cache.get(key)
        if dev is not None:
            return dev
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {plain(spec)!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {plain(spec)!r}; expected 'cpu', 'cuda' or 'cuda:N'")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device index in {plain(spec)!r}")
            index = int(idx)
        if kind == "cpu":
            index = None
        elif index is None:
            index = 0
        canonical = (kind, index)
        dev = cls._cache.get(canonical)
        if dev is None:
            dev = object.__new__(cls)
            dev.type, dev.index = kind, index
            cls._cache[canonical] = dev
        cls._cache[key] = dev
        return dev

    @property
    def xp(self):
        return np if self.type == "cpu" else cupy_module()

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = Device(other)
        return self is other

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (Device, (str(self),))


CPU = Device("cpu")


def xp_of(a):
    """The array module of array `a`: numpy, or cupy for a GPU array (CuPy is imported only
    then). The one definition: every module that needs it imports it from here."""
    if isinstance(a, np.ndarray):
        return np
    import cupy   # optional: only a GPU array gets here
    return cupy.get_array_module(a)


def device_of_array(a):
    if isinstance(a, np.ndarray):
        return CPU
    if _cupy is not None and isinstance(a, _cupy.ndarray):
        return Device("cuda", a.device.id)
    if type(a).__module__.startswith("cupy"):
        return Device("cuda", cupy_module().asarray(a).device.id)
    return CPU


def get_device(spec):
    """Resolve a device spec, checking that CUDA is usable when asked for."""
    dev = Device(spec)
    if dev.type == "cuda":
        cp = cupy_module()
        n = cp.cuda.runtime.getDeviceCount()
        if dev.index >= n:
            raise RuntimeError(f"device {dev} does not exist: {n} CUDA device(s) visible")
    return dev


def to_device_array(a, device):
    """Move an array to `device` (NumPy <-> CuPy), copying only when needed."""
    if device.type == "cpu":
        if isinstance(a, np.ndarray):
            return a
        return a.get()
    cp = cupy_module()
    with cp.cuda.Device(device.index):
        return cp.asarray(a)


def array_context(device):
    """A context manager that makes `device` current for CuPy allocation."""
    if device.type == "cpu":
        return _NULL
    return cupy_module().cuda.Device(device.index)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL = _Null()
