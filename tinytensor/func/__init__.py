"""Function transforms (issue 27)."""
from .vmap import vmap  # noqa: F401
