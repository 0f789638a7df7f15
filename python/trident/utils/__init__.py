"""trident.utils: torch.utils's data loading (trident.utils.data)."""
from . import data  # noqa: F401
