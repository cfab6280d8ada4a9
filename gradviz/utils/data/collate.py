"""``default_collate`` (samples -> a batch) and ``default_convert`` (numpy -> tensors), PyTorch's rules.

Tensors are stacked along a new first dimension, numpy arrays likewise (as tensors), Python ints become an int64
tensor, floats a float64 tensor, bools a bool tensor; strings stay as they are; a dict is collated key by key,
a tuple or list field by field (a tuple comes back as a list, as in PyTorch; a namedtuple stays one).
"""

import collections.abc

import numpy as np

from ...autograd.variable import Variable

_COLLATE_TYPES = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_collate(batch):
    from ...factories import as_tensor, tensor
    from ...functions import stack

    elem = batch[0]
    if isinstance(elem, Variable):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSU":
            raise TypeError(_COLLATE_TYPES.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(list(batch))
    if isinstance(elem, int):
        return tensor(list(batch))
    if isinstance(elem, float):
        return tensor(list(batch), dtype=np.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)  # an OrderedDict stays one
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(samples) for samples in zip(*batch)]
    raise TypeError(_COLLATE_TYPES.format(type(elem)))


def default_convert(data):
    """Numpy arrays (not of strings) become tensors, inside containers too; everything else is unchanged."""
    from ...factories import as_tensor

    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSU":
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
