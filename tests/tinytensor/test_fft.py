"""tt.fft against torch.fft (issue 23): values, gradients and second-order gradients for
complex and real inputs, every norm mode, n/s/dim, and the Hermitian-half subtleties of
irfft/hfft gradients (the DC and Nyquist entries' imaginary parts, doubled frequencies)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.complex_check import check, crandn, rrandn

Z = crandn(4, 6)
Z5 = crandn(3, 5)
R = rrandn(4, 6)
NORMS = [None, "ortho", "forward"]


# name: (torch.fft function, its keyword arguments, input); each runs in every norm mode
CASES = {
    "fft": ("fft", {}, Z), "ifft": ("ifft", {}, Z), "fft_real": ("fft", {}, R),
    "fft_n_pad": ("fft", {"n": 9}, Z), "fft_n_trim_dim0": ("fft", {"n": 3, "dim": 0}, Z),
    "rfft": ("rfft", {}, R), "rfft_odd": ("rfft", {"n": 5}, R), "rfft_dim0": ("rfft", {"dim": 0}, R),
    "irfft": ("irfft", {}, Z), "irfft_odd_n": ("irfft", {"n": 9}, Z5),
    "irfft_n_trim": ("irfft", {"n": 4}, Z), "irfft_dim0": ("irfft", {"dim": 0}, Z),
    "hfft": ("hfft", {}, Z), "hfft_odd": ("hfft", {"n": 7}, Z5),
    "ihfft": ("ihfft", {}, R), "ihfft_odd": ("ihfft", {"n": 5}, R),
    "fft2": ("fft2", {}, Z), "ifft2_s": ("ifft2", {"s": (3, 8)}, Z), "rfft2": ("rfft2", {}, R),
    "irfft2": ("irfft2", {}, Z), "irfft2_s": ("irfft2", {"s": (5, 7)}, Z), "hfft2": ("hfft2", {}, Z),
    "ihfft2": ("ihfft2", {}, R), "fftn": ("fftn", {}, Z), "ifftn_dim": ("ifftn", {"dim": (0,)}, Z),
    "rfftn_s": ("rfftn", {"s": (2, 7)}, R), "irfftn": ("irfftn", {}, Z),
    "hfftn": ("hfftn", {"dim": (1, 0)}, Z), "ihfftn": ("ihfftn", {}, R),
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(name, norm):
    fname, kw, x = CASES[name]
    check(lambda m, a: getattr(m.fft, fname)(a, norm=norm, **kw), x)


@pytest.mark.parametrize("fn", [
    lambda m, x: m.fft.fftshift(x), lambda m, x: m.fft.ifftshift(x, dim=1),
    lambda m, x: m.fft.fftn(x.reshape(2, 2, 6)),
    lambda m, x: m.fft.irfft(m.fft.rfft(x.real) * x[:, :4], n=6)])
def test_compositions_against_torch(fn):
    check(fn, Z)


def test_irfft_gradient_of_dc_and_nyquist_imaginary_parts():
    """irfft ignores the imaginary parts of the DC and (even n) Nyquist entries: their
    gradient is zero there, as torch's fft_c2r_backward gives."""
    x = tt.tensor(Z[0], requires_grad=True)
    out = tt.fft.irfft(x)                                   # n = 10, Nyquist at index 5
    g = tt.tensor(rrandn(10, seed=3))
    (gx,) = tt.grad(out, [x], g)
    xt = torch.tensor(Z[0], requires_grad=True)
    (gt,) = torch.autograd.grad(torch.fft.irfft(xt), [xt], torch.tensor(rrandn(10, seed=3)))
    np.testing.assert_allclose(gx.numpy(), gt.numpy(), atol=1e-12)
    assert gx.numpy()[0].imag == 0 and gx.numpy()[-1].imag == 0


def test_complex64_stays_complex64_and_float32_gives_complex64():
    x = tt.tensor(Z.astype(np.complex64))
    assert tt.fft.fft(x).dtype is tt.complex64 and tt.fft.irfft(x).dtype is tt.float32
    assert tt.fft.rfft(tt.tensor(R.astype(np.float32))).dtype is tt.complex64
    assert tt.fft.fft(tt.arange(4)).dtype is tt.complex64     # integers: the default float's complex


def test_fftfreq_and_rfftfreq():
    for n, d in ((5, 1.0), (8, 0.1), (1, 2.0)):
        np.testing.assert_allclose(tt.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy())
        np.testing.assert_allclose(tt.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy())
    assert tt.fft.fftfreq(4, dtype=tt.float64).dtype is tt.float64


def test_refusals_name_the_op():
    with pytest.raises(RuntimeError, match="rfft: expects a real input"):
        tt.fft.rfft(tt.tensor(Z))
    with pytest.raises(ValueError, match="fft: invalid normalization mode 'sideways'"):
        tt.fft.fft(tt.tensor(Z), norm="sideways")
    with pytest.raises(RuntimeError, match="irfft: invalid number of data points"):
        tt.fft.irfft(tt.tensor(Z), n=0)
    with pytest.raises(IndexError, match="fftn: dimension 2 is out of range"):
        tt.fft.fftn(tt.tensor(Z), dim=(2,))


def test_compile_refuses_fft():
    from tinytensor.compiler.capture import CaptureError
    with pytest.raises(CaptureError, match="fft_r2c"):
        tt.compile(lambda x: tt.fft.rfft(x).abs().sum())(tt.ones(8))


SIG = rrandn(2, 30, seed=4)
HANN = np.hanning(14)[1:13]   # win_length 12, no zeros at the ends


@pytest.mark.parametrize("kw", [
    {}, {"hop_length": 5}, {"win_length": 12, "hop_length": 3}, {"center": False, "normalized": True},
    {"pad_mode": "constant"}, {"onesided": False}])
def test_stft_against_torch(kw):
    win = HANN if kw.get("win_length") == 12 else np.hanning(18)[1:17]
    check(lambda m, x, w: m.stft(x, 16, window=w, return_complex=True, **kw), SIG, win)


def test_stft_of_a_complex_1d_signal():
    check(lambda m, x, w: m.stft(x, 8, hop_length=2, window=w, return_complex=True), Z.reshape(-1), np.ones(8))


@pytest.mark.parametrize("kw", [{}, {"hop_length": 3, "win_length": 12}, {"normalized": True},
                                {"length": 26}, {"length": 35}])
def test_istft_against_torch(kw):
    win = HANN if kw.get("win_length") == 12 else np.hanning(18)[1:17]
    spec = torch.stft(torch.tensor(SIG), 16, window=torch.tensor(win), return_complex=True,
                      hop_length=kw.get("hop_length"), win_length=kw.get("win_length")).numpy()
    check(lambda m, s, w: m.istft(s, 16, window=w, **kw), spec, win)


def test_stft_istft_round_trip_and_refusals():
    x = tt.tensor(SIG)
    spec = tt.stft(x, 16, window=tt.tensor(np.hanning(18)[1:17]), return_complex=True)
    back = tt.istft(spec, 16, window=tt.tensor(np.hanning(18)[1:17]), length=30)
    np.testing.assert_allclose(back.numpy(), SIG, atol=1e-12)
    with pytest.raises(RuntimeError, match="return_complex"):
        tt.stft(x, 16)
    with pytest.raises(RuntimeError, match="NOLA"):
        tt.istft(spec, 16, window=tt.tensor(np.hanning(16)), center=False)
