"""torch.signal's namespace: `tt.signal.windows` (window functions for spectral analysis)."""
from . import windows  # noqa: F401
