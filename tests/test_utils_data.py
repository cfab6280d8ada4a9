"""gradviz.utils.data against torch.utils.data: the same batches (order without shuffling; structure, shapes and
dtypes always), random_split's lengths, and PyTorch's errors."""

import subprocess
import sys
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import gradviz as gv
from gradviz.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    random_split,
)

Pair = namedtuple("Pair", "x y")


class Mixed(Dataset):
    """Samples of every kind default_collate handles."""

    def __init__(self, lib, n=7):
        self.lib, self.n = lib, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        lib = self.lib
        return {"x": lib.arange(3) * i, "f": float(i) / 2, "n": i, "flag": i % 2 == 0, "name": f"s{i}",
                "np": np.full((2,), i, dtype=np.float32), "pair": Pair(lib.ones(2) * i, i),
                "list": [i, lib.zeros(1) + i], "od": OrderedDict(a=i)}


def structure(batch):
    """A batch as nested plain values: (kind, shape, dtype, values) for tensors, containers by type."""
    if hasattr(batch, "detach"):
        return ("tensor", tuple(batch.shape), str(batch.dtype).replace("torch.", ""), batch.tolist())
    if isinstance(batch, dict):
        return (type(batch).__name__, {k: structure(v) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return ("namedtuple", [structure(v) for v in batch])
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [structure(v) for v in batch])
    return batch


def test_tensor_dataset_batches_in_order_with_the_last_partial_batch():
    x, y = gv.arange(20).reshape(10, 2).float(), gv.arange(10)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 == len(batches)
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert isinstance(batches[0], list) and batches[0][0].shape == (4, 2) and batches[0][0].dtype == gv.float32
    dropped = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[1].shape[0] for b in dropped] == [4, 4]


def test_shuffle_is_a_permutation_reproducible_with_a_generator():
    data = TensorDataset(gv.arange(50))

    def epoch(seed):
        return [int(v) for (batch,) in DataLoader(data, batch_size=8, shuffle=True,
                                                  generator=gv.Generator().manual_seed(seed)) for v in batch]

    assert sorted(epoch(0)) == list(range(50)) and epoch(0) == epoch(0) and epoch(0) != epoch(1)
    loader = DataLoader(data, batch_size=50, shuffle=True, generator=gv.Generator().manual_seed(3))
    first, second = [b[0].tolist() for b in loader], [b[0].tolist() for b in loader]
    assert first != second  # a new order every epoch


def test_batch_size_none_sampler_and_batch_sampler():
    assert list(DataLoader(range(4), batch_size=None)) == [0, 1, 2, 3]
    assert [b.tolist() for b in DataLoader(range(6), batch_size=2, sampler=[5, 3, 1])] == [[5, 3], [1]]
    assert [b.tolist() for b in DataLoader(range(6), batch_sampler=[[0, 5], [2]])] == [[0, 5], [2]]
    assert len(DataLoader(range(6), batch_size=4, sampler=[5, 3, 1])) == 1


def test_random_split_lengths_fractions_and_disjointness():
    parts = random_split(range(10), [0.33, 0.33, 0.34], generator=gv.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [4, 3, 3] and all(isinstance(p, Subset) for p in parts)
    assert sorted(i for p in parts for i in p) == list(range(10))
    assert [len(p) for p in random_split(range(11), [0.5, 0.5])] == [6, 5]
    with pytest.raises(ValueError, match="^Sum of input lengths does not equal the length of the input dataset!$"):
        random_split(range(10), [3, 3])


def test_concat_and_subset():
    both = TensorDataset(gv.arange(3)) + TensorDataset(gv.arange(10, 12))
    assert isinstance(both, ConcatDataset) and len(both) == 5
    assert [int(both[i][0]) for i in range(5)] == [0, 1, 2, 10, 11] and int(both[-1][0]) == 11
    assert [int(s[0]) for s in Subset(both, [4, 0])] == [11, 0]


def test_num_workers_runs_in_process_with_one_note_once():
    code = ("import gradviz as gv\nfrom gradviz.utils.data import DataLoader\n"
            "for _ in range(2):\n    print([b.tolist() for b in DataLoader(range(4), batch_size=2, num_workers=2)])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[[0, 1], [2, 3]]\n[[0, 1], [2, 3]]\n"
    assert done.stderr == ("gradviz: DataLoader(num_workers=2) loads data in this process (gradviz's engine uses "
                           "no worker processes)\n")


def test_bad_arguments_use_torch_wording():
    with pytest.raises(ValueError, match="^batch_size should be a positive integer value, but got batch_size=0$"):
        DataLoader(range(3), batch_size=0)
    with pytest.raises(ValueError, match="^sampler option is mutually exclusive with shuffle$"):
        DataLoader(range(3), sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="^Size mismatch between tensors$"):
        TensorDataset(gv.ones(3), gv.ones(4))
    with pytest.raises(RuntimeError, match="^each element in list of batch should be of equal size$"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match="^default_collate: batch must contain tensors, numpy arrays, numbers, "):
        default_collate([object()])


# ----- against torch -------------------------------------------------------------------------------------------
@pytest.mark.oracle
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (7, False), (10, False)])
def test_batches_match_torch_dataloader(batch_size, drop_last):
    torch = pytest.importorskip("torch")
    ours = [structure(b) for b in DataLoader(Mixed(gv), batch_size=batch_size, drop_last=drop_last)]
    theirs = [structure(b) for b in torch.utils.data.DataLoader(Mixed(torch), batch_size=batch_size,
                                                               drop_last=drop_last)]
    assert ours == theirs


@pytest.mark.oracle
def test_shuffled_batches_have_torch_structure_and_collate_matches():
    torch = pytest.importorskip("torch")
    ours = DataLoader(Mixed(gv, 9), batch_size=4, shuffle=True, generator=gv.Generator().manual_seed(0))
    theirs = torch.utils.data.DataLoader(Mixed(torch, 9), batch_size=4, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))

    def shape_only(s):
        if isinstance(s, tuple) and s and s[0] == "tensor":
            return s[:3]
        if isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], dict):
            return (s[0], {k: shape_only(v) for k, v in s[1].items()})
        if isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], list):
            return (s[0], [shape_only(v) for v in s[1]])
        return type(s).__name__

    assert [shape_only(structure(b)) for b in ours] == [shape_only(structure(b)) for b in theirs]
    samples = [(1, 2.5, True, "a", np.ones(2)), (2, 3.5, False, "b", np.zeros(2))]
    assert structure(default_collate(samples)) == structure(torch.utils.data.default_collate(samples))
    assert len(ours) == len(theirs)


@pytest.mark.oracle
def test_random_split_lengths_match_torch():
    torch = pytest.importorskip("torch")
    for n, lengths in ((10, [0.33, 0.33, 0.34]), (11, [0.5, 0.5]), (7, [0.1, 0.2, 0.7]), (10, [3, 7])):
        assert [len(p) for p in random_split(range(n), lengths)] == \
            [len(p) for p in torch.utils.data.random_split(range(n), lengths)]


class Countdown(IterableDataset):
    def __init__(self, lib, n):
        self.lib, self.n = lib, n

    def __iter__(self):
        return iter([(self.lib.ones(2) * i, i) for i in range(self.n, 0, -1)])

    def __len__(self):
        return self.n


def test_samplers():
    assert list(SequentialSampler(range(3))) == [0, 1, 2]
    assert list(BatchSampler(SequentialSampler(range(7)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]] and len(BatchSampler(range(7), 3, True)) == 2
    drawn = list(RandomSampler(range(5), num_samples=12, generator=gv.Generator().manual_seed(0)))
    assert len(drawn) == 12 and sorted(drawn[:10]) == sorted(list(range(5)) * 2)  # whole permutations chained
    with_replacement = list(RandomSampler(range(3), replacement=True, num_samples=50))
    assert len(with_replacement) == 50 and set(with_replacement) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([7, 3, 9])) == [3, 7, 9]
    assert set(WeightedRandomSampler([0.0, 0.0, 2.0], 6)) == {2}
    assert sorted(WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False)) == [0, 1, 2]
    loader = DataLoader(range(10), batch_size=4, shuffle=True)
    assert isinstance(loader.sampler, RandomSampler) and isinstance(loader.batch_sampler, BatchSampler)
    with pytest.raises(ValueError, match="^num_samples should be a positive integer value, but got num_samples=0$"):
        RandomSampler(range(3), num_samples=0)


def test_iterable_dataset_is_batched_in_its_own_order():
    loader = DataLoader(Countdown(gv, 5), batch_size=2)
    assert [b[1].tolist() for b in loader] == [[5, 4], [3, 2], [1]] and len(loader) == 3
    assert [b[1].tolist() for b in DataLoader(Countdown(gv, 5), batch_size=2, drop_last=True)] == [[5, 4], [3, 2]]
    with pytest.raises(ValueError, match="^DataLoader with IterableDataset: expected unspecified shuffle option, "
                                         "but got shuffle=True$"):
        DataLoader(Countdown(gv, 2), shuffle=True)


@pytest.mark.oracle
def test_iterable_dataset_and_batch_sampler_match_torch():
    torch = pytest.importorskip("torch")
    tud = torch.utils.data

    class TorchCountdown(tud.IterableDataset):
        def __iter__(self):
            return iter(Countdown(torch, 5))

        def __len__(self):
            return 5

    for kwargs in (dict(batch_size=2), dict(batch_size=2, drop_last=True), dict(batch_size=None)):
        assert [structure(b) for b in DataLoader(Countdown(gv, 5), **kwargs)] == \
            [structure(b) for b in tud.DataLoader(TorchCountdown(), **kwargs)]
    for args in ((range(7), 3, False), (range(7), 3, True), (range(6), 2, False)):
        assert list(BatchSampler(*args)) == list(tud.BatchSampler(*args))
        assert len(BatchSampler(*args)) == len(tud.BatchSampler(*args))
    for kwargs in (dict(batch_size=3, sampler=[4, 1, 2, 0]), dict(batch_sampler=[[1, 2], [0]])):
        assert [structure(b) for b in DataLoader(Mixed(gv), **kwargs)] == \
            [structure(b) for b in tud.DataLoader(Mixed(torch), **kwargs)]
