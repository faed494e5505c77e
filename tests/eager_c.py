"""What the tests of the eager C kernels share: whether a C compiler is here (without one
eager runs NumPy only and those tests skip), an op run on the NumPy path (the reference
the C kernels must match), and the names of the C kernels a call ran."""
import pytest

from tinytensor.compiler import cache_disk
from tinytensor.kernels import c_eager


def _have_cc():
    try:
        cache_disk.find_compiler()
        return True
    except cache_disk.CompilerNotFound:
        return False


HAVE_CC = _have_cc()
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler: eager runs NumPy only")


def numpy_path(fn, *args, **kwargs):
    """fn(*args, **kwargs) with the C kernels switched off: the NumPy reference."""
    prev = c_eager.set_enabled(False)
    try:
        return fn(*args, **kwargs)
    finally:
        c_eager.set_enabled(prev)


def run_noting_kernels(fn, *args):
    """(fn(*args), the names of the C kernels that ran in it)."""
    before = dict(c_eager.calls)
    out = fn(*args)
    return out, {k for k, v in c_eager.calls.items() if v != before.get(k, 0)}
