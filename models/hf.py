"""HuggingFace-format directories in and out, with no network access.

    model = models.from_hf("path/to/dir")   # config.json + model.safetensors | pytorch_model.bin
    model.save_hf("path/to/out")            # a directory transformers' from_pretrained loads
                                            # (models.save_hf(model, dir) is the same)

Each architecture registers how its HuggingFace parameter names map onto ours (`Family`),
and the shapes its model has for a given config, by config arithmetic alone. Loading checks
config.json (every field's type, then its sizes against the checkpoint's layer count and
tensor shapes) before the model is built, so a config cannot make it allocate more than the
weights hold, and reports every unknown, missing and mis-shaped tensor at once.
"""
import contextlib
import dataclasses
import json
import os

import numpy as np

from tinytensor import nn
import tinytensor as tt

from tinytensor.nn.checkpoint import _create_temp, _fsync_directory, _sweep  # nn.save's atomic write
from .hf_json import ConfigError, read_json  # noqa: F401 (ConfigError: models.hf.ConfigError)
from . import hf_shards
from tinytensor.nn.torch_pickle import load_torch_bin


class Family:
    """How one HF `model_type` maps to a tinytensor model class."""

    def __init__(self, model_type, architecture, build, to_ours, to_hf, *, config_class, shapes,
                 layers, divisible=(), ignore=(), configure=None, architecture_of=None):
        self.model_type = model_type
        self.architecture = architecture  # class name written into config.json
        # model -> that class name, where the model decides it (BERT: its head)
        self.architecture_of = architecture_of or (lambda model: architecture)
        self.build = build                # config dict -> model
        self.to_ours = to_ours            # (hf_name, array) -> (our_name, array) | None to drop
        self.to_hf = to_hf                # (our_name, array) -> (hf_name, array)
        self.config_class = config_class  # the dataclass; its annotations type config.json
        self.shapes = shapes              # (sizes, config dict) -> {our_name: shape}: the
                                          # model's state dict, by config arithmetic alone
        self.layers = layers              # ((layer-count field, our name prefix), ...)
        self.divisible = divisible        # ((field, by field), ...) e.g. n_embd by n_head
        self.ignore = ignore              # HF names that are buffers, not weights
        self.configure = configure        # (config, {hf_name: array}) -> config, before build:
                                          # settings the weights decide (T5: an untied lm_head)


FAMILIES = {}


def register(family):
    FAMILIES[family.model_type] = family


def linear(shapes, name, n_in, n_out, bias=True):
    """Add an nn.Linear's parameters to a Family.shapes map."""
    shapes[name + ".weight"] = (n_out, n_in)
    if bias:
        shapes[name + ".bias"] = (n_out,)


def norm(shapes, name, n, bias=True):
    """Add an nn.LayerNorm's (or, bias=False, an nn.RMSNorm's) parameters."""
    shapes[name + ".weight"] = (n,)
    if bias:
        shapes[name + ".bias"] = (n,)


class _Size(int):
    """A size computed from config.json that remembers the fields it came from ({name: value}),
    so that a shape the checkpoint contradicts can name them (3*n_embd names n_embd)."""

    def __new__(cls, value, fields):
        size = super().__new__(cls, value)
        size.fields = fields
        return size

    def __mul__(self, other):
        return _Size(int(self) * int(other), {**self.fields, **_fields(other)})

    def __add__(self, other):
        return _Size(int(self) + int(other), {**self.fields, **_fields(other)})

    __rmul__, __radd__ = __mul__, __add__


def _fields(x):
    return x.fields if isinstance(x, _Size) else {}


class _Sizes:
    """The config object with every integer field read as a _Size."""

    def __init__(self, cfg):
        self._cfg = cfg

    def __getattr__(self, name):
        value = getattr(self._cfg, name)
        return _Size(value, {name: value}) if type(value) is int else value


def expected_shapes(family, config):
    """{our_name: shape} the family's model would allocate for `config` (a dict), computed
    without allocating it."""
    shapes = family.shapes(_Sizes(family.config_class.from_dict(config)), config)
    return {k: tuple(int(n) for n in v) for k, v in shapes.items()}


def read_config(directory):
    config = read_json(os.path.join(directory, "config.json"), "from_hf")  # ConfigError if malformed
    if config is None:
        raise FileNotFoundError(f"from_hf: {directory} has no config.json")
    return config


def _json(value):
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field_problem(field, value):
    """What is wrong with config.json's value for a config dataclass field, or None."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    shown = f"{field.name}={_json(value)}"
    if field.name.endswith("_token_id"):  # HF writes null, an int, or (eos) a list of ints
        ok = value is None or is_int or (isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value))
        return None if ok else f"{shown} must be a token id (an integer, a list of them or null)"
    if value is None and field.default is None:
        return None
    if field.type is int:  # a size or a count: the model allocates by it
        return None if is_int and value > 0 else f"{shown} must be an integer > 0"
    if field.type is float and "drop" in field.name:  # a probability: Dropout refuses others
        ok = (is_int or isinstance(value, float)) and 0 <= value <= 1
        return None if ok else f"{shown} must be a probability (a number in [0, 1])"
    if field.type is float:
        return None if is_int or isinstance(value, float) else f"{shown} must be a number"
    if field.type is bool:
        return None if isinstance(value, bool) else f"{shown} must be true or false"
    if field.type is str:
        return None if isinstance(value, str) else f"{shown} must be a string"
    if field.type is dict:
        return None if isinstance(value, dict) else f"{shown} must be an object"
    return None


def check_config(config, family, path):
    """The family's config dataclass for `config`, after checking the type of every field
    config.json sets and the divisibility the model needs. Raises ConfigError naming `path`."""
    problems = [p for f in dataclasses.fields(family.config_class) if f.name in config
                if (p := _field_problem(f, config[f.name])) is not None]
    archs = config.get("architectures")
    if not (archs is None or isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        problems.append(f"architectures={_json(archs)} must be a list of class names")
    if problems:
        raise ConfigError(f"from_hf: {path}: " + "; ".join(problems))
    try:
        cfg = family.config_class.from_dict(config)
    except ValueError as e:  # a field the config class checks itself (BERT's id2label keys)
        raise ConfigError(f"from_hf: {path}: {e}") from None
    problems = [f"{a}={getattr(cfg, a)} is not divisible by {b}={getattr(cfg, b)}"
                for a, b in family.divisible
                if getattr(cfg, a) is not None and getattr(cfg, b) is not None
                and getattr(cfg, a) % getattr(cfg, b)]
    if problems:
        raise ConfigError(f"from_hf: {path}: " + "; ".join(problems))
    return cfg


def _layer_count_problems(family, cfg, names, config_path, weights_path):
    # before listing the expected names: for n_layer=10**9 the list itself would not fit
    problems = []
    for field, prefix in family.layers:
        found = sorted({int(i) for i in (n[len(prefix):].split(".", 1)[0] for n in names
                                         if n.startswith(prefix)) if i.isdigit()})
        want = getattr(cfg, field)
        if want != len(found):
            span = f" ({prefix}{found[0]} .. {prefix}{found[-1]})" if found else ""
            problems.append(f"{config_path}: {field}={want} but {weights_path} holds "
                            f"{len(found)} layers{span}")
    return problems


def _shape_problem(name, want, got):
    # blame the fields behind the dimensions that differ (all of them if the ranks differ)
    differ = [n for n, g in zip(want, got) if int(n) != g] if len(want) == len(got) else want
    blamed = {k: v for n in differ for k, v in _fields(n).items()}
    blame = f" (config.json: {', '.join(f'{k}={v}' for k, v in blamed.items())})" if blamed else ""
    return (f"{name} expects {tuple(int(n) for n in want)} but the file has {tuple(got)}"
            + blame)


def weights_file(directory):
    """model.safetensors (preferred) or pytorch_model.bin in `directory`, else the index of a
    sharded checkpoint (model.safetensors.index.json, pytorch_model.bin.index.json)."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    index = hf_shards.index_file(directory)
    if index is not None:
        return index
    raise FileNotFoundError(f"from_hf: {directory} has none of model.safetensors, "
                            f"pytorch_model.bin, {', '.join(hf_shards.INDEXES)}")


def read_weights(directory):
    """{hf_name: ndarray} from model.safetensors (preferred) or pytorch_model.bin."""
    return _read_weights(weights_file(directory))


def _read_weights(path):
    if path.endswith(".index.json"):
        return hf_shards.read_sharded(path, _read_weights)
    if path.endswith(".safetensors"):
        return {k: v.numpy() for k, v in nn.load(path).items()}
    return load_torch_bin(path)


def from_hf(directory, device=None):
    """Build the tinytensor model for a HuggingFace directory and load its weights.

    The model comes back in eval mode (dropout off), as from transformers' from_pretrained;
    call `.train()` to fine-tune it. Nothing is allocated for the model before config.json
    has been checked: each field's type, then the sizes against the checkpoint's tensor names
    and shapes, so a config that asks for more than the weights hold is a ConfigError naming
    the field and the files (the weights themselves are read first: what the files hold).
    """
    config_path = os.path.join(directory, "config.json")
    config = read_config(directory)
    model_type = config.get("model_type")
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise ConfigError(f"from_hf: unknown architecture model_type={repr(model_type)[:60]} in "
                          f"{config_path}; supported: {', '.join(sorted(FAMILIES))}")
    cfg = check_config(config, family, config_path)
    weights_path = weights_file(directory)
    weights = _read_weights(weights_path)
    if family.configure is not None:
        config = family.configure(dict(config), weights)
        cfg = family.config_class.from_dict(config)
    state = {}
    unknown = []
    origin = {}  # our name -> the checkpoint's name, for error messages
    for name, arr in weights.items():
        if any(name.endswith(s) for s in family.ignore):
            continue
        mapped = family.to_ours(name, arr, config)
        if mapped is None:
            continue
        if mapped is False:
            unknown.append(name)
            continue
        ours, arr = mapped
        state[ours] = arr
        origin[ours] = name
    problems = _layer_count_problems(family, cfg, state, config_path, weights_path)
    if problems:
        raise ConfigError("from_hf: " + "; ".join(problems))
    own = family.shapes(_Sizes(cfg), config)
    unknown += [origin[k] for k in state if k not in own]  # mapped to a name the model lacks
    if unknown:
        problems.append("tensors in the checkpoint this model has no place for: " + ", ".join(unknown))
    missing = [k for k in own if k not in state]
    if missing:
        problems.append("missing from the checkpoint: " + ", ".join(missing))
    wrong = [_shape_problem(k, own[k], state[k].shape)
             for k in own if k in state and tuple(map(int, own[k])) != tuple(state[k].shape)]
    if wrong:
        problems.append("wrong shape: " + "; ".join(wrong))
    if problems:
        raise ConfigError(f"from_hf: {weights_path} does not fit {config_path} "
                          f"({model_type}): " + " | ".join(problems))
    try:
        model = family.build(config)
    except ValueError as e:  # a value the checks above let through, refused by a layer
        raise ConfigError(f"from_hf: {config_path}: {e}") from None
    if _floating_dtypes(state.values()) == {tt.dtypes.BF16_NP}:
        # keep the dtype the weights have (config's torch_dtype may say otherwise), as
        # from_pretrained(torch_dtype="auto"): a bfloat16 checkpoint is not widened
        model.to(tt.bfloat16)
    model.load_state_dict(state)  # copies one array at a time into the parameters
    model.eval()
    if device is not None:
        model.to(device)
    return model


def save_hf(model, directory, max_shard_size="5GB"):
    """Write config.json and model.safetensors that transformers' from_pretrained loads, for
    any model whose config.model_type from_hf knows. Each file is replaced atomically. Past
    `max_shard_size` (bytes, or "5GB", "500MB"; transformers' default) the weights go into
    shards model-0000i-of-0000n.safetensors with a model.safetensors.index.json."""
    limit = hf_shards.parse_size(max_shard_size)
    model_type = getattr(model.config, "model_type", None)
    family = FAMILIES.get(model_type)
    if family is None:
        raise ValueError(f"save_hf: {type(model).__name__} has model_type={model_type!r}, which "
                         f"has no HuggingFace layout; supported: {', '.join(sorted(FAMILIES))}")
    os.makedirs(directory, exist_ok=True)
    config = model.config.to_dict()
    config["model_type"] = family.model_type
    config["architectures"] = [family.architecture_of(model)]
    tensors = {}
    for name, t in model.state_dict().items():
        hf_name, arr = family.to_hf(name, t.numpy(), config)
        tensors[hf_name] = tt.tensor(np.ascontiguousarray(arr))
    if _floating_dtypes(t.data for t in tensors.values()) == {tt.dtypes.BF16_NP}:
        # what transformers writes for a bfloat16 model ("torch_dtype" before 4.56)
        config["dtype"] = config["torch_dtype"] = "bfloat16"
    _save_weights(tensors, directory, limit)
    write_json(config, os.path.join(directory, "config.json"))


def _save_weights(tensors, directory, limit):
    """One model.safetensors, or shards and their index; what an earlier save left in the
    other layout is removed, since from_hf prefers a single file to an index."""
    shards = hf_shards.plan([(k, t.data.nbytes) for k, t in tensors.items()], limit)
    index = os.path.join(directory, hf_shards.INDEXES[0])
    single = os.path.join(directory, "model.safetensors")
    try:  # the shards an earlier sharded save wrote (an unreadable index: none to remove)
        old = set(hf_shards.read_index(index).values()) if os.path.isfile(index) else set()
    except nn.CheckpointError:
        old = set()
    if len(shards) <= 1:
        nn.save(tensors, single)
        for path in old | ({index} if old or os.path.isfile(index) else set()):
            with contextlib.suppress(OSError):
                os.unlink(path)
        return
    wmap = {}
    for i, names in enumerate(shards):
        name = hf_shards.shard_name(i, len(shards))
        nn.save({k: tensors[k] for k in names}, os.path.join(directory, name))
        wmap.update(dict.fromkeys(names, name))
    total = sum(t.data.nbytes for t in tensors.values())
    write_json({"metadata": {"total_size": total}, "weight_map": wmap}, index)
    for path in (old - {os.path.join(directory, n) for n in set(wmap.values())}) | {single}:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _floating_dtypes(arrays):
    return {a.dtype for a in arrays if tt.dtypes.is_floating_np(a.dtype)}


def write_json(value, path):
    """As nn.save writes a file: into a temporary of its own (unique, locked) in the same
    directory, fsync'ed, renamed over `path`, then the directory fsync'ed; so exports running
    at once never share a temporary file, and a crash leaves the old file or the new one."""
    directory, base = os.path.split(path)
    _sweep(directory, base)
    tmp, fd = _create_temp(directory, base)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
            if os.name != "nt":  # rename while still holding the lock, so no sweep takes it
                os.replace(tmp, path)
        if os.name == "nt":  # Windows cannot rename an open file
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


class SaveHF:
    """Gives a model class `model.save_hf(directory)` (models.hf.save_hf)."""

    def save_hf(self, directory, max_shard_size="5GB"):
        """Write a directory transformers' from_pretrained loads: config.json + model.safetensors."""
        save_hf(self, directory, max_shard_size)
