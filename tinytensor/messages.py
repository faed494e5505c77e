"""How values appear in error messages (the bottom layer: imports only NumPy)."""
import numpy as np


def plain(v):
    """v for a message: NumPy scalars, also inside tuples, lists and dicts, become the Python
    values they hold, so that errors print 3 and (2, 3) rather than np.int64(3)."""
    if isinstance(v, np.generic):
        return v.item()
    if v.__class__ in (tuple, list):
        return v.__class__(plain(e) for e in v)
    if v.__class__ is dict:
        return {plain(k): plain(e) for k, e in v.items()}
    return v


def type_name(v):
    """`numpy.ndarray`, `float`: the type of a wrong value, as an error names it."""
    t = type(v)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class OpError(ValueError, RuntimeError):
    """An op refused its inputs: shapes that do not match or broadcast, sizes that do not
    fit, arguments that conflict. PyTorch raises RuntimeError for these and tinytensor
    raised ValueError before; deriving from both, it is caught by code written for either."""
