"""tt.utils as torch.utils: `tt.utils.data` (datasets and the DataLoader)."""
from . import data  # noqa: F401

__all__ = ["data"]
