"""tt.utils.data as torch.utils.data: datasets, samplers and the DataLoader.

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, drop_last=True)
    for xb, yb in loader: ...

The same sampler gives the same batches as torch's: a DataLoader reads indices from its
sampler (SequentialSampler, RandomSampler with `shuffle=True`, any iterable of indices, or a
DistributedSampler), groups them into batches of `batch_size` (the last one shorter unless
`drop_last`), fetches `dataset[i]` for each and collates them with `default_collate`
(tensors and NumPy arrays stacked, numbers made tensors, tuples/lists/dicts collated field
by field, strings left as lists). Shuffled orders come from tinytensor's generator, so they
are not torch's (see `tt.manual_seed`); a `generator=` is a seed-holding NumPy Generator or an
int seed.

Workers: every item is loaded in the calling process. `num_workers > 0` is accepted so
torch scripts run, and yields exactly the batches num_workers=0 does (torch's workers also
keep the sampler's order); `worker_init_fn` is refused, since no worker would run it.
`pin_memory=True` is accepted: copies to the GPU are synchronous here, there is nothing to
pin for.
"""
import collections.abc
import numbers

import numpy as np

from ..core.tensor import Tensor
from ..creation import tensor as _tensor
from ..dtypes import float64 as _float64, int64 as _int64
from ..distributed.sampler import DistributedSampler as _DistributedSampler
from ..ops.movement import stack as _stack

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "DataLoader", "Sampler",
           "SequentialSampler", "RandomSampler", "BatchSampler", "DistributedSampler",
           "default_collate", "random_split"]


class Dataset:
    """A map-style dataset: `__getitem__(i)` and `__len__()`."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


class IterableDataset(Dataset):
    """A dataset read by iterating over it (`__iter__`); no sampler applies."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Item i is `tuple(t[i] for t in tensors)`; every tensor has the same first size."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        n = tensors[0].shape[0]
        bad = [tuple(t.shape) for t in tensors if t.shape[0] != n]
        if bad:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first sizes "
                             f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _rng(generator):
    if generator is None:
        from ..random import generator as device_generator
        from ..device import CPU
        return device_generator(CPU)
    if isinstance(generator, np.random.Generator):
        return generator
    return np.random.default_rng(int(generator))


def random_split(dataset, lengths, generator=None):
    """Split into Subsets of the given lengths (or fractions summing to 1), in a random order."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(np.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):  # torch's rule: the remainder round-robin from the front
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {list(lengths)} do not sum to the "
                         f"dataset's {n}")
    order = _rng(generator).permutation(n).tolist()
    out, k = [], 0
    for m in lengths:
        out.append(Subset(dataset, order[k:k + m]))
        k += m
    return out


class Sampler:
    """Yields dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh permutation of the indices on every pass (or `num_samples` draws with
    replacement when `replacement=True`)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        order = []
        while len(order) < self.num_samples:
            order += rng.permutation(n).tolist()
        return iter(order[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer, got "
                             f"{batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, bool(drop_last)

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(_DistributedSampler, Sampler):
    """torch's signature over tt.distributed.DistributedSampler: rank `rank` of
    `num_replicas` gets every num_replicas-th index of the (shuffled) order, padded by
    wrapping around unless `drop_last`. Call `set_epoch(e)` before each epoch to reshuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        self.dataset = dataset
        super().__init__(len(dataset), rank=rank, world_size=num_replicas, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        self.num_replicas, self.total_size = self.world_size, self.num_samples * self.world_size


def default_collate(batch):
    """One batch from a list of items, field by field, as torch's default_collate."""
    first = batch[0]
    if isinstance(first, Tensor):
        return _stack(list(batch), 0)
    if isinstance(first, np.ndarray):
        return _tensor(np.stack(batch))
    if isinstance(first, np.generic):
        return _tensor(np.array(batch))
    if isinstance(first, bool):
        return _tensor(batch)
    if isinstance(first, numbers.Integral):
        return _tensor(batch, dtype=_int64)
    if isinstance(first, numbers.Real):
        return _tensor(batch, dtype=_float64)  # torch's: a Python float collates to float64
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple
        return type(first)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(item) != len(first) for item in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               "equal size")
        fields = [default_collate(list(f)) for f in zip(*batch)]
        return fields if isinstance(first, list) else type(first)(fields)
    raise TypeError(f"default_collate: batch must contain tensors, NumPy arrays, numbers, "
                    f"dicts or lists; found {type(first).__name__}")


class DataLoader:
    """Batches of `dataset`, in the order of its sampler (see the module docstring)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use "
                             "num_workers=0 to disable multiprocessing.")
        if worker_init_fn is not None and num_workers > 0:
            raise ValueError("DataLoader: worker_init_fn is not supported: tinytensor loads "
                             "every batch in the calling process (no workers to initialise)")
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, "
                             "sampler and batch_sampler")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                          or drop_last):
            raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                             "batch_size, shuffle, sampler, and drop_last")
        self.dataset, self.num_workers, self.pin_memory = dataset, num_workers, pin_memory
        self.batch_size, self.drop_last, self.generator = batch_size, bool(drop_last), generator
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self._iterable = iterable
        if not iterable and batch_sampler is None:
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler

    def __iter__(self):
        if self._iterable:
            yield from self._iter_iterable()
            return
        if self.batch_sampler is None:  # batch_size=None: items one by one, uncollated
            for i in self.sampler:
                yield self.dataset[i]
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def _iter_iterable(self):
        if self.batch_size is None:
            yield from self.dataset
            return
        batch = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no len()")
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
