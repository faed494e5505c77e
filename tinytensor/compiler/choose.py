"""tt.compile's default backend (backend=None): the fastest that works, chosen at each
compile from what that call's step touches, so a user never has to name one.

- "cuda" when any tensor of the step (its arguments, the parameters it reads, its
  results) lives on a CUDA device: the C runner cannot read CuPy arrays;
- else "c" where a C compiler is found ($CC, else `cc` on PATH): generated kernels, the
  speed-up (a 1M-element chain 5x eager, the GPT-2 bench step 2x);
- else "numpy", the interpreter (no faster than eager), with one warning per process
  naming the compiler to install.
A program the C backend fails to build (a code generation bug) runs on the interpreter
with a warning rather than failing the user's step: the default promises "works", and
backend="c" still raises.
"""
import warnings

from .pytree import flatten_tensors

_warned = set()   # the warnings given in this process


def backend(args, kwargs, meta):
    """The backend name for a step just captured on (args, kwargs) (meta: capture's)."""
    tensors = flatten_tensors((args, kwargs)) + flatten_tensors(meta.tree)
    tensors += [x for kind, x in meta.bindings if kind in ("param", "grad")]
    if any(t._device.type == "cuda" for t in tensors):
        return "cuda"
    from . import cache_disk   # hashlib, ctypes, subprocess: loaded at the first compile
    try:
        cache_disk.find_compiler()
    except cache_disk.CompilerNotFound as e:
        _warn_once("compiler", f"tt.compile: no C compiler was found, so compiled functions run "
                               f"on the NumPy interpreter, which is no faster than eager. For the "
                               f"generated C kernels' speed-up: {e} (backend='numpy' states that "
                               f"the interpreter is intended and gives no warning).")
        return "numpy"
    return "c"


def fell_back(step, name, error):
    """Whether `error`, raised building a program of `step` on the chosen backend `name`,
    is one the interpreter stands in for (the C compiler rejected the generated source; a
    kernel the backend cannot generate); then warn once per step."""
    from . import cache_disk
    if name == "numpy" or not isinstance(error, (cache_disk.CompileError, NotImplementedError)):
        return False   # a cache directory to fix, a missing GPU, a bug elsewhere: raised
    _warn_once(("build", step), f"tt.compile: the {name!r} backend could not build {step}'s "
                                f"program, so it runs on the NumPy interpreter; please report "
                                f"this (backend={name!r} raises it): {error}")
    return True


def _warn_once(what, message):
    if what not in _warned:
        _warned.add(what)
        # here, backend or fell_back, CompiledFunction._build, __call__: the user's call
        warnings.warn(message, RuntimeWarning, stacklevel=5)
