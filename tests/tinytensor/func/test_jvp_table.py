"""Every op whose Function has a `jvp` rule, against torch.func.jvp on OpInfo's samples
(tests/tinytensor/opinfo/harness.py), float64.

The list is not written here: the Function classes with a rule are found by walking
Function's subclasses, and each is matched to the op_db entries of its name (`sin`, or
`nn.functional.gelu`, `special.x`, `linalg.x`, or an alias below), so a rule added to any op
file is tested the moment it exists. A few samples per op (strided, small), random tangents.
"""
import importlib
import pkgutil

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.func as ttf
from tinytensor.core.function import Function

from ..opinfo.harness import _close, _numel, _to_tt, op_db, opinfo, strided, tinytensor_function
from ..opinfo.unsupported import refused_reason

CAP, MAX_NUMEL = 3, 300
# Function name -> op_db names beyond the plain ones tried for every name
ALIASES = {
    "getitem": ["__getitem__"], "pad": ["nn.functional.pad"], "im2_col": ["nn.functional.unfold"],
    "col2_im": ["nn.functional.fold"], "div": ["true_divide"], "norm": ["linalg.vector_norm"],
    "clamp": ["clamp_min", "clamp_max"], "reshape": ["view", "flatten", "unflatten"],
    "permute": ["transpose", "movedim", "t"], "repeat": ["tile"], "gather": ["take_along_dim"],
    "amax": ["max"], "frexp_mantissa": ["frexp"], "cat": ["stack", "hstack"],
    "getitem_copy": ["__getitem__"], "index_add": ["index_add"], "expand": ["expand", "broadcast_to"],
    "sum": ["mean"], "std": ["var"], "matmul": ["mm", "bmm", "mv", "addmm"],
}


def _functions_with_rules():
    import tinytensor.ops as ops
    for m in pkgutil.iter_modules(ops.__path__):
        importlib.import_module(f"tinytensor.ops.{m.name}")
    seen, stack = set(), list(Function.__subclasses__())
    while stack:
        c = stack.pop()
        if c not in seen:
            seen.add(c)
            stack += c.__subclasses__()
    from tinytensor.ops.elementwise import _Predicate   # bool and integer results: no tangent
    return sorted({c.name for c in seen if c.jvp is not None and not c.name.startswith("_")
                   and not issubclass(c, _Predicate)})


def _entries():
    try:
        db = op_db()
    except pytest.skip.Exception:
        return []
    names = {}
    by_name = {}
    for key in db:
        by_name.setdefault(key[0], []).append(key)
    for n in _functions_with_rules():
        for cand in [n, f"nn.functional.{n}", f"special.{n}", f"linalg.{n}"] + ALIASES.get(n, []):
            for key in by_name.get(cand, ()):   # every variant (div.no_rounding_mode, ...)
                if tinytensor_function(key[0]) is not None:
                    names[key] = n
    return sorted(names)


def _floating(x):
    return isinstance(x, torch.Tensor) and x.dtype in (torch.float64,)


def _flat_args(sample):
    """(input, args, kwargs) with each float64 tensor taken out as a primal."""
    leaves = []

    def walk(x):
        if _floating(x):
            leaves.append(x)
            return ("leaf", len(leaves) - 1)
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields") and not isinstance(x, torch.Size):
            return (type(x), [walk(v) for v in x])
        if isinstance(x, dict):
            return (dict, {k: walk(v) for k, v in x.items()})
        return ("const", x)
    spec = walk(((sample.input,) + tuple(sample.args), dict(sample.kwargs)))
    return leaves, spec


def _rebuild(spec, leaves, const):
    kind, v = spec
    if kind == "leaf":
        return leaves[v]
    if kind == "const":
        return const(v)
    if kind is dict:
        return {k: _rebuild(s, leaves, const) for k, s in v.items()}
    return kind(_rebuild(s, leaves, const) for s in v)


def _float_outputs(out):
    if isinstance(out, (list, tuple)):
        return [y for v in out for y in _float_outputs(v)]
    return [out] if isinstance(out, (torch.Tensor, tt.Tensor)) and out.is_floating_point() else []


def _size(sample):
    return _numel((sample.input, sample.args, sample.kwargs))


def _reverse_jt(f, primals, tangents, k):
    """J t for output k, from torch's reverse-mode Jacobian (one backward per output entry)."""
    jac = torch.autograd.functional.jacobian(lambda *ps: f(*ps)[k], tuple(primals))
    out = f(*primals)[k]
    total = torch.zeros_like(out)
    for j, t in zip(jac, tangents):
        total += (j.reshape(out.numel(), t.numel()) @ t.reshape(-1)).reshape(out.shape)
    return total


# torch differentiates these losses in neither mode with respect to their class weights
# (reverse mode refuses; forward mode silently drops the weights' tangent); tinytensor does
# in both, so the weights get no tangent here and tinytensor's own derivative with respect to
# them is checked against finite differences in test_jvp_nn_ops.py
CONSTANT_WEIGHT = {"nn.functional.cross_entropy", "nn.functional.nll_loss"}


@pytest.mark.parametrize("name, variant", _entries(),
                         ids=lambda v: v if isinstance(v, str) and v else "-")
def test_jvp_equals_torch_func(name, variant):
    op = opinfo(name, variant)
    fn = tinytensor_function(name)
    # sample_inputs only: the reference inputs of a binary op are thousands of pairs
    torch.manual_seed(0)
    # the generator itself: OpInfo.sample_inputs wraps it in a tracker that walks the call
    # stack with inspect for every sample (0.3 s an op under pytest)
    every = list(op.sample_inputs_func(op, "cpu", torch.float64, False))
    cases = strided(every, CAP, MAX_NUMEL) or sorted(every, key=_size)[:2]  # unary ops: all large
    gen = np.random.default_rng(0)
    compared = 0
    for sample in cases:
        if refused_reason(name, sample) is not None:
            continue
        leaves, spec = _flat_args(sample)
        if not leaves or not any(p.numel() for p in leaves):
            continue   # no entry to perturb (var of an empty tensor: 0/0, torch's formula says 0)
        tangents = [torch.tensor(gen.standard_normal(tuple(p.shape))) for p in leaves]
        weight = sample.kwargs.get("weight") if name in CONSTANT_WEIGHT else None
        for i, p in enumerate(leaves):
            if p is weight:   # torch's forward formula drops the class weights' tangent
                tangents[i] = torch.zeros_like(tangents[i])

        def f_torch(*ps):
            (args, kwargs) = _rebuild(spec, ps, lambda c: c)
            return tuple(_float_outputs(op.op(*args, **kwargs)))
        try:
            expected = torch.func.jvp(f_torch, tuple(leaves), tuple(tangents))
        except (RuntimeError, NotImplementedError, TypeError):
            continue   # torch has no forward-mode formula here: nothing to compare with
        memo = {}
        tt_leaves = [tt.tensor(p.numpy()) for p in leaves]

        def f_tt(*ps):
            (args, kwargs) = _rebuild(spec, ps, lambda c: _to_tt(c, memo))
            return tuple(_float_outputs(fn(*args, **kwargs)))
        try:
            f_tt(*tt_leaves)
        except Exception:  # noqa: BLE001 - a forward tinytensor refuses: opinfo's tests own it
            continue
        try:
            actual = ttf.jvp(f_tt, tuple(tt_leaves), tuple(tt.tensor(t.numpy()) for t in tangents))
        except RuntimeError as e:
            # an op torch gives no derivative (its output needs no grad, so torch.func.jvp
            # answers zeros) refuses forward mode as it refuses reverse mode
            if "derivative" not in str(e) or "not implemented" not in str(e):
                raise
            assert all(not bool(t.any()) for t in expected[1]), (name, str(e))
            compared += 1
            continue
        assert len(actual[1]) == len(expected[1]), (name, sample)
        for k, (a, e) in enumerate(zip(actual[1], expected[1])):
            what = f"{name}: tangent of output {k} for sample {sample}"
            try:
                _close(a, e, what, "float64")
            except AssertionError:
                # torch's forward formula is not always its most accurate answer (its
                # logcumsumexp jvp is 1e-6 off where its reverse mode is exact): J t from
                # torch's reverse-mode Jacobian decides
                _close(a, _reverse_jt(f_torch, leaves, tangents, k), what, "float64")
        compared += 1
    if not compared:
        pytest.skip(f"{name}: no sample torch.func.jvp differentiates")
