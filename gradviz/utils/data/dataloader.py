"""``DataLoader``: batches of a map-style dataset, in order or shuffled by a generator, collated.

Everything runs in the calling process: ``num_workers > 0`` is accepted (scripts set it for speed) and says once
on stderr that loading happens in-process; the batches are the same either way.
"""

import math
import sys

from .collate import default_collate, default_convert

_noted_workers = [False]


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                             "drop_last")
        if batch_sampler is not None:
            batch_size = None
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.drop_last = drop_last
        self.generator = generator
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = persistent_workers
        self.prefetch_factor = prefetch_factor
        if collate_fn is None:
            collate_fn = default_collate if batch_size is not None or batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        if num_workers > 0:
            _note_in_process(num_workers)

    def _indices(self):
        """One epoch's sample indices: the sampler's, a fresh permutation, or 0..n-1."""
        if self.sampler is not None:
            return iter(self.sampler)
        n = len(self.dataset)
        if self.shuffle:
            from ...factories import randperm

            return iter(randperm(n, generator=self.generator).tolist())
        return iter(range(n))

    def _batches(self):
        if self.batch_sampler is not None:
            yield from self.batch_sampler
            return
        batch = []
        for index in self._indices():
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __iter__(self):
        if self.batch_size is None and self.batch_sampler is None:
            for index in self._indices():
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self._batches():
            yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self):
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def _note_in_process(num_workers):
    # worker processes would load the same batches; gradviz keeps one process so the trace sees everything
    if not _noted_workers[0]:
        _noted_workers[0] = True
        sys.stderr.write(f"gradviz: DataLoader(num_workers={num_workers}) loads data in this process "
                         "(gradviz's engine uses no worker processes)\n")
