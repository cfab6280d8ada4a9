"""``gradviz.utils.data``: datasets, ``DataLoader`` and ``random_split``, with ``torch.utils.data``'s behaviour.

Loading runs in the calling process (gradviz's engine has no worker processes); batches are collated as
PyTorch's ``default_collate`` does, so a training loop sees the same structure, shapes and dtypes.
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "DataLoader", "random_split", "default_collate",
           "default_convert"]
