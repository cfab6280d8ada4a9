"""Variable-length sequences for the recurrent layers: ``pad_sequence``, and ``PackedSequence`` with
``pack_padded_sequence`` / ``pad_packed_sequence`` / ``pack_sequence`` (``torch.nn.utils.rnn``'s names).

A packed batch stores, time step after time step, the rows of the sequences still running at that step
(sequences sorted by decreasing length), so ``batch_sizes[t]`` sequences are active at step ``t``. Packing and
unpacking are one differentiable gather each.
"""

from collections import namedtuple

import numpy as np

from ...autograd.variable import Variable
from ...ops import shape as _S


def _lengths(lengths):
    return np.asarray(lengths._data if isinstance(lengths, Variable) else lengths, dtype=np.int64).reshape(-1)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """``data`` (sum of lengths, *), ``batch_sizes`` (int64, one per time step), and the permutation that sorted
    the batch by decreasing length (None when it was already sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = Variable(np.argsort(sorted_indices._data))
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def lengths(self):
        """Each sequence's length, in the sorted order the data is stored in."""
        sizes = self.batch_sizes._data
        return (np.arange(sizes[0])[:, None] < sizes[None, :]).sum(axis=1)

    def layout(self):
        """For each (time step, sorted sequence) slot of a padded (T, B) grid: its row in ``data``, or -1."""
        sizes = self.batch_sizes._data
        active = np.arange(sizes[0])[None, :] < sizes[:, None]  # (T, B)
        rows = np.full(active.shape, -1, dtype=np.int64)
        rows[active] = np.arange(int(active.sum()))
        return rows

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                         self.unsorted_indices)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padding with ``padding_value``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = Variable(np.full((missing,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype))
            s = _S.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return _S.stack(padded, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    lengths = _lengths(lengths)
    sorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order = np.arange(len(lengths))
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_indices = Variable(order)
    if lengths.size and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    steps = input.shape[1 if batch_first else 0]
    if lengths.max() > steps:
        raise RuntimeError(f"a length ({int(lengths.max())}) is longer than the padded input ({steps} steps)")
    sorted_lengths = lengths[order]
    batch_sizes = (np.arange(sorted_lengths[0])[:, None] < sorted_lengths[None, :]).sum(axis=1)
    time, slot = np.nonzero(np.arange(sorted_lengths[0])[:, None] < sorted_lengths[None, :])  # time-major
    batch = order[slot]
    data = input[batch, time] if batch_first else input[time, batch]
    return PackedSequence(data, Variable(batch_sizes.astype(np.int64)), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Back to a padded (T, B, *) tensor (or (B, T, *)) in the batch's original order, and the lengths."""
    steps = len(sequence.batch_sizes._data)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    rows = sequence.layout()
    if steps > rows.shape[0]:
        rows = np.concatenate([rows, np.full((steps - rows.shape[0], rows.shape[1]), -1)], 0)
    if sequence.unsorted_indices is not None:
        rows = rows[:, sequence.unsorted_indices._data]  # sorted slots -> original batch order
    data = sequence.data
    fill = Variable(np.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype))
    padded = _S.cat([data, fill], 0)[np.where(rows < 0, data.shape[0], rows)]
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = sequence.lengths()
    if sequence.unsorted_indices is not None:
        lengths = lengths[sequence.unsorted_indices._data]
    return padded, Variable(lengths.astype(np.int64))


def pack_sequence(sequences, enforce_sorted=True):
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(_lengths(lengths))]


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence"]
