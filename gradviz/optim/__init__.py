"""``gradviz.optim``: optimizers with ``torch.optim``'s names and update rules."""

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
