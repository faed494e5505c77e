"""Splitting the data between ranks."""
import numpy as np

from .process_group import get_rank, get_world_size


class DistributedSampler:
    """Indices 0..n-1 split into `world_size` disjoint shards, one per rank, reshuffled every
    epoch from a seed all ranks share (call `set_epoch(e)` before each epoch, as in torch).

    With drop_last=False the shuffled order is padded by wrapping around, so every rank gets
    the same number of indices (ranks must run the same number of steps); with
    drop_last=True the tail that does not divide evenly is dropped instead.
    """

    def __init__(self, n, rank=None, world_size=None, shuffle=True, seed=0, drop_last=False):
        if rank is None or world_size is None:
            rank = get_rank() if rank is None else rank
            world_size = get_world_size() if world_size is None else world_size
        if not 0 <= rank < world_size:
            raise ValueError(f"DistributedSampler: rank {rank} is outside 0..{world_size - 1}")
        if n < world_size and drop_last:
            raise ValueError(f"DistributedSampler: {n} items cannot give each of {world_size} "
                             "ranks one with drop_last=True")
        self.n, self.rank, self.world_size = int(n), rank, world_size
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        self.num_samples = n // world_size if drop_last else -(-n // world_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def indices(self):
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
                 if self.shuffle else np.arange(self.n))
        total = self.num_samples * self.world_size
        if total > self.n:
            order = np.resize(order, total)  # wraps around
        return order[self.rank:total:self.world_size]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.num_samples


def shard_rows(x, rank=None, world_size=None):
    """Rank `rank`'s contiguous slice of the rows of `x` (a batch every rank drew the same)."""
    if rank is None or world_size is None:
        rank = get_rank() if rank is None else rank
        world_size = get_world_size() if world_size is None else world_size
    n = x.shape[0]
    if n % world_size:
        raise ValueError(f"shard_rows: a batch of {n} rows does not split evenly over "
                         f"{world_size} ranks; pick a batch size divisible by {world_size}")
    k = n // world_size
    return x[rank * k:(rank + 1) * k]
