"""tt.save / tt.load as torch.save / torch.load, for the checkpoints torch scripts write.

    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "model_args": model_args, "iter_num": iter_num}, "ckpt.pt")
    checkpoint = torch.load("ckpt.pt", map_location=device)

On disk: nn.save's format (safetensors, written atomically; nn/checkpoint.py): tensors as
raw little-endian data, the tree around them (dicts, lists, tuples, numbers, strings, None)
as JSON. It is chosen over torch's pickle-in-a-zip because reading it runs no code at all:
loading is safe whatever the file holds, the `weights_only=True` guarantee by construction.
The file keeps its `.pt` name if the script gives one; it is not a torch file (torch reads
it with the `safetensors` package, not torch.load).

Loading also reads files torch.save wrote (zip archives), through nn/torch_pickle.py's
restricted unpickler: tensors, storages and OrderedDict are the only classes it builds, so
a torch checkpoint of that shape loads and anything else is refused, naming the class. That
holds for `weights_only=False` too: tinytensor never unpickles arbitrary objects.
"""
import os

import numpy as np

import tinytensor as tt
from tinytensor.device import get_device

from . import checkpoint
from .torch_pickle import load_torch_tree

__all__ = ["save", "load"]

_ZIP_MAGIC = b"PK\x03\x04"


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write `obj` (state_dicts, nested dicts/lists/tuples of tensors and plain values) to
    the path `f`, atomically. torch's pickle arguments are accepted and have nothing to
    choose here (no pickle is written)."""
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"tt.save: f must be a file path (str or os.PathLike), got "
                        f"{type(f).__name__}; writing to file objects is not supported")
    if pickle_module is not None:
        raise ValueError("tt.save: pickle_module is not supported (checkpoints are "
                         "safetensors, not pickles)")
    checkpoint.save(obj, f)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Read a checkpoint written by tt.save (or nn.save, or any safetensors file) or by
    torch.save; tensors go to `map_location` (None: the CPU; a device or its name; a dict
    {saved location: device}, of which only the "cpu" entry applies, or any "cuda" one for
    a torch file saved from a GPU)."""
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"tt.load: f must be a file path (str or os.PathLike), got "
                        f"{type(f).__name__}")
    if pickle_module is not None or pickle_load_args:
        raise ValueError("tt.load: pickle_module and pickle load arguments are not supported "
                         "(files are read by a restricted reader, never by pickle.load)")
    device = _device(map_location)
    with open(f, "rb") as fh:
        head = fh.read(4)
    if head != _ZIP_MAGIC:
        return checkpoint.load(f, device)
    try:
        tree = load_torch_tree(f)
    except checkpoint.CheckpointError as e:  # say which call failed: the user called tt.load
        raise checkpoint.CheckpointError("tt.load: " + str(e).split(": ", 1)[1]) from None
    return _to_tensors(tree, device)


def _device(map_location):
    if map_location is None:
        return None
    if callable(map_location) and not isinstance(map_location, (str, tt.Device)):
        raise TypeError("tt.load: a callable map_location is not supported; pass a device, "
                        "its name, or a dict of them")
    if isinstance(map_location, dict):
        targets = {str(v) for v in map_location.values()}
        if len(targets) > 1:
            raise ValueError(f"tt.load: map_location {map_location} maps to several devices; "
                             "tinytensor places every tensor of a checkpoint on one")
        return get_device(targets.pop()) if targets else None
    return get_device(map_location)


def _to_tensors(obj, device):
    return checkpoint.map_tree(  # np.array: each tensor owns its memory
        obj, lambda x: isinstance(x, np.ndarray),
        lambda a: checkpoint._tensor(np.array(a), device or tt.device("cpu")))
