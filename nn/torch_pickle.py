"""Read a `pytorch_model.bin` (torch.save's zip format) into NumPy arrays, without torch:
a state dict (load_torch_bin) or a checkpoint tree of them (load_torch_tree, what tt.load reads).

The zip holds `<name>/data.pkl`, a pickle of the state dict in which each tensor is a
call to `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` and each
storage a persistent id `('storage', <storage class>, key, location, numel)` whose bytes
are the zip entry `<name>/data/<key>`. Only those few torch names are resolved; any
other global in the pickle is refused, so a hostile file cannot run code.

Nor can it make us allocate more than it holds. The pickle is read first, without touching
any storage; then every tensor is checked against its storage (inside it, and no more
elements than it has: a stride-0 view of one float as 20000x20000 is refused) and every
storage against its zip entry (exactly numel * itemsize bytes, so a deflated entry cannot
inflate past what the pickle declares), and every problem is reported at once. Only then
are the storages read, each with a read bounded by its declared size. The arrays returned
are read-only views of their storages: tensors that share a storage in torch share memory
here too, and memory is what the storages hold.

Nor can it crash, hang or burn CPU: before anything is unpickled, pickle_scan reads the
opcode stream and refuses nesting past a small depth (hashing a deeply nested tuple
overflows the C stack), integers outside int64 and memo indices out of sequence; a
tensor of more than 64 dimensions is refused before any arithmetic on its sizes, and its
element count is a checked product. Every failure, a damaged zip archive included, is a
CheckpointError naming the file, and messages show values clipped (reprlib).
"""
import bz2  # noqa: F401 -- zipfile's codecs; their errors are a damaged archive's
import collections
import io
import lzma
import pickle
import reprlib
import struct
import zipfile
import zlib

import numpy as np

from .checkpoint import CheckpointError, map_tree
from tinytensor.dtypes import BF16_NP

from .pickle_scan import scan

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
    "BFloat16Storage": "bfloat16",
}
_MAX_PICKLE = 100_000_000  # safetensors' limit on its header, which is what data.pkl is here
_MAX_DIMS = 64  # torch's and NumPy's limit
_INT64 = 1 << 63
# what reading a damaged zip raises: bad CRCs and headers, broken deflate/bzip2/lzma streams,
# an unknown compression method, an encrypted entry, a name that is not UTF-8
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError,
               RuntimeError, OSError, ValueError, struct.error, OverflowError)


class _StorageType:
    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]
        self.itemsize = 2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize


class _Storage:
    def __init__(self, key, storage_type, numel):
        self.key, self.type, self.numel = key, storage_type, numel


# what _rebuild_tensor_v2 records; checked and turned into an array once the pickle is read
_Tensor = collections.namedtuple("_Tensor", "storage offset size stride")


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    return _Tensor(storage, offset, size, stride)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file):
        super().__init__(file)
        self.storages = {}
        self.problems = []

    def find_class(self, module, name):
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, requires_grad, hooks: data
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a checkpoint "
                                     "(only tensors and dicts are allowed)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {_show(pid)}")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _StorageType) and isinstance(key, str) and _count(numel)):
            raise pickle.UnpicklingError(f"malformed storage id {_show(pid)}")
        storage = self.storages.setdefault(key, _Storage(key, storage_type, numel))
        if (storage.type.name, storage.numel) != (storage_type.name, numel):
            self.problems.append(f"storage {_show(key)} is declared twice: {storage.numel} x "
                                 f"{storage.type.name} and {numel} x {storage_type.name}")
        return storage


def _count(n):
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n < _INT64


def _ints(xs):
    return isinstance(xs, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


class _Short(reprlib.Repr):
    """repr for messages about hostile values: clipped, and an integer too long to print
    (int->str refuses past 4,300 digits) shown by its size."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxtuple, self.maxlist, self.maxdict = 3, 8, 8, 8
        self.maxstring, self.maxother = 60, 60

    def repr_int(self, x, level):
        return repr(x) if -_INT64 <= x < _INT64 else f"<an integer of {x.bit_length()} bits>"


_show = _Short().repr


def _numel(size):
    """The product of `size`, or None past int64: checked at each step, so a size of many
    huge dimensions costs no more than one of few."""
    if 0 in size:
        return 0
    n = 1
    for d in size:
        n *= d
        if n >= _INT64:
            return None
    return n


def _tensor_problem(name, t):
    if not isinstance(t.storage, _Storage):
        return f"tensor {_show(name)}: its storage is a {type(t.storage).__name__}, not a storage"
    size, stride, offset = t.size, t.stride, t.offset
    if not (_ints(size) and _ints(stride) and _ints((offset,))):
        return (f"tensor {_show(name)}: size {_show(size)}, stride {_show(stride)} and offset "
                f"{_show(offset)} are not integers")
    if len(size) > _MAX_DIMS or len(stride) > _MAX_DIMS:
        return (f"tensor {_show(name)}: {len(size)} sizes and {len(stride)} strides, more than the "
                f"{_MAX_DIMS} dimensions a tensor can have")
    if len(size) != len(stride):
        return f"tensor {_show(name)}: size {_show(size)} and stride {_show(stride)} differ in length"
    if not all(-_INT64 <= x < _INT64 for x in size + stride + (offset,)):
        return (f"tensor {_show(name)}: size {_show(size)}, stride {_show(stride)}, offset "
                f"{_show(offset)} do not fit in int64")
    if offset < 0 or min(size + stride, default=0) < 0:
        return (f"tensor {_show(name)}: size {size}, stride {stride}, offset {offset} must be "
                "non-negative")
    numel, held, key = _numel(size), t.storage.numel, t.storage.key
    if numel is None:
        return f"tensor {_show(name)}: size {size} has more than 2**63 elements"
    where = f"tensor {_show(name)}: size {size} ({numel} elements), stride {stride} at offset {offset}"
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if numel else offset - 1
    if last >= held:
        return f"{where} does not fit its storage {_show(key)} of {held} elements (reaches element {last})"
    if numel > held:  # an expanded (stride-0) view: the copy any user makes is memory the file lacks
        return f"{where} has more elements than its storage {_show(key)} holds ({held})"
    return None


def _storage_problem(archive, prefix, s):
    entry = f"{prefix}data/{s.key}"
    try:
        info = archive.getinfo(entry)
    except KeyError:
        return f"storage {_show(s.key)} ({s.numel} x {s.type.name}) is missing from the archive ({entry})"
    want = s.numel * s.type.itemsize
    if info.file_size != want:
        return (f"storage {_show(s.key)} declares {s.numel} elements ({want} bytes) but its zip entry "
                f"{entry} holds {info.file_size} bytes")
    return None


def _read_storage(path, archive, prefix, s):
    want = s.numel * s.type.itemsize
    with archive.open(f"{prefix}data/{s.key}") as f:
        raw = f.read(want)  # bounded: never inflate more than the storage declares
    if len(raw) != want:
        _fail(path, [f"storage {_show(s.key)}: read {len(raw)} of its {want} bytes (truncated archive?)"])
    if s.type.dtype == "bfloat16" and BF16_NP is not None:
        return np.frombuffer(raw, dtype=BF16_NP)  # little-endian, as the archive stores it
    if s.type.dtype == "bfloat16":  # no ml_dtypes: widen to float32 (bf16 is float32's top half)
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, dtype=np.dtype(s.type.dtype).newbyteorder("<"))


def _view(t, storage):
    strides = tuple(s * storage.itemsize for s in t.stride)
    return np.lib.stride_tricks.as_strided(storage[t.offset:], shape=t.size, strides=strides,
                                           writeable=False)


def load_torch_bin(path):
    """{name: ndarray} from a torch.save'd state dict (zip format, torch >= 1.6). The arrays
    are read-only views of their storages. Raises CheckpointError naming the file and every
    malformed tensor or storage (FileNotFoundError if there is no file)."""
    return _open(path, flat=True)


def load_torch_tree(path):
    """What torch.save wrote, when it is a nesting of dicts, lists and tuples of tensors and
    plain values (str, int, float, bool, None): a training checkpoint such as
    `{"model": state_dict, "optimizer": opt.state_dict(), "iter_num": 7, ...}`. Tensors come
    back as read-only ndarrays; the same checks as load_torch_bin apply to every one."""
    return _open(path, flat=False)


def _open(path, flat):
    with open(path, "rb") as file:
        try:
            if not zipfile.is_zipfile(file):  # (which raises BadZipFile for some damaged ones)
                _fail(path, ["not a zip-format torch checkpoint (legacy torch.save files from "
                             "before torch 1.6 are not supported; re-save as safetensors)"])
            with zipfile.ZipFile(file) as archive:
                return _load(path, archive, flat)
        except CheckpointError:
            raise
        except _ZIP_ERRORS as e:  # the archive itself is damaged
            _fail(path, [f"the zip archive is damaged ({type(e).__name__}: {_clip(str(e))})"])


def _load(path, archive, flat=True):
    pkl = [n for n in archive.namelist() if n.endswith("data.pkl")]
    if len(pkl) != 1:
        _fail(path, [f"expected one data.pkl in the archive, found {len(pkl)}"])
    prefix = pkl[0][:-len("data.pkl")]
    info = archive.getinfo(pkl[0])
    if info.file_size > _MAX_PICKLE:
        _fail(path, [f"{pkl[0]} holds {info.file_size} bytes, more than the {_MAX_PICKLE} a "
                     "state dict's pickle can need"])
    with archive.open(info) as f:
        data = f.read(_MAX_PICKLE + 1)  # bounded whatever the entry's header says
    problem = scan(data)  # before unpickling anything: what could crash or hang the unpickler
    if problem is not None:
        _fail(path, [f"{pkl[0]} cannot be unpickled safely ({problem})"])
    unpickler = _Unpickler(io.BytesIO(data))
    try:
        state = unpickler.load()
    except Exception as e:  # noqa: BLE001 -- only the unpickler and our find_class run here:
        # whatever they raise is the file's doing
        _fail(path, [f"{pkl[0]} cannot be unpickled ({type(e).__name__}: {_clip(str(e))})"])
    problems = list(unpickler.problems)
    if flat:
        if not isinstance(state, dict):
            _fail(path, [f"the checkpoint holds a {type(state).__name__}, not a state dict"])
        tensors = []
        for name, t in state.items():
            if not isinstance(name, str):
                problems.append(f"a key {_show(name)} is a {type(name).__name__}, not a tensor name")
            elif not isinstance(t, _Tensor):
                problems.append(f"{_show(name)} is a {type(t).__name__}, not a tensor")
            else:
                tensors.append((name, t))
    else:
        tensors = []
        _leaves(state, "", tensors, problems)
    problems += [p for name, t in tensors if (p := _tensor_problem(name, t)) is not None]
    used = {t.storage.key: t.storage for _, t in tensors if isinstance(t.storage, _Storage)}
    problems += [p for s in used.values() if (p := _storage_problem(archive, prefix, s))]
    if problems:
        _fail(path, problems)
    storages = {key: _read_storage(path, archive, prefix, s) for key, s in used.items()}
    if flat:
        return {name: _view(t, storages[t.storage.key]) for name, t in tensors}
    return _rebuild(state, storages)


_PLAIN = (str, bytes, int, float, bool, type(None))


def _leaves(obj, where, tensors, problems):
    """Collect the tensors of a checkpoint tree as (dotted path, _Tensor); anything that is
    not a container of tensors and plain values is a problem (the unpickler already refused
    every class but these, so this only meets what pickle builds natively: sets, complex...)."""
    if isinstance(obj, _Tensor):
        tensors.append((where or "<root>", obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool, type(None), tuple)):
                problems.append(f"{where or '<root>'}: a key {_show(k)} is a {type(k).__name__}")
            _leaves(v, f"{where}.{k}" if where else str(k), tensors, problems)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _leaves(v, f"{where}.{i}" if where else str(i), tensors, problems)
    elif not isinstance(obj, _PLAIN):
        problems.append(f"{where or '<root>'} is a {type(obj).__name__}, not a tensor, a "
                        "container or a plain value")


def _rebuild(obj, storages):
    return map_tree(obj, lambda x: isinstance(x, _Tensor), lambda t: _view(t, storages[t.storage.key]))


def _clip(text, n=200):
    return text if len(text) <= n else text[:n - 3] + "..."


def _fail(path, problems):
    lines = "\n".join(f"  - {p}" for p in problems)
    raise CheckpointError(f"load_torch_bin: {path} is not a valid torch checkpoint "
                          f"({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n{lines}")
