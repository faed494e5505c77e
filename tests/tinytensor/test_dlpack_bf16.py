"""DLPack of bfloat16, both ways, zero-copy: NumPy's DLPack refuses ml_dtypes' bfloat16, so
tinytensor rewrites and reads those capsules itself (tinytensor/_dlpack_capsule.py)."""
import gc
import sys
import tracemalloc

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import _dlpack_capsule as dlc

ml_dtypes = pytest.importorskip("ml_dtypes")
VALUES = [[1.5, -2.25, 3.0], [0.5, 8.0, -0.125]]  # exact in bfloat16


def _floats(x):
    return x.float().tolist()


class _Producer:
    """A DLPack producer handing out whatever capsule `make(max_version)` returns."""

    def __init__(self, make):
        self.make, self.capsules = make, []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.capsules.append(self.make(max_version))
        return self.capsules[-1]

    def __dlpack_device__(self):
        return (1, 0)


def test_torch_bf16_to_tt_shares_memory_both_ways():
    x = torch.tensor(VALUES, dtype=torch.bfloat16)
    t = tt.from_dlpack(x)
    assert t.dtype is tt.bfloat16 and t.shape == (2, 3) and not t.requires_grad
    assert _floats(t) == VALUES
    assert t.data.ctypes.data == x.data_ptr()
    x[0, 1] = 40.0                       # torch writes, tinytensor reads
    assert t[0, 1].item() == 40.0
    t[1, 2] = -5.0                       # tinytensor writes, torch reads
    assert x[1, 2].item() == -5.0


def test_tt_bf16_to_torch_shares_memory_both_ways():
    t = tt.tensor(VALUES, dtype=tt.bfloat16)
    x = torch.from_dlpack(t)
    assert x.dtype == torch.bfloat16 and tuple(x.shape) == (2, 3)
    assert x.tolist() == VALUES and x.data_ptr() == t.data.ctypes.data
    x[1, 0] = 0.75
    assert t[1, 0].item() == 0.75
    t[0, 2] = -1.0
    assert x[0, 2].item() == -1.0


def test_round_trips_through_tinytensor_and_numpy_bf16():
    t = tt.tensor(VALUES, dtype=tt.bfloat16)
    back = tt.from_dlpack(t)             # tinytensor's own capsule, read back
    back[0, 0] = 9.0
    assert t[0, 0].item() == 9.0
    a = np.array([1.5, 2.5], dtype=ml_dtypes.bfloat16)  # NumPy cannot export it: shared directly
    u = tt.from_dlpack(a)
    a[1] = -4.0
    assert u.dtype is tt.bfloat16 and u[1].item() == -4.0


@pytest.mark.parametrize("view", ["0-d", "empty", "transposed", "step 2", "offset"])
def test_shapes_and_strides_from_torch(view):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(torch.bfloat16)
    x = {"0-d": torch.tensor(2.5, dtype=torch.bfloat16), "empty": torch.empty(0, 3, dtype=torch.bfloat16),
         "transposed": base.t(), "step 2": base[:, ::2], "offset": base[1:, 2:]}[view]
    t = tt.from_dlpack(x)
    assert t.shape == tuple(x.shape) and _floats(t) == _floats(x)
    assert tuple(s // 2 for s in t.data.strides) == x.stride()
    if x.numel():
        x.fill_(-3.0)                    # every element is seen through the view's strides
        assert _floats(t) == _floats(x)


@pytest.mark.parametrize("view", ["0-d", "empty", "transposed", "step 2"])
def test_shapes_and_strides_to_torch(view):
    base = tt.arange(24.0).reshape(4, 6).to(tt.bfloat16)
    t = {"0-d": tt.tensor(2.5, dtype=tt.bfloat16), "empty": tt.zeros(0, 3, dtype=tt.bfloat16),
         "transposed": base.T, "step 2": base[:, ::2]}[view]
    x = torch.from_dlpack(t)
    assert tuple(x.shape) == t.shape and _floats(x) == _floats(t)
    assert x.stride() == tuple(s // 2 for s in t.data.strides)


def test_versioned_and_legacy_capsules_are_renamed_when_consumed():
    t = tt.tensor(VALUES, dtype=tt.bfloat16)
    legacy, versioned = t.__dlpack__(), t.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    assert torch.from_dlpack(legacy).tolist() == VALUES == torch.from_dlpack(versioned).tolist()
    assert '"used_dltensor"' in repr(legacy) and '"used_dltensor_versioned"' in repr(versioned)

    x = torch.tensor(VALUES, dtype=torch.bfloat16)
    old = _Producer(lambda max_version: x.__dlpack__())  # a producer from before DLPack 1.0
    assert _floats(tt.from_dlpack(old)) == VALUES
    assert '"used_dltensor"' in repr(old.capsules[-1])
    new = _Producer(lambda max_version: x.__dlpack__(max_version=max_version))
    assert _floats(tt.from_dlpack(new)) == VALUES
    assert '"used_dltensor_versioned"' in repr(new.capsules[-1])


def test_read_only_capsule_gives_a_read_only_tensor():
    a = np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16)
    a.flags.writeable = False
    t = tt.from_dlpack(_Producer(lambda mv: tt.from_numpy(a).__dlpack__(max_version=(1, 0))))
    assert t.tolist() == [1.0, 2.0] and not t.data.flags.writeable


def test_requires_grad_is_refused_both_ways():
    w = tt.ones(3, dtype=tt.bfloat16, requires_grad=True)
    with pytest.raises(BufferError, match=r"__dlpack__.*requires grad.*\(3,\).*\.detach\(\)"):
        torch.from_dlpack(w)
    with pytest.raises(BufferError, match=r"tt\.from_dlpack: torch\.Tensor refused.*detach"):
        tt.from_dlpack(torch.ones(3, dtype=torch.bfloat16, requires_grad=True))


def test_producer_dropped_before_consumer():
    x = torch.tensor(VALUES, dtype=torch.bfloat16)
    t = tt.from_dlpack(x)
    del x
    gc.collect()
    junk = [torch.full((2, 3), 7.0, dtype=torch.bfloat16) for _ in range(50)]  # reuse freed memory, if any
    assert _floats(t) == VALUES
    s = tt.tensor(VALUES, dtype=tt.bfloat16)
    y = torch.from_dlpack(s)
    del s
    gc.collect()
    junk += [tt.full((2, 3), 7.0, dtype=tt.bfloat16) for _ in range(50)]
    assert y.tolist() == VALUES


def test_exports_release_the_array_exactly_once():
    # counted outside `assert`: pytest's rewrite would hold an extra reference to t.data
    a = tt.tensor(VALUES, dtype=tt.bfloat16).data
    t = tt.from_numpy(a)
    before = sys.getrefcount(a)
    for _ in range(300):
        y = torch.from_dlpack(t)
        held = sys.getrefcount(a)
        del y
        t.__dlpack__()                           # never consumed: the capsule frees it
        t.__dlpack__(max_version=(1, 0))
        after = sys.getrefcount(a)
        assert (held, after) == (before + 1, before)  # torch's tensor kept the array alive, then let go


def test_imports_call_the_producers_deleter_exactly_once():
    # torch's storage holds a reference to `u16`, so its refcount shows when torch lets go
    u16 = np.arange(6, dtype=np.uint16) + np.uint16(0x3F80)
    before = sys.getrefcount(u16)
    for _ in range(300):
        x = torch.from_numpy(u16).view(torch.bfloat16)
        t = tt.from_dlpack(x)
        del x
        owned = sys.getrefcount(u16)              # t still owns torch's memory
        view = t[1:]                              # a view keeps it too
        del t
        viewed = sys.getrefcount(u16)
        assert view.tolist() == [1.0078125, 1.015625, 1.0234375, 1.03125, 1.0390625]
        del view
        after = sys.getrefcount(u16)
        assert (owned, viewed, after) == (before + 1, before + 1, before)


def test_many_round_trips_do_not_grow_memory():
    t = tt.tensor(VALUES, dtype=tt.bfloat16)

    def trips(n):
        for _ in range(n):
            tt.from_dlpack(torch.from_dlpack(t))[0, 0] = 1.0
    trips(50)  # warm caches (ctypes prototypes, interned strings)
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    trips(2000)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert grown < 32 * 1024, f"{grown} bytes grew over 2000 round trips"


def test_exceptions_in_flight_survive_consumers_freeing_a_capsule():
    a = tt.tensor(VALUES, dtype=tt.bfloat16).data
    t = tt.from_numpy(a)
    before = sys.getrefcount(a)
    with pytest.raises(TypeError, match="unsupported operand"):
        torch.from_dlpack(t) + "x"          # the temporary dies while the TypeError propagates
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(t)                   # NumPy refuses the capsule, then frees it
    after = sys.getrefcount(a)
    assert after == before                  # ... and neither leaked the array


def test_unsupported_capsules_name_the_op_shape_and_dtype():
    def two_lanes(max_version):
        capsule = tt.zeros(2, 3, dtype=tt.bfloat16).__dlpack__()
        dlc._managed(capsule)[0].dl_tensor.dtype.lanes = 2
        return capsule
    with pytest.raises(TypeError, match=r"tt\.from_dlpack: .*shape \(2, 3\).*bfloat.*16 bits and 2 lanes"):
        tt.from_dlpack(_Producer(two_lanes))
    with pytest.raises(TypeError, match=r"tt\.from_dlpack: cannot read torch\.Tensor of shape \(2,\) "
                                        r"and dtype torch\.float8_e4m3fn"):
        tt.from_dlpack(torch.zeros(2, dtype=torch.float8_e4m3fn))
    reversed_ = tt.from_numpy(np.arange(4.0).astype(ml_dtypes.bfloat16)[::-1])
    with pytest.raises(BufferError, match=r"__dlpack__.*shape \(4,\).*negative strides"):
        torch.from_dlpack(reversed_)
