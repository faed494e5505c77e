"""Window functions, as torch.signal.windows: same signatures, the same `sym=` meaning
(sym=True: symmetric, for filter design; sym=False: periodic, one sample of an M + 1 window
dropped, for spectral analysis) and the same errors.

Each window is a closed formula on M evenly spaced points; it is evaluated in float64 with
NumPy (M is a Python int, so the result is a constant, like tt.linspace) and then cast to the
requested dtype and placed on the requested device.
"""
import math
from collections.abc import Iterable

import numpy as np

from ..creation import tensor
from ..dtypes import float32, float64, from_any, get_default_dtype
from ..ops._bessel_arrays import i0  # the one home of I0 (tt.i0 uses it too)

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    dtype = get_default_dtype() if dtype is None else from_any(dtype)
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and "strided" not in str(layout):
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (float32, float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _made(values, dtype, device, requires_grad):
    return tensor(np.asarray(values, dtype=np.float64).reshape(-1).astype(dtype.np),
                  device=device, requires_grad=requires_grad)


def _points(start, step, M):
    """start, start + step, ..., M points (torch's linspace(start, start + (M-1) step, M))."""
    return np.linspace(start, start + (M - 1) * step, M)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _points(-center / tau, 1.0 / tau, M)
    return _made(np.exp(-np.abs(k)), dtype, device, requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _checks("cosine", M, dtype, layout)
    step = math.pi / (M + 1 if not sym and M > 1 else max(M, 1))
    return _made(np.sin(_points(0.5 * step, step, M)), dtype, device, requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    step = 1.0 / (std * math.sqrt(2.0))
    k = _points(-(M if not sym and M > 1 else M - 1) / 2.0 * step, step, M)
    return _made(np.exp(-k * k), dtype, device, requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _made(np.ones(M), dtype, device, requires_grad)
    beta = float(beta)
    step = 2.0 * beta / (M if not sym else M - 1)
    k = np.linspace(-beta, min(beta, -beta + (M - 1) * step), M)
    # the clamp: beta^2 - k^2 may round a hair below 0 at the ends, where it is 0
    arg = np.sqrt(np.maximum(beta * beta - k * k, 0.0))
    return _made(i0(np, arg) / i0(np, np.float64(beta)), dtype, device, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _checks("general_cosine", M, dtype, layout)
    if M <= 1:
        return _made(np.ones(M), dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    a = [float(w) for w in a]
    if not a:
        raise ValueError("Coefficients cannot be empty")
    k = _points(0.0, 2.0 * math.pi / (M if not sym else M - 1), M)
    i = np.arange(len(a), dtype=np.float64)[:, None]
    signed = np.array([(-1) ** n * w for n, w in enumerate(a)])[:, None]
    return _made((signed * np.cos(i * k)).sum(0), dtype, device, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    _checks("general_hamming", M, dtype, layout)  # errors name the window asked for
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    _checks("hamming", M, dtype, layout)  # errors name the window asked for
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    _checks("hann", M, dtype, layout)  # errors name the window asked for
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    _checks("nuttall", M, dtype, layout)
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _checks("bartlett", M, dtype, layout)
    if M <= 1:
        return _made(np.ones(M), dtype, device, requires_grad)
    k = _points(-1.0, 2.0 / (M if not sym else M - 1), M)
    return _made(1.0 - np.abs(k), dtype, device, requires_grad)
