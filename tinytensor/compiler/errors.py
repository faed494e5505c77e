"""What a capture refuses, and where: CaptureError and the user's line it names."""
import linecache
import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tinytensor
# the libraries beside it (nn/, models/): an error names the user's line, not theirs
LIBRARY_DIRS = tuple(d for d in (os.path.join(os.path.dirname(_PACKAGE), n) for n in ("nn", "models"))
                     if os.path.isdir(d))


class CaptureError(RuntimeError):
    """A step does something a captured program could not replay faithfully."""


def user_frame(skip=()):
    """'file:line (`source`)' of the innermost frame outside tinytensor's own code and the
    directories in `skip` (nn/ for its optimizers)."""
    inside = tuple(os.path.abspath(d) + os.sep for d in (_PACKAGE, *skip))
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(inside):
        f = f.f_back
    if f is None:
        return "an unknown line"
    src = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f" (`{src}`)" if src else "")


def shape_label(t):
    return f"a tensor of shape {tuple(t.shape)} ({t.dtype.name})"
