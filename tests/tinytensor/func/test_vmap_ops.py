"""tt.func.vmap against torch.func.vmap over OpInfo samples (float64): every op of the table
below, a few samples each, under several in_dims (all inputs batched along dim 0; the first
batched along its last dim and the others shared; the first shared and the others batched).
The table covers each family of batching rules (batching_rules.py) and the ops with rules of
their own; an op of the table must not take the per-example fallback (its warning is an
error here), except those listed in FALLBACK."""
import itertools
import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.opinfo.harness import (_to_tt, opinfo, sample_dtype, strided,
                                             tinytensor_function)

OPS = [
    # elementwise, with broadcasting between batched and shared inputs of different ranks
    "add", "mul", "sub", "div.no_rounding_mode", "pow", "sin", "exp", "tanh", "sigmoid", "abs", "maximum",
    "where", "clamp", "lerp", "atan2", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.relu", "isnan", "erf",
    # reductions and dim-taking ops
    "sum", "mean", "prod", "amax", "amin", "argmax", "std", "var", "logsumexp", "norm",
    "cumsum", "softmax", "log_softmax", "sort", "all",
    # movement / views
    "reshape", "view", "permute", "transpose", "expand", "flip", "roll", "cat", "stack",
    "squeeze", "unsqueeze", "narrow", "tril", "diagonal", "repeat", "nn.functional.pad.constant",
    "split", "chunk", "flatten", "movedim", "__getitem__", "t",
    # own rules
    "matmul", "mm", "bmm", "mv", "einsum", "nn.functional.linear", "gather", "index_select",
    "scatter_add", "nn.functional.embedding", "nn.functional.cross_entropy",
    "nn.functional.layer_norm", "nn.functional.scaled_dot_product_attention",
    "nn.functional.conv2d", "nn.functional.conv1d", "linalg.inv", "linalg.det",
]
FALLBACK = {}   # op -> why it may take the per-example loop
# samples tinytensor refuses under vmap (with an error, never another answer)
SKIP = {
    # max_norm renormalises the weight in place: in-place ops on batched tensors are refused
    "nn.functional.embedding": lambda s: s.kwargs.get("max_norm") is not None,
}


def _never(sample):
    return False
CAP = 3
B = 2


def _perturbed(x, k):
    """The k-th example built from sample tensor x: floats moved a little, integers (indices)
    kept, so every example is a valid input."""
    if x.is_floating_point():
        g = torch.Generator().manual_seed(1000 + k)
        return (x.detach() + 0.25 * k * torch.randn(x.shape, generator=g, dtype=x.dtype))
    return x.detach().clone()


def _batch(arg, mode, state):
    """(batched torch argument, its in_dims tree) for one positional argument."""
    if isinstance(arg, torch.Tensor):
        i = state["n"]
        state["n"] += 1
        if mode == "all0":
            d = 0
        elif mode == "first_last":
            d = -1 if i == 0 else None
        else:   # "others"
            d = None if i == 0 else 0
        if d is None or arg.ndim == 0 and d == -1:
            if d is None:
                return arg.detach(), None
            d = 0
        dd = d % (arg.ndim + 1)
        return torch.stack([_perturbed(arg, k) for k in range(B)], dim=dd), dd
    if isinstance(arg, (list, tuple)) and arg and all(isinstance(a, torch.Tensor) for a in arg):
        pairs = [_batch(a, mode, state) for a in arg]
        return type(arg)(p[0] for p in pairs), type(arg)(p[1] for p in pairs)
    return arg, None


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [y for v in out for y in _flat(v)]
    return [out]


def _np(x):
    return x.detach().numpy() if isinstance(x, tt.Tensor) else x.detach().numpy()


def _check(name, op, fn, sample, mode):
    state = {"n": 0}
    pairs = [_batch(a, mode, state) for a in (sample.input, *sample.args)]
    args = [p[0] for p in pairs]
    dims = tuple(p[1] for p in pairs)
    if all(d is None or (isinstance(d, (list, tuple)) and all(x is None for x in d))
           for d in dims):
        return False
    kwargs = sample.kwargs
    try:
        expected = torch.func.vmap(lambda *a: op.op(*a, **kwargs), in_dims=dims)(*args)
    except Exception:   # noqa: BLE001 - torch itself does not vmap this sample: nothing to match
        return False
    memo = {}
    targs = _to_tt(args, memo)
    tkwargs = _to_tt(kwargs, memo)
    with warnings.catch_warnings():
        if name not in FALLBACK:
            warnings.filterwarnings("error", message="vmap: .*no batching rule")
        got = tt.func.vmap(lambda *a: fn(*a, **tkwargs), in_dims=dims)(*targs)
    exp, out = _flat(expected), _flat(got)
    assert len(exp) == len(out), f"{name}: {len(out)} outputs, torch has {len(exp)}"
    for e, o in zip(exp, out):
        o, e = _np(o), _np(e)
        assert o.shape == e.shape, f"{name} [{mode}]: shape {o.shape}, torch {e.shape}"
        np.testing.assert_allclose(o, e, rtol=1e-9, atol=1e-10, err_msg=f"{name} [{mode}]")
    return True


@pytest.mark.parametrize("name", OPS)
def test_vmap_matches_torch_func(name):
    name, _, variant = name.partition(".") if name.startswith(("div.",)) or name.endswith(
        ".constant") else (name, "", "")
    if name == "nn":   # nn.functional.pad.constant
        name, variant = "nn.functional.pad", "constant"
    op = opinfo(name, variant)
    fn = tinytensor_function(name)
    assert fn is not None, f"tinytensor has no {name}"
    # the first samples of sample_inputs only: generating all of them (reference_inputs too)
    # costs more than checking them
    first = itertools.islice(op.sample_inputs("cpu", sample_dtype(op, "float64"),
                                              requires_grad=False), 12)
    cases = [s for s in first if not SKIP.get(name, _never)(s)]
    cases = strided(cases, CAP, max_numel=2000)
    checked = 0
    for sample in cases:
        for mode in ("all0", "first_last", "others"):
            checked += _check(name, op, fn, sample, mode)
    assert checked, f"{name}: no sample could be checked"
