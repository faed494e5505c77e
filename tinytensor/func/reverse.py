"""Reverse mode over the tape: vjp, grad, grad_and_value, jacrev.

Each differentiated input is replaced by a tensor of the transform's own (a fresh leaf, or an
alias of an input that is already on a tape), so nested transforms differentiate with
respect to their own inputs only. The gradient is built as a graph (create_graph) whenever
something outside can still differentiate it: an outer grad/vjp transform, an input on a tape.
Inside an open jvp level the backward runs as tinytensor ops (core/engine.py), so a gradient
carries its tangent (forward-over-reverse)."""
import contextlib

from ..core.engine import run_backward
from ..core.grad_mode import STATE, enable_grad
from ..core.tensor import Tensor
from . import _tree
from ._alias import alias
from ._common import argnums_tuple, fname, floating, split_aux, tensors_of


class _Depth:
    """How many grad/vjp transforms are running: inside one, every gradient is a graph."""
    n = 0

    def __enter__(self):
        _Depth.n += 1

    def __exit__(self, *exc):
        _Depth.n -= 1
        return False


def track(x, api, f, what):
    """x as this transform's input: a fresh leaf that requires grad (keeping x's tangents), or
    an alias on the tape when x is on one already (so an outer transform sees through it)."""
    floating(x, what, api, f)
    if x.requires_grad and STATE.grad_enabled:
        return alias(x)
    t = x.detach().requires_grad_()   # detach: the same memory and version counter
    t._fw = x._fw
    return t


def _zeros(x):
    return Tensor._zeros_meta(tuple(x.shape), x.dtype, x._device)


class _Prepared:
    """f run on tracked inputs: the outputs, and what backward needs."""

    def __init__(self, api, f, args, kwargs, nums, has_aux):
        self.graph = STATE.grad_enabled and (_Depth.n > 0 or any(
            x.requires_grad for n in nums for x in _tree.flatten(args[n])[0] if isinstance(x, Tensor)))
        args = list(args)
        self.inputs, self.specs = [], []
        with enable_grad(), _Depth():
            for n in nums:
                leaves, spec = tensors_of(args[n], f"argument {n}", api, f)
                tracked = [track(x, api, f, f"argument {n}") for x in leaves]
                self.inputs.append(tracked)
                self.specs.append(spec)
                args[n] = _tree.unflatten(spec, tracked)
            out = f(*args, **kwargs)
        self.out, self.aux = split_aux(out, has_aux, api, f)

    def result(self, tree):
        """A tree of outputs as the caller gets them: off the transform's private tape at top
        level (an outer transform still needs the graph); tangents are kept."""
        if self.graph or tree is None:
            return tree
        leaves, spec = _tree.flatten(tree)
        return _tree.unflatten(spec, [_detached(x) if isinstance(x, Tensor) else x for x in leaves])

    def backward(self, outs, cots, retain=True):
        flat = [x for xs in self.inputs for x in xs]
        live = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        if live:
            graph = self.graph or any(c.requires_grad for _, c in live)
            with _Depth() if graph else contextlib.nullcontext():
                gs = run_backward([o for o, _ in live], [c for _, c in live], retain_graph=retain,
                                  create_graph=graph, inputs=flat, allow_unused=True)
        else:
            gs = [None] * len(flat)
        gs = [g if g is not None else _zeros(x) for g, x in zip(gs, flat)]
        res, k = [], 0
        for xs, spec in zip(self.inputs, self.specs):
            res.append(_tree.unflatten(spec, gs[k:k + len(xs)]))
            k += len(xs)
        return res


def _detached(x):
    t = x.detach()
    t._fw = x._fw
    return t


def _scalar_out(out, api, f):
    if not isinstance(out, Tensor):
        raise RuntimeError(f"{api}({fname(f)}): expected f(*args) to return a scalar Tensor, got "
                           f"{type(out).__name__}")
    if out.numel() != 1:
        raise RuntimeError(f"{api}({fname(f)}): expected f(*args) to return a scalar Tensor, got "
                           f"a tensor of shape {tuple(out.shape)}")
    if not (out.is_floating_point() or out.is_complex()):
        raise RuntimeError(f"{api}({fname(f)}): expected a floating-point output, got "
                           f"{out.dtype.name}")


def grad_and_value(func, argnums=0, has_aux=False, _api="grad_and_value"):
    """A function returning (gradient of func w.r.t. argnums, func's value)."""
    api = _api

    def wrapper(*args, **kwargs):
        single, nums = argnums_tuple(argnums, len(args), api, func)
        prep = _Prepared(api, func, args, kwargs, nums, has_aux)
        _scalar_out(prep.out, api, func)
        one = Tensor._ones_meta(tuple(prep.out.shape), prep.out.dtype, prep.out._device)
        # an outer transform differentiates through this forward again: keep it then
        grads = prep.backward([prep.out], [one], retain=prep.graph)
        g = grads[0] if single else tuple(grads)
        value, aux = prep.result(prep.out), prep.result(prep.aux)
        return (g, (value, aux)) if has_aux else (g, value)
    wrapper.__name__ = f"grad_and_value_{getattr(func, '__name__', 'f')}"
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of scalar-valued func w.r.t. argument(s) argnums."""
    gv = grad_and_value(func, argnums, has_aux, _api="grad")

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    wrapper.__name__ = f"grad_{getattr(func, '__name__', 'f')}"
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn): vjp_fn(cotangents) gives one gradient per primal; it may be
    called many times."""
    api = "vjp"
    if not primals:
        raise RuntimeError(f"vjp({fname(func)}): expected at least one primal")
    prep = _Prepared(api, func, primals, {}, tuple(range(len(primals))), has_aux)
    outs, ospec = _tree.flatten(prep.out)
    for o in outs:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp({fname(func)}): expected outputs to be Tensors, got "
                               f"{type(o).__name__}")

    def vjp_fn(cotangents):
        cots, cspec = _tree.flatten(cotangents)
        if cspec != ospec:
            raise RuntimeError(f"vjp_fn ({fname(func)}): expected cotangents with the structure of "
                               f"the outputs, {_tree.structure(ospec)}, got {_tree.structure(cspec)}")
        for k, (o, c) in enumerate(zip(outs, cots)):
            if not isinstance(c, Tensor) or tuple(c.shape) != tuple(o.shape):
                got = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
                raise RuntimeError(f"vjp_fn ({fname(func)}): cotangent {k} must be a Tensor of shape "
                                   f"{tuple(o.shape)} (that output's shape), got {got}")
        return tuple(prep.backward(outs, cots, retain=True))
    out = prep.result(prep.out)
    return (out, vjp_fn, prep.result(prep.aux)) if has_aux else (out, vjp_fn)


def _check_chunk(chunk_size, api, f):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{api}({fname(f)}): chunk_size should be a positive int or None, got "
                         f"{chunk_size!r}")


def jacobian_tree(out_leaves, ospec, per_input, inputs_specs, single):
    """rows[o][i]: the Jacobian of output leaf o w.r.t. input leaf i (flat over argnums), into
    torch.func's nesting: the outputs' tree, each leaf the argnums' tree of Jacobians."""
    res = []
    for o_rows in per_input:
        by_arg, k = [], 0
        for n_leaves, spec in inputs_specs:
            by_arg.append(_tree.unflatten(spec, o_rows[k:k + n_leaves]))
            k += n_leaves
        res.append(by_arg[0] if single else tuple(by_arg))
    return _tree.unflatten(ospec, res)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of func w.r.t. argnums by reverse mode, as torch.func: one forward, then
    the backward vmapped over the one-hot basis cotangents of all outputs together
    (_basis.py), `chunk_size` cotangents per vmap call (None: all at once; 1: one backward
    at a time); each input's gradient is a block of Jacobian rows per output."""
    from ._basis import basis, block, offsets
    from .vmap import vmap
    api = "jacrev"
    _check_chunk(chunk_size, api, func)

    def wrapper(*args, **kwargs):
        single, nums = argnums_tuple(argnums, len(args), api, func)
        prep = _Prepared(api, func, args, kwargs, nums, has_aux)
        outs, ospec = _tree.flatten(prep.out)
        for o in outs:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jacrev({fname(func)}): expected outputs to be Tensors, got "
                                   f"{type(o).__name__}")
        flat_in = [x for xs in prep.inputs for x in xs]

        def pull(*cots):
            return [g for gs in prep.backward(outs, list(cots), retain=True)
                    for g in _tree.flatten(gs)[0]]

        spans, total = offsets(outs)
        grads = vmap(pull, chunk_size=chunk_size)(*basis(outs)) if total else None
        per_output = []
        for o, (off, m) in zip(outs, spans):
            per_output.append([
                block(g, 0, off, m, tuple(o.shape) + tuple(x.shape)) if m
                else Tensor._zeros_meta(tuple(o.shape) + tuple(x.shape), x.dtype, x._device)
                for g, x in zip(grads or [None] * len(flat_in), flat_in)])
        res = jacobian_tree(outs, ospec, per_output,
                            [(len(xs), spec) for xs, spec in zip(prep.inputs, prep.specs)], single)
        return (res, prep.result(prep.aux)) if has_aux else res
    return wrapper
