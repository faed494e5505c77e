"""`tt.stft` and `tt.istft` with torch's arguments (issue 23), built from recorded ops (pad,
unfold, the window product, tt.fft, a scatter-add for the overlap-add), so their
gradients are those ops' gradients and a compiled step refuses them like any complex op.

istft checks, as torch, that the window's overlap-added square never vanishes (NOLA): it
reads values, which is fine here because a compiled step refuses istft's complex input
before. `align_to_window` (a torch 2.7 addition) is not taken.
"""
from . import fft as _fft
from .core.tensor import Tensor
from .dtypes import get_default_dtype
from .messages import OpError


def _window(window, n_fft, win_length, like, op):
    from .creation import ones, zeros
    from .ops.movement import cat
    if win_length is None:
        win_length = n_fft
    if not 0 < win_length <= n_fft:
        raise OpError(f"{op}: expected 0 < win_length <= n_fft, got win_length={win_length}, "
                      f"n_fft={n_fft}")
    real = like.dtype.to_real() if like.dtype.is_complex else like.dtype
    if window is None:
        window = ones(win_length, dtype=real if real.is_floating_point else get_default_dtype(),
                      device=like.device)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise OpError(f"{op}: expected a 1-d window of size win_length={win_length}, got shape "
                      f"{tuple(window.shape)}")
    if win_length < n_fft:   # centred in n_fft, as torch
        left = (n_fft - win_length) // 2
        z = lambda k: zeros(k, dtype=window.dtype, device=window.device)  # noqa: E731
        window = cat([z(left), window, z(n_fft - win_length - left)])
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """Short-time Fourier transform of a (L,) or (B, L) signal: (B?, n_fft // 2 + 1 or n_fft, frames)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"stft: expected a Tensor, got {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise OpError(f"stft: expected a 1-d or 2-d tensor, got shape {tuple(input.shape)}")
    complex_in = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft: requires the return_complex parameter to be given for real "
                               "inputs (return_complex=True; return_complex=False is deprecated)")
        return_complex = True
    hop = n_fft // 4 if hop_length is None else hop_length
    if not 0 < n_fft or hop <= 0:
        raise OpError(f"stft: expected n_fft > 0 and hop_length > 0, got n_fft={n_fft}, "
                      f"hop_length={hop_length}")
    w = _window(window, n_fft, win_length, input, "stft")
    x = input if input.ndim == 2 else input.reshape(1, -1)   # (B, L)
    if center:
        from .ops.movement import pad
        x = pad(x, (n_fft // 2, n_fft // 2), mode=pad_mode)
    if x.shape[-1] < n_fft:
        raise OpError(f"stft: expected 0 < n_fft <= {x.shape[-1]} (the padded signal), got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop) * w                    # (B, frames, n_fft)
    if onesided is None:
        onesided = not complex_in
    if onesided and complex_in:
        raise RuntimeError("stft: onesided=True needs a real input and a real window")
    norm = "ortho" if normalized else None
    spec = (_fft.rfft if onesided else _fft.fft)(frames, dim=-1, norm=norm)
    spec = spec.transpose(-1, -2)                            # (B, freq, frames)
    if input.ndim == 1:
        spec = spec.reshape(spec.shape[1:])
    if not return_complex:
        from .ops.complex import view_as_real
        spec = view_as_real(spec)
    return spec


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """Inverse of stft by windowed overlap-add: (B?, freq, frames) complex -> (B?, L)."""
    from .creation import zeros
    from .ops.indexing import scatter_add
    if not isinstance(input, Tensor) or not input.dtype.is_complex:
        raise RuntimeError(f"istft: expected a complex tensor, got "
                           f"{getattr(input, 'dtype', type(input).__name__)}")
    if input.ndim not in (2, 3):
        raise OpError(f"istft: expected a 2-d or 3-d tensor, got shape {tuple(input.shape)}")
    hop = n_fft // 4 if hop_length is None else hop_length
    spec = input if input.ndim == 3 else input.reshape(1, *input.shape)   # (B, freq, frames)
    if onesided is None:
        onesided = spec.shape[1] != n_fft
    if onesided and spec.shape[1] != n_fft // 2 + 1:
        raise OpError(f"istft: a one-sided spectrum of n_fft={n_fft} has {n_fft // 2 + 1} "
                      f"frequencies, got shape {tuple(input.shape)}")
    if not onesided and spec.shape[1] != n_fft:
        raise OpError(f"istft: a two-sided spectrum of n_fft={n_fft} has {n_fft} frequencies, "
                      f"got shape {tuple(input.shape)}")
    if return_complex and onesided:
        raise RuntimeError("istft: a complex output needs a two-sided spectrum (onesided=False)")
    if not return_complex and not onesided:   # as torch: the first half, read as Hermitian
        spec = spec[:, :n_fft // 2 + 1]
    w = _window(window, n_fft, win_length, input, "istft")
    norm = "ortho" if normalized else None
    frames_in = spec.transpose(-1, -2)                       # (B, frames, freq)
    frames = (_fft.ifft(frames_in, dim=-1, norm=norm) if return_complex
              else _fft.irfft(frames_in, n=n_fft, dim=-1, norm=norm)) * w     # (B, frames, n_fft)
    b, n_frames = frames.shape[0], frames.shape[1]
    total = n_fft + hop * (n_frames - 1)
    from .creation import arange
    idx = (arange(n_frames, device=input.device)[:, None] * hop
           + arange(n_fft, device=input.device)[None, :]).reshape(1, -1)   # (1, frames * n_fft)
    y = scatter_add(zeros(b, total, dtype=frames.dtype, device=input.device), 1,
                    idx.expand(b, idx.shape[1]), frames.reshape(b, -1))
    env = scatter_add(zeros(1, total, dtype=w.dtype, device=input.device), 1, idx,
                      (w * w).expand(n_frames, n_fft).reshape(1, -1))
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    end_avail = min(end, total)
    env = env[:, start:end_avail]
    if env.numel() and float(env.abs().min()) < 1e-11:
        raise RuntimeError(f"istft: window overlap add min is {float(env.abs().min())}: the "
                           "squared window, overlap-added at this hop, vanishes somewhere (NOLA "
                           "fails), so the signal cannot be recovered there")
    y = y[:, start:end_avail] / env
    if end > end_avail:   # torch pads a longer `length` with zeros
        from .ops.movement import cat
        y = cat([y, zeros(b, end - end_avail, dtype=y.dtype, device=input.device)], 1)
    return y if input.ndim == 3 else y.reshape(y.shape[1:])
