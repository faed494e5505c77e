"""`tt.func`: composable function transforms, as torch.func (issue 27)."""
from .forward import jvp  # noqa: F401
from .vmap import vmap  # noqa: F401
