"""tt.cuda as torch.cuda: what a torch script asks about the GPU, answered for this machine.

With CuPy and a GPU (tinytensor's CUDA device) the answers come from CuPy: the device count,
the current device, its name and capability, and the memory tinytensor's arrays use (CuPy's
memory pool: "allocated" is what arrays hold, "reserved" what the pool keeps). Without one,
`is_available()` is False, `device_count()` 0, the memory queries 0 and
`manual_seed(_all)` do nothing, as torch answers on a CPU-only build; what needs a GPU to
mean anything (`set_device`, `current_device`, `synchronize`, `get_device_name`) raises.

`tt.cuda.amp.GradScaler`/`autocast` are torch's older names for `tt.amp`'s.
"""
from ..device import cuda_is_available as _available, cupy_module as _cupy
from ..dtypes import BF16_NP as _BF16_NP
from ..random import seed_cuda as _seed_cuda
from . import amp  # noqa: F401  (tt.cuda.amp.GradScaler, as torch.cuda.amp)

__all__ = ["is_available", "device_count", "set_device", "current_device", "synchronize",
           "manual_seed", "manual_seed_all", "is_bf16_supported", "get_device_name",
           "get_device_capability", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
           "device", "amp"]

_peak = {"allocated": 0, "reserved": 0}


def is_available():
    return _available()


def device_count():
    return _cupy().cuda.runtime.getDeviceCount() if _available() else 0


def _need(fn):
    if not _available():
        raise RuntimeError(f"tt.cuda.{fn}: CUDA is not available (tinytensor runs on CUDA "
                           "through CuPy: pip install cupy-cuda12x, on a machine with a GPU)")
    return _cupy()


def _index(device):
    if device is None:
        return None
    if isinstance(device, int):
        return device
    from ..device import get_device
    d = get_device(device)
    if d.type != "cuda":
        raise ValueError(f"tt.cuda: expected a CUDA device, got {d}")
    return d.index or 0


def set_device(device):
    """Make `device` (an index, 'cuda:1' or a device) the current GPU, where 'cuda' means."""
    cp = _need("set_device")
    i = _index(device)
    if i is not None and i >= 0:
        cp.cuda.Device(i).use()


def current_device():
    return _need("current_device").cuda.runtime.getDevice()


def synchronize(device=None):
    """Wait until the GPU has finished the work queued so far."""
    cp = _need("synchronize")
    i = _index(device)
    with cp.cuda.Device(current_device() if i is None else i):
        cp.cuda.Stream.null.synchronize()
        cp.cuda.get_current_stream().synchronize()


def manual_seed(seed):
    """Seed the current GPU's generator (nothing to do without CUDA, as in torch)."""
    _seed_cuda(seed, current_device() if _available() else None)


def manual_seed_all(seed):
    """Seed every GPU's generator (nothing to do without CUDA, as in torch)."""
    _seed_cuda(seed)


def is_bf16_supported(including_emulation=True):
    """bfloat16 on the GPU: tinytensor's needs CUDA, CuPy and the ml_dtypes package (its
    NumPy dtype), and a GPU of compute capability 8.0 or more for native support."""
    if not _available() or _BF16_NP is None:
        return False
    major, _ = get_device_capability()
    return major >= 8 or bool(including_emulation)


def get_device_name(device=None):
    cp = _need("get_device_name")
    i = _index(device)
    props = cp.cuda.runtime.getDeviceProperties(current_device() if i is None else i)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name


def get_device_capability(device=None):
    cp = _need("get_device_capability")
    i = _index(device)
    cc = cp.cuda.Device(current_device() if i is None else i).compute_capability
    return int(cc[:-1]), int(cc[-1])


def _pool_bytes():
    if not _available():
        return 0, 0
    pool = _cupy().get_default_memory_pool()
    used, total = pool.used_bytes(), pool.total_bytes()
    _peak["allocated"] = max(_peak["allocated"], used)
    _peak["reserved"] = max(_peak["reserved"], total)
    return used, total


def memory_allocated(device=None):
    """Bytes held by tinytensor's GPU arrays (CuPy's memory pool, in use)."""
    return _pool_bytes()[0]


def memory_reserved(device=None):
    """Bytes the memory pool holds from the driver (in use or cached)."""
    return _pool_bytes()[1]


def max_memory_allocated(device=None):
    """The most `memory_allocated` seen by these queries since the last reset (CuPy keeps
    no high-water mark of its own, so a peak between two queries is not seen)."""
    _pool_bytes()
    return _peak["allocated"]


def max_memory_reserved(device=None):
    _pool_bytes()
    return _peak["reserved"]


def reset_peak_memory_stats(device=None):
    _peak["allocated"] = _peak["reserved"] = 0
    _pool_bytes()


def empty_cache():
    """Return the memory pool's unused blocks to the driver."""
    if _available():
        _cupy().get_default_memory_pool().free_all_blocks()


class device:
    """`with tt.cuda.device(1):` makes GPU 1 current inside the block."""

    def __init__(self, device):
        self.index = _index(device)
        self._prev = None

    def __enter__(self):
        if self.index is not None and self.index >= 0:
            self._prev = current_device()
            set_device(self.index)

    def __exit__(self, *exc):
        if self._prev is not None:
            set_device(self._prev)
        return False
