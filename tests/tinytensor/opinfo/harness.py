"""Run PyTorch's own operator database (OpInfo `op_db`) against tinytensor.

For one op name, every sample of `sample_inputs` and `reference_inputs` (the inputs torch
tests itself with) is converted to tinytensor, run through both libraries, and compared:
the forward values, and for differentiable ops the gradients of every input that requires
one, as vector-Jacobian products with the same random cotangents on both sides.

A sample tinytensor deliberately does not take must be listed in `unsupported.py` with the
reason, and tinytensor must refuse it with an error (never a different answer). A sample
that is neither equal nor a listed refusal fails the test with the sample's description.

    from tests.tinytensor.opinfo.harness import check_op
    check_op("take_along_dim")                  # tt.take_along_dim against torch
    check_op("masked.sum", dtype="float32")     # tt.masked.sum
"""
import functools

import numpy as np
import pytest
import torch

import tinytensor as tt
import tinytensor.functional as F

from .unsupported import refused_reason

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32}
# an op that takes complex dtypes only (imag, view_as_real) is drawn in the complex dtype of
# the run's precision (issue 23)
COMPLEX_DTYPES = {"float64": torch.complex128, "float32": torch.complex64}
# Ops whose values are random or uninitialised: only the shapes and dtypes must agree
# (their distributions are tested in the random-op tests, seeded by tt.manual_seed).
UNVALUED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
            "new_empty_strided", "rand_like", "randn", "randn_like", "randint",
            "randint_like", "multinomial", "bernoulli", "normal", "uniform", "exponential",
            "geometric", "cauchy", "log_normal", "nn.functional.dropout",
            "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
            "nn.functional.dropout1d", "nn.functional.dropout2d", "nn.functional.dropout3d",
            "nn.functional.rrelu"}
# ... and single samples of other ops that draw random numbers
RANDOM_SAMPLES = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0) > 0,
    # (query, key, value, E, heads, in_proj_w, in_proj_b, bias_k, bias_v, add_zero_attn, dropout_p)
    "nn.functional.multi_head_attention_forward":
        lambda s: s.args[9] > 0 and s.kwargs.get("training", True),
}
# OpInfo entries whose `op` is a lambda that reorders torch's arguments: the same on our side
ADAPTERS = {
    "einsum": lambda tensors, equation: tt.einsum(equation, *tensors),
    "where": lambda x, condition, other, **k: tt.where(condition, x, other, **k),
    "zero_": lambda x: tt.zero_(x.clone()),
    "nn.functional.embedding": lambda weight, idx, **k: F.embedding(idx, weight, **k),
    "nn.functional.embedding_bag": lambda weight, idx, **k: F.embedding_bag(idx, weight, **k),
    # the sample's distance_function is a torch.nn.PairwiseDistance: tinytensor's twin
    "nn.functional.triplet_margin_with_distance_loss": lambda a, p, n, distance_function=None, **k:
        F.triplet_margin_with_distance_loss(a, p, n, distance_function=None if distance_function
                                            is None else _pairwise_twin(distance_function), **k),
    "polygamma": lambda x, n, **k: tt.polygamma(n, x, **k),
    "special.polygamma": lambda x, n, **k: tt.special.polygamma(n, x, **k),
}


def _seeded_samples(input, n):
    """The samples torch's fractional_max_pool draws under OpInfo's wrapper_set_seed
    (manual_seed(42), then rand(N, C, n) in the input's dtype), as tinytensor's argument."""
    nb = input.shape[0] if input.ndim == n + 2 else 1
    with torch.random.fork_rng():
        torch.manual_seed(42)
        u = torch.rand(nb, input.shape[-n - 1], n, dtype=TORCH_DTYPES[input.dtype.name])
    return tt.tensor(u.numpy())


for _n in (2, 3):
    ADAPTERS[f"nn.functional.fractional_max_pool{_n}d"] = (
        lambda input, *a, _n=_n, **k: getattr(F, f"fractional_max_pool{_n}d")(
            input, *a, **{"_random_samples": _seeded_samples(input, _n), **k}))


def _pairwise_twin(module):
    return lambda x1, x2: F.pairwise_distance(x1, x2, module.norm, module.eps, module.keepdim)
# OpInfo entries whose `op` is an in-place Tensor method under another name (normal's
# "in_place" variant is Tensor.normal_, "uniform" is Tensor.uniform_): resolved to it
VARIANT_METHODS = {("normal", "in_place"): "normal_"}
# variants whose `op` is a lambda around the named op: the same lambda on our side
VARIANT_ADAPTERS = {
    ("linalg.pinv", "singular"): lambda a, b: tt.linalg.pinv(a @ b.mT),
    ("linalg.lstsq", "grad_oriented"): lambda a, b, driver: tt.linalg.lstsq(a, b, driver=driver)[:2],
    ("svd_lowrank", ""): lambda a, b, **k: tt.svd_lowrank(a @ b.mT, **k),
    ("pca_lowrank", ""): lambda a, b, **k: tt.pca_lowrank(a @ b.mT, **k),
}
NAMED_METHODS = {"uniform": "uniform_", "exponential": "exponential_", "geometric": "geometric_",
                 "cauchy": "cauchy_", "log_normal": "log_normal_"}


@functools.lru_cache(maxsize=None)
def op_db():
    """{(name, variant): OpInfo}; importing op_db takes a few seconds, so only once."""
    pytest.importorskip("expecttest")           # torch.testing._internal needs it
    from torch.testing._internal.common_methods_invocations import op_db as db
    return {(op.name, op.variant_test_name): op for op in db}


def opinfo(name, variant=""):
    try:
        return op_db()[name, variant]
    except KeyError:
        raise KeyError(f"op_db has no OpInfo named {name!r} (variant {variant!r})") from None


def tinytensor_function(name):
    """The tinytensor callable for an op_db name: `tt.<name>`, with `nn.functional.*`
    resolved in `tinytensor.functional`, dotted names (`linalg.norm`, `masked.sum`) followed, and
    the names torch has only as a Tensor method (`float`, `index_put_`) taken as one."""
    if name in ADAPTERS:
        return ADAPTERS[name] if tinytensor_function_plain(name) is not None else None
    if name in NAMED_METHODS:
        method = NAMED_METHODS[name]
        return (lambda x, *a, **k: getattr(x, method)(*a, **k)) if hasattr(tt.Tensor, method) else None
    return tinytensor_function_plain(name)


def tinytensor_function_plain(name):
    if "." not in name and not callable_function(torch, name):
        method = getattr(tt.Tensor, name, None)
        if isinstance(method, property):                  # x.mT, x.H
            return lambda x: getattr(x, name)
        return (lambda x, *a, **k: method(x, *a, **k)) if method is not None else None
    root, path = ((F, name.split(".")[2:]) if name.startswith("nn.functional.")
                  else (tt, name.split(".")))
    fn = root
    for part in path:
        fn = getattr(fn, part, None)
        if fn is None:
            return None
    return fn


def callable_function(module, name):
    f = getattr(module, name, None)
    return callable(f) and not isinstance(f, torch.dtype)


# ---------------------------------------------------------------- conversion

def _fresh_leaves(x, seen):
    """The sample with every tensor that requires grad made a fresh leaf (values kept, one
    leaf per tensor object so a tensor passed twice stays one). OpInfo builds some
    non-contiguous inputs as views that torch's autograd does not connect to their base,
    which would make torch's own gradient of them None."""
    if isinstance(x, torch.Tensor):
        if not x.requires_grad:
            return x
        if id(x) not in seen:
            seen[id(x)] = (x, x.detach().clone().requires_grad_())
        return seen[id(x)][1]
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields") and not isinstance(x, torch.Size):
        return type(x)(_fresh_leaves(v, seen) for v in x)
    if isinstance(x, dict):
        return {k: _fresh_leaves(v, seen) for k, v in x.items()}
    return x


def _to_tt(x, memo):
    """A torch sample argument as tinytensor takes it; `memo` maps each torch tensor's id
    to (it, its tinytensor twin), so a tensor passed twice is one tensor here too."""
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:   # _np: torch has no NumPy bfloat16, ml_dtypes' array is one
            memo[id(x)] = (x, tt.tensor(_np(x), requires_grad=x.requires_grad))
        return memo[id(x)][1]
    if isinstance(x, torch.dtype):
        return getattr(tt, str(x).removeprefix("torch."))
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to_tt(v, memo) for v in x)
    if isinstance(x, dict):
        return {k: _to_tt(v, memo) for k, v in x.items()}
    return x


def _flat(out):
    """An op's result as a flat list of tensors and plain values (namedtuples included)."""
    if isinstance(out, (list, tuple)):
        return [y for v in out for y in _flat(v)]
    return [out]


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return (x.float().numpy().astype("bfloat16") if x.dtype == torch.bfloat16 and _ml_dtypes()
                else x.resolve_conj().resolve_neg().numpy(force=True))  # lazy conj, ZeroTensor
    if isinstance(x, tt.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def _tol(dtype):
    return (1e-7, 1e-7) if dtype == "float64" else (1e-4, 1e-5)


def _close(actual, expected, what, dtype, values=True, reference=None):
    """Equal for integers and bools; for floats within the dtype's tolerance of torch, or,
    given torch's float64 `reference`, no further from it than twice torch's own distance
    plus a few ulps of the output's largest magnitude (cancellation near zero)."""
    if actual is NotImplemented or expected is NotImplemented:  # Tensor.__rsub__(2.5, t), unbound
        if actual is not expected:
            raise AssertionError(f"{what}: {actual!r} where torch gives {expected!r}")
        return
    a, e = _np(actual), _np(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} != torch's {e.shape}")
    if a.dtype != e.dtype:
        raise AssertionError(f"{what}: dtype {a.dtype} != torch's {e.dtype}")
    if not values:
        return
    if a.dtype.kind in "biu" or e.dtype.kind in "biu" or a.dtype == bool:
        if not np.array_equal(a, e):
            raise AssertionError(f"{what}: {a} != torch's {e}")
        return
    # a float32 array inside a float64 run (cov's float32 aweights) at float32's tolerance:
    # 1e-7 is below float32's own epsilon
    rtol, atol = _tol("float32" if a.dtype in (np.float32, np.complex64) else dtype)
    bad = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any() and reference is not None:
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
        r = _np(reference).astype(wide)
        a64, e64 = a.astype(wide), e.astype(wide)
        finite = np.abs(r[np.isfinite(r)])
        floor = 8 * np.finfo(a.dtype).eps * (finite.max() if finite.size else 0.0)
        bad &= ~(np.abs(a64 - r) <= 2 * np.abs(e64 - r) + floor)
    if bad.any():
        raise AssertionError(f"{what}: {int(bad.sum())} of {a.size} differ, first "
                             f"{a[bad].ravel()[:3]} vs torch's {e[bad].ravel()[:3]}")


def _ml_dtypes():
    import ml_dtypes  # noqa: F401 - registers numpy's "bfloat16"
    return True


# ---------------------------------------------------------------- one sample

def _describe(sample):
    def short(x):
        if isinstance(x, torch.Tensor):
            return f"tensor{tuple(x.shape)}:{str(x.dtype).removeprefix('torch.')}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(short(v) for v in x) + "]"
        return repr(x)
    kw = "".join(f", {k}={short(v)}" for k, v in sample.kwargs.items())
    return f"({short(sample.input)}{''.join(', ' + short(a) for a in sample.args)}{kw})"


def _differentiable(outs):
    return [i for i, o in enumerate(outs)
            if isinstance(o, torch.Tensor) and o.requires_grad and (o.dtype.is_floating_point or
                                                                     o.dtype.is_complex)]


def _widened(x, seen):
    """A float32 sample in float64, leaf for leaf: the reference float32 results are judged by."""
    if isinstance(x, torch.Tensor):
        if x.dtype not in (torch.float32, torch.complex64):
            return x
        if id(x) not in seen:
            wide = torch.float64 if x.dtype == torch.float32 else torch.complex128
            seen[id(x)] = x.detach().to(wide).requires_grad_(x.requires_grad)
        return seen[id(x)]
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields") and not isinstance(x, torch.Size):
        return type(x)(_widened(v, seen) for v in x)
    if isinstance(x, dict):
        return {k: _widened(v, seen) for k, v in x.items()}
    return x


def _torch_run(op, args, kwargs, leaves, cotangents):
    """torch's outputs, and the gradients of `leaves` for `cotangents` (one per output
    index in the dict) or None when there is nothing to differentiate."""
    outs = _flat(op.op(*args, **kwargs))
    if not cotangents or not leaves:
        return outs, None
    idx = list(cotangents)
    grads = torch.autograd.grad([outs[i] for i in idx], leaves,
                                [torch.tensor(cotangents[i], dtype=outs[i].dtype) for i in idx],
                                allow_unused=True)
    return outs, [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]


def check_sample(op, fn, sample, dtype, grad=True):
    """Compare one sample; raise AssertionError describing the first difference. Ops in
    UNVALUED are compared by shape and dtype only, without gradients. float32 results are
    judged against torch's float64 answer: within twice torch's own float32 error of it."""
    values = op.name not in UNVALUED and not RANDOM_SAMPLES.get(op.name, lambda s: False)(sample)
    grad = grad and values and op.supports_autograd
    memo, seen = {}, {}
    tt_args = _to_tt((sample.input, *sample.args), memo)
    tt_kwargs = _to_tt(sample.kwargs, memo)
    args = _fresh_leaves((sample.input, *sample.args), seen)
    kwargs = _fresh_leaves(sample.kwargs, seen)
    leaves = [(seen[i][1], t) for i, (x, t) in memo.items() if x.requires_grad]
    expected = _flat(op.op(*args, **kwargs))
    actual = _flat(fn(*tt_args, **tt_kwargs))
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} outputs, torch gives {len(expected)}")
    gen = np.random.default_rng(0)
    cot = {i: _cotangent(gen, expected[i]) for i in (_differentiable(expected) if grad else ())}
    try:
        t_grads = _torch_run(op, args, kwargs, [t for t, _ in leaves], cot)[1] if cot else None
    except RuntimeError as e:   # torch has no gradient to compare with (remainder(number, t))
        if "derivative for" not in str(e) or "not implemented" not in str(e):
            raise
        t_grads = cot = None
    ref_outs = ref_grads = None
    if dtype == "float32" and values:
        wide = {}
        w_args, w_kwargs = _widened(args, wide), _widened(kwargs, wide)
        ref_outs, ref_grads = _torch_run(op, w_args, w_kwargs,
                                         [wide.get(id(t), t) for t, _ in leaves], cot)
    for i, (a, e) in enumerate(zip(actual, expected)):
        _close(a, e, f"output {i}", dtype, values, ref_outs and ref_outs[i])
    if t_grads is None:
        return
    # an output tinytensor does not differentiate (floor division) must have a zero gradient
    kept = [(actual[i], c) for i, c in cot.items()
            if isinstance(actual[i], tt.Tensor) and actual[i].requires_grad]
    a_grads = tt.grad([o for o, _ in kept], [t for _, t in leaves],
                      [tt.tensor(c, dtype=o.dtype) for o, c in kept],
                      allow_unused=True) if kept else [None] * len(leaves)
    for i, (a, e) in enumerate(zip(a_grads, t_grads)):
        a = tt.zeros_like(leaves[i][1]) if a is None else a
        _close(a, e, f"gradient of input {i}", dtype, True, ref_grads and ref_grads[i])


def _cotangent(gen, out):
    c = gen.standard_normal(tuple(out.shape))
    return c + 1j * gen.standard_normal(tuple(out.shape)) if out.dtype.is_complex else c


def sample_dtype(op, dtype):
    """The torch dtype to draw samples in: `dtype`, or for an op that does not take it
    (bitwise ops, integer-only ops, complex-only ops) the first of int64, bool and the
    complex dtype of that precision that it takes."""
    for d in (TORCH_DTYPES[dtype], torch.int64, torch.bool, COMPLEX_DTYPES[dtype]):
        if d in op.supported_dtypes("cpu"):
            return d
    return TORCH_DTYPES[dtype]


def samples(name, variant="", dtype="float64", grad=True):
    """OpInfo's `sample_inputs` and `reference_inputs` of one op, in one list."""
    op = opinfo(name, variant)
    tdtype = sample_dtype(op, dtype)
    rg = grad and op.supports_autograd and (tdtype.is_floating_point or tdtype.is_complex)
    out = []
    for make in (op.sample_inputs, op.reference_inputs if op.reference_inputs_func else None):
        if make is None:
            continue
        try:
            out += list(make("cpu", tdtype, requires_grad=rg))
        except (RuntimeError, ValueError):  # a generator that mixes in integer tensors with grad
            out += list(make("cpu", tdtype, requires_grad=False))
    return out


def _numel(x):
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_numel(v) for v in x)
    if isinstance(x, dict):
        return sum(_numel(v) for v in x.values())
    return 0


def strided(cases, cap, max_numel=None):
    """At most `cap` of `cases` with at most `max_numel` elements in all, spread evenly over
    the list (OpInfo lists its simple samples first and its edge cases later: a prefix
    would miss the edge cases; its largest samples test torch's vector loops, and cost most
    of the time)."""
    if max_numel is not None:
        cases = [c for c in cases if _numel((c.input, c.args, c.kwargs)) <= max_numel]
    if cap is None or len(cases) <= cap:
        return cases
    return [cases[i * len(cases) // cap] for i in range(cap)]


def _refusal_problem(fn, sample, short, reason):
    """None if tinytensor refuses the sample with an error naming the op, else what is wrong."""
    try:
        fn(*_to_tt((sample.input, *sample.args), {}), **_to_tt(sample.kwargs, {}))
    except Exception as e:  # noqa: BLE001 - any error, as long as it names the op
        return None if short in str(e) else f"refused without naming {short}: {e}"
    return f"listed as unsupported ({reason}) but tinytensor took it: remove it from unsupported.py"


def check_op(name, fn=None, variant="", dtype="float64", grad=True, cap=None, max_numel=None):
    """Run every OpInfo sample of `name`; fail on any difference from torch, on a refusal
    not listed in unsupported.py, on a refusal whose message does not name the op, or on a
    listed refusal tinytensor does not raise. Returns (passed, refused, total)."""
    op = opinfo(name, variant)
    if fn is None and (name, variant) in VARIANT_METHODS:
        method = VARIANT_METHODS[name, variant]
        fn = lambda x, *a, **k: getattr(x, method)(*a, **k)  # noqa: E731
    if fn is None and (name, variant) in VARIANT_ADAPTERS and tinytensor_function(name) is not None:
        fn = VARIANT_ADAPTERS[name, variant]
    fn = fn or tinytensor_function(name)
    if fn is None:
        raise AssertionError(f"tinytensor has no {name}")
    short = name.rsplit(".", 1)[-1]
    cases = strided(samples(name, variant, dtype, grad), cap, max_numel)
    failures, refused = [], 0
    for sample in cases:
        reason = refused_reason(name, sample)
        if reason is not None:     # a refusal needs no answer from torch: tinytensor must raise
            problem = _refusal_problem(fn, sample, short, reason)
            if problem:
                failures.append(f"{_describe(sample)}: {problem}")
            else:
                refused += 1
            continue
        try:
            check_sample(op, fn, sample, dtype, grad)
        except AssertionError as e:
            failures.append(f"{_describe(sample)}: {e}")
        except Exception as e:  # noqa: BLE001 - a refusal must be listed to count as one
            failures.append(f"{_describe(sample)}: {type(e).__name__}: {e}")
    if failures:
        raise AssertionError(f"{name} [{dtype}]: {len(failures)} of {len(cases)} samples "
                             f"fail, {refused} refused:\n  " + "\n  ".join(failures[:10]))
    return len(cases) - refused, refused, len(cases)
