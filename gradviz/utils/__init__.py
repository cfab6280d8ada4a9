"""``gradviz.utils``: PyTorch's ``torch.utils`` names that scripts use (``data``)."""

from . import data

__all__ = ["data"]
