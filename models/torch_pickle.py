"""Read a `pytorch_model.bin` (torch.save's zip format) into NumPy arrays, without torch.

The zip holds `<name>/data.pkl`, a pickle of the state dict in which each tensor is a
call to `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` and each
storage a persistent id `('storage', <storage class>, key, location, numel)` whose bytes
are the zip entry `<name>/data/<key>`. Only those few torch names are resolved; any
other global in the pickle is refused, so a hostile file cannot run code.
"""
import pickle
import zipfile

import numpy as np

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
    "BFloat16Storage": "bfloat16",
}


class _StorageType:
    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    itemsize = storage.dtype.itemsize
    # as_strided does not check bounds: a corrupt or hostile file must not read past its storage
    if offset < 0 or any(n < 0 for n in size) or any(st < 0 for st in stride) or (
            all(size) and offset + sum((n - 1) * st for n, st in zip(size, stride)) >= len(storage)):
        raise pickle.UnpicklingError(f"tensor of size {tuple(size)}, stride {tuple(stride)} at "
                                     f"offset {offset} does not fit its storage of {len(storage)} "
                                     "elements")
    if not size:
        return storage[offset:offset + 1].reshape(()).copy()
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride)).copy()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix):
        super().__init__(file)
        self.archive, self.prefix = archive, prefix
        self.storages = {}

    def find_class(self, module, name):
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if module == "collections" and name == "OrderedDict":
            import collections
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, requires_grad, hooks: data
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a checkpoint "
                                     "(only tensors and dicts are allowed)")

    def persistent_load(self, pid):
        kind, storage_type, key, _location, numel = pid
        if kind != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}data/{key}")
            if storage_type.dtype == "bfloat16":  # widen to float32: bf16 is float32's top half
                arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=np.dtype(storage_type.dtype).newbyteorder("<"))
            self.storages[key] = arr
        return self.storages[key]


def load_torch_bin(path):
    """{name: ndarray} from a torch.save'd state dict (zip format, torch >= 1.6)."""
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a zip-format torch checkpoint (legacy torch.save files "
                         "from before torch 1.6 are not supported; re-save as safetensors)")
    with zipfile.ZipFile(path) as archive:
        pkl = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pkl) != 1:
            raise ValueError(f"{path}: expected one data.pkl in the archive, found {len(pkl)}")
        prefix = pkl[0][:-len("data.pkl")]
        with archive.open(pkl[0]) as f:
            state = _Unpickler(f, archive, prefix).load()
    if not isinstance(state, dict):
        raise ValueError(f"{path}: the checkpoint holds a {type(state).__name__}, not a state dict")
    return dict(state)
