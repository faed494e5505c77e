"""Sharded HuggingFace checkpoints: `model.safetensors.index.json` (or
`pytorch_model.bin.index.json`) maps each tensor name to the shard file that holds it.

Reading checks the index against the shards: every file it names is a plain file name in
the directory, and each shard holds exactly the tensors the index gives it, so a stale or
hand-edited index is an error naming the file rather than a silently missing tensor.
Writing splits the tensors, in order, into shards of at most `max_shard_size` bytes (a
tensor larger than that gets a shard of its own), as transformers' save_pretrained does.
"""
import json
import os
import re

from tinytensor.nn.checkpoint import CheckpointError

INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
_UNITS = {"B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "KIB": 2 ** 10, "MIB": 2 ** 20,
          "GIB": 2 ** 30}


def index_file(directory):
    """The index of a sharded checkpoint in `directory`, or None."""
    for name in INDEXES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def read_index(path):
    """{tensor name: shard path} from an index file, every shard checked to be a file here."""
    directory = os.path.dirname(path)
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"from_hf: cannot read the shard index {path}: {e}") from None
    wmap = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in wmap.items()):
        raise CheckpointError(f"from_hf: {path} has no \"weight_map\" of tensor names to shard "
                              "files")
    out = {}
    for name, shard in wmap.items():
        if os.path.basename(shard) != shard or shard in ("", ".", ".."):
            raise CheckpointError(f"from_hf: {path} maps {name!r} to {shard!r}, which is not a "
                                  "file name in the checkpoint's directory")
        full = os.path.join(directory, shard)
        if not os.path.isfile(full):
            raise CheckpointError(f"from_hf: {path} maps {name!r} to {shard}, which is missing "
                                  f"from {directory}")
        out[name] = full
    return out


def read_sharded(path, read_one):
    """{name: array} from every shard of the index at `path`; `read_one(shard_path)` reads one."""
    wmap = read_index(path)
    weights = {}
    for shard in sorted(set(wmap.values())):
        held = read_one(shard)
        listed = {n for n, s in wmap.items() if s == shard}
        extra, missing = sorted(set(held) - listed), sorted(listed - set(held))
        if extra or missing:
            what = "; ".join(part for part in (
                f"it holds {', '.join(extra[:5])} which the index puts elsewhere or nowhere"
                if extra else "", f"it lacks {', '.join(missing[:5])}" if missing else "") if part)
            raise CheckpointError(f"from_hf: shard {shard} does not match the index {path}: "
                                  f"{what}")
        weights.update(held)
    return weights


def parse_size(size):
    """Bytes from an int or a string such as "5GB", "200MB", "10MiB" (transformers' units)."""
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]I?B|B)\s*", str(size).upper())
    if not m:
        raise ValueError(f"save_hf: max_shard_size must be a positive number of bytes or a "
                         f"string such as '5GB' or '500MB', got {size!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def plan(sizes, limit):
    """Split [(name, bytes)] in order into shards of at most `limit` bytes: [[name, ...]]."""
    shards, current, used = [], [], 0
    for name, n in sizes:
        if current and used + n > limit:
            shards.append(current)
            current, used = [], 0
        current.append(name)
        used += n
    if current:
        shards.append(current)
    return shards


def shard_name(i, n):
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"
