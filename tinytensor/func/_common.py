"""Argument checks shared by the transforms: errors name the transform and the function."""
from ..core.tensor import Tensor
from . import _tree


def fname(f):
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def tensors_of(tree, what, api, f):
    """The leaves of `tree`, all Tensors, and its spec."""
    leaves, spec = _tree.flatten(tree)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise ValueError(f"{api}({fname(f)}): expected {what} to be Tensors (or tuples, lists, "
                             f"dicts of them), got {type(x).__name__}")
    return leaves, spec


def floating(x, what, api, f):
    if not (x.is_floating_point() or x.is_complex()):
        raise RuntimeError(f"{api}({fname(f)}): {what} must be floating-point to be "
                           f"differentiated, got dtype {x.dtype.name} (shape {tuple(x.shape)})")


def argnums_tuple(argnums, nargs, api, f):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{api}({fname(f)}): argnums must be non-empty")
    out = []
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{api}({fname(f)}): argnums must be an int or a tuple of ints, "
                               f"got {type(a).__name__}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"{api}({fname(f)}): got argnums={argnums} but only {nargs} "
                               "positional inputs")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{api}({fname(f)}): argnums must be unique, got {argnums}")
    return single, tuple(out)


def split_aux(out, has_aux, api, f):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}({fname(f)}, has_aux=True): the function must return a tuple "
                           f"(output, aux), got {type(out).__name__}")
    return out
