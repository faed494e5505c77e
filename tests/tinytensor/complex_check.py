"""One helper for complex tests (issue 23): an op against torch on complex/real inputs, its
values, dtype, vector-Jacobian product with a complex cotangent, and the gradient of that
gradient, in float64/complex128."""
import numpy as np
import torch

import tinytensor as tt


def crandn(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def rrandn(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def _cot(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        c = c + 1j * rng.standard_normal(shape)
    return c.astype(dtype)


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().resolve_conj().resolve_neg().numpy(force=True)
    return x.detach().numpy()


def _close(a, b, what, atol=1e-9, rtol=1e-7):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != torch's {b.shape}"
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=what)


def check(fn, *arrays, double=True, atol=1e-9, rtol=1e-7):
    """fn(lib, *tensors) in tinytensor and torch: values, dtypes, first and second order."""
    tts = [tt.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays]
    ths = [torch.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays]
    out_tt, out_th = fn(tt, *tts), fn(torch, *ths)
    assert out_tt.dtype.name == str(out_th.dtype).removeprefix("torch."), \
        f"dtype {out_tt.dtype.name} != torch's {out_th.dtype}"
    _close(_np(out_tt), _np(out_th), "value", atol, rtol)
    diff = [i for i, a in enumerate(arrays) if a.dtype.kind in "fc"]
    if not diff or not out_th.requires_grad:
        return out_tt
    c = _cot(out_th.shape, _np(out_th).dtype, 7)
    g_tt = tt.grad(out_tt, [tts[i] for i in diff], grad_outputs=tt.tensor(c), create_graph=double,
                   allow_unused=True)
    g_th = torch.autograd.grad(out_th, [ths[i] for i in diff], grad_outputs=torch.tensor(c),
                               create_graph=double, allow_unused=True)
    for i, a, b in zip(diff, g_tt, g_th):
        if b is None:
            assert a is None or not np.any(_np(a)), f"gradient of input {i}: torch's is None"
            continue
        assert a is not None, f"gradient of input {i} is None, torch's is not"
        assert a.dtype.name == str(b.dtype).removeprefix("torch."), \
            f"gradient {i} dtype {a.dtype.name} != torch's {b.dtype}"
        _close(_np(a), _np(b), f"gradient of input {i}", atol, rtol)
    if not double:
        return out_tt
    live = [(a, b) for a, b in zip(g_tt, g_th) if b is not None and b.requires_grad]
    for k, (a, b) in enumerate(live):
        if not a.requires_grad:   # ours is constant in the inputs: torch's must be too
            c = torch.tensor(_cot(b.shape, _np(b).dtype, 11 + k))
            for h in torch.autograd.grad(b, [ths[i] for i in diff], c, allow_unused=True,
                                         retain_graph=True):
                assert h is None or not np.any(_np(h)), "a second-order gradient torch has is missing"
    live = [(a, b) for a, b in live if a.requires_grad]
    if not live:
        return out_tt
    cs = [_cot(b.shape, _np(b).dtype, 11 + k) for k, (_, b) in enumerate(live)]
    gg_tt = tt.grad([a for a, _ in live], [tts[i] for i in diff],
                    grad_outputs=[tt.tensor(c) for c in cs], allow_unused=True)
    gg_th = torch.autograd.grad([b for _, b in live], [ths[i] for i in diff],
                                grad_outputs=[torch.tensor(c) for c in cs], allow_unused=True)
    for i, a, b in zip(diff, gg_tt, gg_th):
        a_np = np.zeros(arrays[i].shape) if a is None else _np(a)
        b_np = np.zeros(arrays[i].shape) if b is None else _np(b)
        _close(a_np, b_np, f"second-order gradient of input {i}", atol, rtol)
    return out_tt
