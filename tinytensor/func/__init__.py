"""`tt.func`: composable function transforms, as torch.func (issue 27)."""
from .forward import jvp  # noqa: F401
