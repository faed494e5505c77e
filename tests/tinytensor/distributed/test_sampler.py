"""DistributedSampler and shard_rows: disjoint shards, one reshuffle per epoch, same on all ranks."""
import numpy as np
import pytest

import tinytensor as tt
from tinytensor.distributed import DistributedSampler, shard_rows


def shards(n, world, epoch=0, **kw):
    out = []
    for r in range(world):
        s = DistributedSampler(n, rank=r, world_size=world, seed=7, **kw)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


def test_shards_are_disjoint_equal_and_cover_the_data():
    parts = shards(10, 2)
    assert len(parts[0]) == len(parts[1]) == 5
    assert sorted(parts[0] + parts[1]) == list(range(10))


def test_each_epoch_reshuffles_from_the_shared_seed():
    e0, e1 = shards(12, 3, epoch=0), shards(12, 3, epoch=1)
    assert e0 != e1
    assert shards(12, 3, epoch=1) == e1   # a rank recomputing epoch 1 gets the same shard
    assert sorted(sum(e1, [])) == list(range(12))


def test_uneven_sizes_pad_by_wrapping_or_drop_the_tail():
    padded = shards(5, 2)
    assert [len(p) for p in padded] == [3, 3] and set(sum(padded, [])) == set(range(5))
    dropped = shards(5, 2, drop_last=True)
    assert [len(p) for p in dropped] == [2, 2] and len(set(sum(dropped, []))) == 4


def test_without_shuffle_the_order_is_strided():
    assert shards(6, 2, shuffle=False) == [[0, 2, 4], [1, 3, 5]]


def test_bad_rank_is_refused():
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        DistributedSampler(4, rank=2, world_size=2)


def test_shard_rows_slices_the_batch_and_refuses_uneven_splits():
    x = tt.tensor(np.arange(12).reshape(6, 2))
    assert shard_rows(x, 1, 2).tolist() == [[6, 7], [8, 9], [10, 11]]
    with pytest.raises(ValueError, match="a batch of 6 rows does not split evenly over 4 ranks"):
        shard_rows(x, 0, 4)
