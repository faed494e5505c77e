"""Checkpoints: `nn.save(obj, path)` and `nn.load(path)` in the safetensors format.

`obj` is a model state_dict, an optimizer state_dict, or any nesting of dicts, lists and
tuples of them with plain values (step counters, a config dict, strings, numbers, None).
Tensors and NumPy arrays are stored as safetensors tensors; everything else is JSON.

The file (https://github.com/huggingface/safetensors, format described in its README):

    8 bytes      N, the header length, unsigned little-endian
    N bytes      the header: a JSON object, padded with spaces to a multiple of 8 bytes
                   {"__metadata__": {str: str},
                    "<tensor name>": {"dtype": "F32", "shape": [4, 16], "data_offsets": [b, e]},
                    ...}
    the rest     raw little-endian, C-order tensor data; tensor k occupies bytes [b, e) of it,
                 and the tensors tile it exactly, with no gaps or overlaps

Tensor names are the dotted path to each tensor in `obj` (`model.blocks.0.attn.weight`,
`optimizer.state.3.exp_avg`); a flat state_dict keeps its own keys, so a model's file
reads like any other safetensors weight file. The tree around the tensors goes into
`__metadata__["tinytensor"]` as JSON, with each tensor replaced by {"__tensor__": name}
(or {"__ndarray__": name} for a NumPy array), dicts with keys that are not all strings as
{"__dict__": [[key, value], ...]} and tuples as {"__tuple__": [...]}. A flat state_dict
also gets `"format": "pt"`, which HuggingFace loaders require of a weight file; its layout
is torch's. Tensors are written widest dtype first, so every tensor starts aligned.

Saving is atomic: the bytes go to a temporary file `.<name>.<pid>.<random>.tmp` in the
destination directory, which is flushed and fsync'ed, then renamed over `path` with
os.replace (atomic on POSIX and Windows), and the directory is fsync'ed so the rename
itself survives a power cut. A crash at any point leaves either the old file or the new
one, never a torn one. A process killed mid-save leaves its temporary file behind; the
next save of the same path deletes such files, never one that a live process is still
writing (see _sweep).

Loading checks the whole header (nesting depth, every field's type, dtypes known, shapes
valid, offsets in order and inside the file, sizes matching shapes, no gaps or overlaps;
a shape of more than 64 dimensions, or a size outside int64, is refused before any
arithmetic on it, and its byte count is a checked product)
and the stored tree (every marker well formed, every tensor it names present), and
reports every problem at once as a CheckpointError naming the file. Files without a
tinytensor tree (written by other tools) load as {name: Tensor}. Every safetensors
dtype loads as the tinytensor dtype of the same name (U8 as uint8, U64 as uint64, BF16 as
bfloat16, bit for bit; C64 as complex64). safetensors has no complex128: such a tensor is
stored as its float64 (..., 2) real view (torch's view_as_real), its tree entry
{"__complex128__": name} (an array's {"__complex128_ndarray__": name}) turning it back.
Without the ml_dtypes package tinytensor has no bfloat16 to load BF16
into, so it is widened to float32 then (exact: bfloat16 is float32's upper half).
"""
import json
import os
import re
import struct
import uuid

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

import numpy as np

import tinytensor as tt
from tinytensor.autograd import plain
from tinytensor.device import CPU, get_device, to_device_array
from tinytensor.dtypes import BF16_NP

__all__ = ["save", "load", "CheckpointError"]

_CODES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32,
          "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_, "C64": np.complex64}
if BF16_NP is not None:
    _CODES["BF16"] = BF16_NP
_BY_DTYPE = {np.dtype(v): k for k, v in _CODES.items()}
_ITEMSIZE = {k: np.dtype(v).itemsize for k, v in _CODES.items()}
_ITEMSIZE["BF16"] = 2
_MARKERS = ("__tensor__", "__ndarray__", "__dict__", "__tuple__", "__complex128__",
            "__complex128_ndarray__")
_COMPLEX128 = {"__complex128__": "__tensor__", "__complex128_ndarray__": "__ndarray__"}
_TREE_KEY = "tinytensor"
_MAX_HEADER = 100_000_000  # the safetensors limit; a bigger length means a broken file
_MAX_DEPTH = 127  # JSON nesting the safetensors library reads (serde_json stops at 128)
_MAX_DIMS = 64  # NumPy's and torch's limit on a tensor's dimensions
_INT64 = 1 << 63


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read; the message lists every problem found."""


# --------------------------------------------------------------------------- saving
def save(obj, path):
    """Write `obj` (state_dicts, nested containers, plain values) to `path`, atomically."""
    path = os.fspath(path)
    arrays = {}
    tree = _encode(obj, [], arrays)
    flat = isinstance(obj, dict) and obj and all(
        isinstance(k, str) and isinstance(v, tt.Tensor) for k, v in obj.items())
    tree = json.dumps(tree)
    if _depth(tree) > _MAX_DEPTH:
        raise _too_deep()
    metadata = {"format": "pt" if flat else "tinytensor", _TREE_KEY: tree}
    header, order = _header(arrays, metadata)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"nn.save: cannot write {path}: directory {directory} does not exist")
    _sweep(directory, os.path.basename(path))
    tmp, fd = _create_temp(directory, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(header)))
            f.write(header)
            for name in order:
                _write_array(f, arrays[name])
            f.flush()
            os.fsync(f.fileno())
            if fcntl is not None:  # rename while still holding the lock, so no sweep takes it
                os.replace(tmp, path)
        if fcntl is None:  # Windows cannot rename an open file
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _create_temp(directory, base):
    """Create the temporary file of a save to `base`, locked (see _sweep): (its path, fd)."""
    while True:
        tmp = os.path.join(directory, f".{base}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        if fcntl is None:
            return tmp, fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a filesystem without locks: no sweep can lock (and delete) it either
            return tmp, fd
        try:
            if os.path.samestat(os.fstat(fd), os.stat(tmp)):
                return tmp, fd
        except FileNotFoundError:
            pass
        os.close(fd)  # a sweep took the file in the instant before our lock: take a new name


def _sweep(directory, base):
    """Delete the temporary files that saves to `base` killed mid-write left behind.

    A writer holds an exclusive flock on its temporary file from creating it until the
    file has its final name, and the kernel drops the lock when the writer dies, however
    it dies; so a file whose lock we can take is one nobody is writing. The lock rather
    than the pid in the name (which is there for people): pids get reused, and a writer
    in another pid namespace (a container sharing the directory) would look dead. Windows
    has no flock, and os.kill(pid, 0) would terminate the process there, so it sweeps
    nothing.
    """
    if fcntl is None:
        return
    ours = re.compile(re.escape(f".{base}.") + r"\d+\.[0-9a-f]{12}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in filter(ours.fullmatch, names):
        stale = os.path.join(directory, name)
        try:
            fd = os.open(stale, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        except OSError:  # renamed or swept meanwhile, or not ours to touch
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(stale)  # under the lock: a writer that locks after us sees it gone
        except OSError:  # locked: its writer is alive
            pass
        finally:
            os.close(fd)


def _write_array(f, arr):
    if arr.size:
        f.write(memoryview(arr.reshape(-1).view(np.uint8)))


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows cannot open a directory; its rename is durable already
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _header(arrays, metadata):
    # widest dtype first: with the header padded to 8 bytes every tensor starts aligned
    order = sorted(arrays, key=lambda n: -arrays[n].dtype.itemsize)
    entries, offset = {"__metadata__": metadata}, 0
    for name in order:
        a = arrays[name]
        entries[name] = {"dtype": _BY_DTYPE[a.dtype], "shape": list(a.shape),
                         "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    header = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    header += b" " * (-len(header) % 8)
    return header, order


def _too_deep():
    return ValueError(f"nn.save: the object is nested more than {_MAX_DEPTH} levels deep (a list "
                      "or dict is one level, a tuple two, a dict with non-string keys three, a "
                      "tensor one), which nn.load refuses to read; flatten it")


def _encode(obj, where, arrays):
    if len(where) > _MAX_DEPTH:  # deeper than the file may nest, whatever it holds
        raise _too_deep()
    if isinstance(obj, tt.Tensor):
        arr, marker = to_device_array(obj.data, CPU), "__tensor__"
    elif isinstance(obj, np.ndarray):
        arr, marker = obj, "__ndarray__"
    else:
        arr = None
    if arr is not None:
        if arr.dtype == np.complex128:  # safetensors has no C128: the float64 (..., 2) view
            marker = "__complex128__" if marker == "__tensor__" else "__complex128_ndarray__"
            arr = np.ascontiguousarray(arr).reshape(-1).view(np.float64).reshape(arr.shape + (2,))
        return {marker: _add_array(arr, where, arrays)}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not any(k in _MARKERS for k in obj):
            return {k: _encode(v, where + [k], arrays) for k, v in obj.items()}
        items = []
        for k, v in obj.items():
            if not (k is None or isinstance(k, (bool, int, float, str))):
                raise TypeError(f"nn.save: dict key {plain(k)!r} at '{_dotted(where)}' is a "
                                f"{type(k).__name__}; keys must be str, int, float, bool or None")
            items.append([k, _encode(v, where + [str(k)], arrays)])
        return {"__dict__": items}
    if isinstance(obj, list):
        return [_encode(v, where + [str(i)], arrays) for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, where + [str(i)], arrays) for i, v in enumerate(obj)]}
    raise TypeError(f"nn.save: cannot store a {type(obj).__name__} at '{_dotted(where)}'; a "
                    "checkpoint holds tensors, arrays, dicts, lists, tuples, str, numbers and "
                    "None (turn a config object into a dict first)")


def map_tree(obj, is_leaf, fn):
    """obj with fn(x) for every x that is_leaf(x) inside its dicts (kept of their type, an
    OrderedDict stays one), lists and tuples; anything else stays as it is."""
    if is_leaf(obj):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, map_tree(v, is_leaf, fn)) for k, v in obj.items())
    if isinstance(obj, list):
        return [map_tree(v, is_leaf, fn) for v in obj]
    if isinstance(obj, tuple):
        return tuple(map_tree(v, is_leaf, fn) for v in obj)
    return obj


def _dotted(where):
    return ".".join(where) or "<top level>"


def _add_array(arr, where, arrays):
    dt = arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype
    if dt not in _BY_DTYPE:
        raise TypeError(f"nn.save: the array at '{_dotted(where)}' has dtype {arr.dtype}, which "
                        "safetensors cannot store")
    arr = arr.astype(np.dtype(dt).newbyteorder("<"), order="C", copy=False)  # keeps 0-d as 0-d
    base = _dotted(where) if where else "tensor"
    name, k = base, 1
    while name in arrays or name == "__metadata__":
        k += 1
        name = f"{base}#{k}"
    arrays[name] = arr
    return name


# --------------------------------------------------------------------------- loading
def load(path, device=None):
    """Read a file written by `save` (or any safetensors file); tensors go to `device`
    (default cpu). Raises CheckpointError listing every problem with the file."""
    path = os.fspath(path)
    dev = get_device(device) if device is not None else CPU
    size = os.path.getsize(path)
    buf = bytearray(size)
    with open(path, "rb") as f:
        got = f.readinto(buf)
    if got != size:
        _fail(path, [f"read {got} of {size} bytes (the file changed while reading?)"])
    header, data_start, problems = _parse_header(buf)
    if problems:
        _fail(path, problems)
    metadata = header.pop("__metadata__", None) or {}
    entries, problems = _check_entries(header, len(buf) - data_start)
    tree = None  # a plain safetensors file: every entry is a tensor
    if _TREE_KEY in metadata:
        tree = _parse_tree(metadata[_TREE_KEY], header, problems)
    arrays = {}
    for name, e in entries.items():  # views of buf, no copies; NumPy has its own shape limits
        try:
            arrays[name] = _array(buf, data_start, e)
        except ValueError as err:
            problems.append(f"tensor '{name}': shape {e['shape']} cannot be an array ({err})")
    if problems:
        _fail(path, problems)
    if tree is None:  # names to tensors, in file order
        return {name: _tensor(arrays[name], dev) for name in
                sorted(arrays, key=lambda n: entries[n]["data_offsets"][0])}
    return _decode(tree, arrays, dev)


def _fail(path, problems):
    lines = "\n".join(f"  - {p}" for p in problems)
    raise CheckpointError(f"nn.load: {path} is not a valid safetensors checkpoint "
                          f"({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n{lines}")


def _parse_header(buf):
    if len(buf) < 8:
        return None, 0, [f"the file has {len(buf)} bytes, fewer than the 8-byte header length "
                         "(empty or truncated file)"]
    n = struct.unpack_from("<Q", buf, 0)[0]
    if n > _MAX_HEADER or 8 + n > len(buf):
        return None, 0, [f"the header length says {n} bytes, but the file has {len(buf) - 8} "
                         "after the length field (truncated, or not a safetensors file)"]
    try:
        text = bytes(buf[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError:
        return None, 0, ["the header is not UTF-8 text (not a safetensors file?)"]
    depth = _depth(text)
    if depth > _MAX_DEPTH:
        return None, 0, [f"the header nests {depth} levels deep, at most {_MAX_DEPTH} are allowed "
                         "(not a safetensors file?)"]
    try:
        header = json.loads(text)
    except ValueError as e:
        return None, 0, [f"the header is not valid JSON ({e})"]
    if not isinstance(header, dict):
        return None, 0, [f"the header is a JSON {type(header).__name__}, not an object"]
    problems = []
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and
                                 all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())):
        problems.append("__metadata__ must map strings to strings")
    return header, 8 + n, problems


# a string runs to its closing quote or, unterminated, to the end: one pass, even on a
# hostile header full of escaped quotes
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*\\?(?:"|\Z)', re.DOTALL)
_NESTING_STEP = np.zeros(256, np.int8)
_NESTING_STEP[[ord("["), ord("{")]] = 1
_NESTING_STEP[[ord("]"), ord("}")]] = -1


def _depth(text):
    """How deeply the JSON `text` nests arrays and objects, counted without recursion:
    json.loads recurses once per level and would end a hostile file in RecursionError."""
    # surrogatepass: a JSON string may hold an escaped lone surrogate ("\udcff")
    code = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8", "surrogatepass"), np.uint8)
    return int(np.cumsum(_NESTING_STEP[code], dtype=np.int32).max(initial=0))


def _check_entries(header, data_len):
    """Validate every tensor entry; returns ({name: entry} of the good ones, problems)."""
    problems, good = [], {}
    for name, e in header.items():
        if not isinstance(e, dict):
            problems.append(f"tensor '{name}': entry is a {type(e).__name__}, not an object")
            continue
        bad = []
        dtype, shape, offs = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in _ITEMSIZE:
            bad.append(f"unknown dtype {dtype!r} (safetensors has {', '.join(sorted(_ITEMSIZE))})")
            dtype = None
        if isinstance(shape, list) and len(shape) > _MAX_DIMS:  # before touching its values
            bad.append(f"shape has {len(shape)} dimensions, more than the {_MAX_DIMS} a tensor "
                       "can have")
            shape = None
        elif not (isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool)
                                                  and 0 <= s < _INT64 for s in shape)):
            bad.append(f"shape {_short(shape)} is not a list of non-negative int64 integers")
            shape = None
        if not (isinstance(offs, list) and len(offs) == 2 and
                all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            bad.append(f"data_offsets {_short(offs)} is not a pair of integers")
            offs = None
        elif offs[0] < 0 or offs[1] > data_len:
            bad.append(f"data_offsets {_short(offs)} fall outside the {data_len} data bytes "
                       "(truncated file?)")
            offs = None
        elif offs[0] > offs[1]:
            bad.append(f"data_offsets {_short(offs)} are not in order (begin, end)")
            offs = None
        if shape is not None and offs is not None and dtype is not None:
            want = _nbytes(shape, _ITEMSIZE[dtype])
            if want is None:
                bad.append(f"shape {shape} holds more than 2**63 bytes")
            elif offs[1] - offs[0] != want:
                bad.append(f"{offs[1] - offs[0]} bytes stored, but dtype {dtype} and shape "
                           f"{shape} need {want}")
        if bad:
            problems.append(f"tensor '{name}': " + "; ".join(bad))
        else:
            good[name] = e
    if not problems:
        spans = sorted((e["data_offsets"][0], e["data_offsets"][1], n) for n, e in good.items())
        end = 0
        for b, e, n in spans:
            if b < end:
                problems.append(f"tensor '{n}': bytes [{b}, {e}) overlap the tensor before it")
            elif b > end:
                problems.append(f"tensor '{n}': a gap of {b - end} bytes before it")
            end = max(end, e)
        if end != data_len:
            problems.append(f"{data_len - end} bytes after the last tensor's data "
                            "(corrupted or concatenated file?)")
    return good, problems


def _nbytes(shape, itemsize):
    """The bytes of a tensor of `shape`, or None past int64: checked at each step, so a
    shape of many huge dimensions costs no more than one of few."""
    if 0 in shape:
        return 0
    n = itemsize
    for d in shape:
        n *= d
        if n >= _INT64:
            return None
    return n


def _short(value):
    """A header value for a message: clipped, and an integer too long to print (int->str
    refuses past 4,300 digits) shown by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, list):
        shown = ", ".join(_short(v) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        return f"[{shown}]"
    text = repr(value) if not isinstance(value, (dict, list)) else json.dumps(value)[:80]
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_tree(text, names, problems):
    """The stored tree, checked against the tensor `names` of the header (problems go to
    `problems`)."""
    depth = _depth(text)
    if depth > _MAX_DEPTH:
        problems.append(f"__metadata__['{_TREE_KEY}'] nests {depth} levels deep, at most "
                        f"{_MAX_DEPTH} are allowed")
        return None
    try:
        tree = json.loads(text)
    except ValueError as e:
        problems.append(f"__metadata__['{_TREE_KEY}'] is not valid JSON ({e})")
        return None
    _check_tree(tree, [], names, problems)
    return tree


def _check_tree(tree, where, names, problems):
    """Check `tree` exactly the way _decode reads it (one-key dicts with a marker key)."""
    if isinstance(tree, list):
        for i, v in enumerate(tree):
            _check_tree(v, where + [str(i)], names, problems)
        return
    if not isinstance(tree, dict):
        return
    at = f"the stored structure at '{_dotted(where)}'"
    k, v = next(iter(tree.items())) if len(tree) == 1 else (None, None)
    if k in ("__tensor__", "__ndarray__") or k in _COMPLEX128:
        if not isinstance(v, str):
            problems.append(f"{at}: {k} {v!r} is not a tensor name")
        elif v not in names:
            problems.append(f"{at} refers to tensor '{v}', which the header does not list")
        elif k in _COMPLEX128 and not (isinstance(names[v], dict) and names[v].get("dtype") == "F64"
                                       and isinstance(names[v].get("shape"), list)
                                       and names[v]["shape"][-1:] == [2]):
            problems.append(f"{at}: {k} tensor '{v}' is not a float64 (..., 2) array")
    elif k == "__tuple__":
        if isinstance(v, list):
            _check_tree(v, where, names, problems)
        else:
            problems.append(f"{at}: __tuple__ holds {v!r}, not a list")
    elif k == "__dict__":
        if not isinstance(v, list):
            problems.append(f"{at}: __dict__ holds {v!r}, not a list of [key, value] pairs")
            return
        for item in v:
            if not (isinstance(item, list) and len(item) == 2):
                problems.append(f"{at}: __dict__ item {item!r} is not a [key, value] pair")
            elif isinstance(item[0], (list, dict)):
                problems.append(f"{at}: __dict__ key {item[0]!r} is not a string, number, "
                                "bool or null")
            else:
                _check_tree(item[1], where + [str(item[0])], names, problems)
    else:
        for key, value in tree.items():
            _check_tree(value, where + [key], names, problems)


def _array(buf, data_start, e):
    b, end = e["data_offsets"]
    shape = tuple(e["shape"])
    if e["dtype"] == "BF16" and BF16_NP is None:  # no ml_dtypes: widen to float32 (exact)
        bits = np.frombuffer(buf, dtype="<u2", count=(end - b) // 2, offset=data_start + b)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)
    dt = np.dtype(_CODES[e["dtype"]]).newbyteorder("<")
    arr = np.frombuffer(buf, dtype=dt, count=(end - b) // dt.itemsize, offset=data_start + b)
    if not dt.isnative or (data_start + b) % dt.itemsize:
        arr = arr.astype(dt.newbyteorder("="))  # misaligned (other writers) or big-endian host
    return arr.reshape(shape)


def _tensor(arr, dev):
    return tt.tensor(arr, device=dev)


def _decode(tree, arrays, dev):
    if isinstance(tree, list):
        return [_decode(v, arrays, dev) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if len(tree) == 1:
        (k, v), = tree.items()
        if k == "__tensor__":
            return _tensor(arrays[v], dev)
        if k == "__ndarray__":
            return arrays[v]
        if k in _COMPLEX128:   # checked F64 (..., 2) by _check_tree
            a = np.ascontiguousarray(arrays[v]).view(np.complex128)[..., 0]
            return a if k == "__complex128_ndarray__" else _tensor(a, dev)
        if k == "__tuple__":
            return tuple(_decode(x, arrays, dev) for x in v)
        if k == "__dict__":
            return {key: _decode(val, arrays, dev) for key, val in v}
    return {k: _decode(v, arrays, dev) for k, v in tree.items()}
