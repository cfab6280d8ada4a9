"""``gradviz.utils.data``: datasets, ``DataLoader`` and ``random_split``, with ``torch.utils.data``'s behaviour.

Loading runs in the calling process (gradviz's engine has no worker processes); batches are collated as
PyTorch's ``default_collate`` does, so a training loop sees the same structure, shapes and dtypes.
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "DataLoader", "random_split",
           "default_collate", "default_convert", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler"]
