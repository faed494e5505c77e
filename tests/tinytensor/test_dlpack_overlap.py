"""Memory in which two elements share a place, imported through DLPack (issue 26): torch's
`expand` (stride 0) and `unfold` (overlapping strides) arrive read-only, as tinytensor's own
expand views are, and an in-place write into them is refused with torch's message instead of
landing several times on one place. Everything else stays writable and shared."""
import itertools

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.overlap import TORCH_MESSAGE, overlaps


def _torch_message(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value)


def test_the_message_is_torchs():
    assert _torch_message(lambda: torch.zeros(1).expand(3).add_(1)) == TORCH_MESSAGE


@pytest.mark.parametrize("make", [
    lambda: torch.arange(6.0).expand(3, 6),          # the case: stride (0, 1)
    lambda: torch.arange(10.0).unfold(0, 3, 1),       # windows that overlap: strides (1, 1)
    lambda: torch.zeros(4, 1).expand(4, 5).t(),       # stride 0 after a transpose
], ids=["expand", "unfold", "expanded_transpose"])
@pytest.mark.parametrize("write", [
    lambda t: t.__setitem__((0, 0), 100.0),
    lambda t: t.add_(1),
    lambda t: t.zero_(),
    lambda t: t.copy_(tt.ones(*t.shape)),
], ids=["setitem", "add_", "zero_", "copy_"])
def test_overlapping_imports_are_read_only_and_refuse_writes_like_torch(make, write):
    src = make()
    before = src.clone()
    t = tt.from_dlpack(src)
    assert not t.data.flags.writeable
    with pytest.raises(RuntimeError) as e:
        write(t)
    assert TORCH_MESSAGE in str(e.value)
    assert torch.equal(src, before)              # nothing was written
    assert np.shares_memory(t.numpy(), src.numpy())  # still zero-copy
    np.testing.assert_array_equal(t.numpy(), src.numpy())
    w = t.clone()                                # torch's advice works
    w.add_(1)
    np.testing.assert_array_equal(w.numpy(), src.numpy() + 1)


def test_tinytensors_own_expand_view_refuses_with_the_same_message():
    with pytest.raises(RuntimeError, match="add_: unsupported operation: more than one element"):
        tt.arange(6.0).expand(3, 6).add_(1)


@pytest.mark.parametrize("make", [
    lambda: torch.arange(12.0).reshape(3, 4).t(),
    lambda: torch.arange(24.0).reshape(4, 6)[::2, 1::3],
    lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
    lambda: torch.arange(6.0).expand(1, 6),        # a stride-0 dimension of size 1 overlaps nothing
    lambda: torch.arange(12.0).reshape(3, 4).diagonal(),
], ids=["transpose", "step_slices", "permute", "size_one_expand", "diagonal"])
def test_non_overlapping_views_stay_writable_and_shared(make):
    src = make()
    t = tt.from_dlpack(src)
    assert t.data.flags.writeable
    t.add_(1)
    t[0] = -1.0
    np.testing.assert_array_equal(src.numpy(), t.numpy())  # the writes reached torch's memory


def test_numpy_imports_follow_the_same_rule():
    a = np.arange(8.0)
    assert tt.from_dlpack(a[::-1]).data.flags.writeable          # negative strides, no overlap
    hop = np.lib.stride_tricks.as_strided(a, shape=(3, 4), strides=(16, 8))  # rows overlap
    assert hop.flags.writeable and not tt.from_dlpack(hop).data.flags.writeable
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with pytest.raises(RuntimeError, match=r"add_: tensor of shape \(4,\) is read-only memory"):
        tt.from_dlpack(ro).add_(1)


def _brute_force(shape, strides, itemsize):
    starts = [sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*map(range, shape))]
    spans = sorted(starts)
    return any(b - a < itemsize for a, b in zip(spans, spans[1:]))


def test_overlaps_agrees_with_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(0, 5, ndim))
        itemsize = int(rng.choice([1, 2, 4, 8]))
        strides = tuple(int(s) for s in rng.integers(-3, 40, ndim))
        assert overlaps(shape, strides, itemsize) == _brute_force(shape, strides, itemsize), \
            (shape, strides, itemsize)
