"""HuggingFace-format directories in and out, with no network access.

    model = models.from_hf("path/to/dir")   # config.json + model.safetensors | pytorch_model.bin
    model.save_hf("path/to/out")            # a directory transformers' from_pretrained loads

Each architecture registers how its HuggingFace parameter names map onto ours (`Family`).
Loading reports every unknown, missing and mis-shaped tensor at once.
"""
import json
import os

import numpy as np

import nn
import tinytensor as tt

from .torch_pickle import load_torch_bin


class Family:
    """How one HF `model_type` maps to a tinytensor model class."""

    def __init__(self, model_type, architecture, build, to_ours, to_hf, ignore=(), configure=None):
        self.model_type = model_type
        self.architecture = architecture  # class name written into config.json
        self.build = build                # config dict -> model
        self.to_ours = to_ours            # (hf_name, array) -> (our_name, array) | None to drop
        self.to_hf = to_hf                # (our_name, array) -> (hf_name, array)
        self.ignore = ignore              # HF names that are buffers, not weights
        self.configure = configure        # (config, {hf_name: array}) -> config, before build:
                                          # settings the weights decide (T5: an untied lm_head)


FAMILIES = {}


def register(family):
    FAMILIES[family.model_type] = family


def read_config(directory):
    path = os.path.join(directory, "config.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"from_hf: {directory} has no config.json") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"from_hf: {path} is not valid JSON ({e})") from None


def read_weights(directory):
    """{hf_name: ndarray} from model.safetensors (preferred) or pytorch_model.bin."""
    st = os.path.join(directory, "model.safetensors")
    if os.path.exists(st):
        return {k: v.numpy() for k, v in nn.load(st).items()}
    pt = os.path.join(directory, "pytorch_model.bin")
    if os.path.exists(pt):
        return load_torch_bin(pt)
    if any(n.endswith(".index.json") for n in os.listdir(directory)):
        raise NotImplementedError(f"from_hf: {directory} holds a sharded checkpoint; "
                                  "sharded loading is not supported yet")
    raise FileNotFoundError(f"from_hf: {directory} has neither model.safetensors nor pytorch_model.bin")


def from_hf(directory, device=None):
    """Build the tinytensor model for a HuggingFace directory and load its weights."""
    config = read_config(directory)
    model_type = config.get("model_type")
    family = FAMILIES.get(model_type)
    if family is None:
        raise ValueError(f"from_hf: unknown architecture model_type={model_type!r} in {directory}; "
                         f"supported: {', '.join(sorted(FAMILIES))}")
    weights = read_weights(directory)
    if family.configure is not None:
        config = family.configure(dict(config), weights)
    model = family.build(config)
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
        state[ours] = tt.tensor(np.ascontiguousarray(arr))
        origin[ours] = name
    own = model.state_dict()
    unknown += [origin[k] for k in state if k not in own]  # mapped to a name the model lacks
    problems = []
    if unknown:
        problems.append("tensors in the checkpoint this model has no place for: " + ", ".join(unknown))
    missing = [k for k in own if k not in state]
    if missing:
        problems.append("missing from the checkpoint: " + ", ".join(missing))
    wrong = [f"{k} expects {tuple(own[k].shape)} but the file has {tuple(state[k].shape)}"
             for k in own if k in state and tuple(own[k].shape) != tuple(state[k].shape)]
    if wrong:
        problems.append("wrong shape: " + "; ".join(wrong))
    if problems:
        raise ValueError(f"from_hf: {directory} ({model_type}) does not fit {type(model).__name__}: "
                         + " | ".join(problems))
    model.load_state_dict(state)
    if device is not None:
        model.to(device)
    return model


def save_hf(model, directory, family):
    """Write config.json and model.safetensors that transformers' from_pretrained loads."""
    os.makedirs(directory, exist_ok=True)
    config = model.config.to_dict()
    config["model_type"] = family.model_type
    config["architectures"] = [family.architecture]
    tensors = {}
    for name, t in model.state_dict().items():
        hf_name, arr = family.to_hf(name, t.numpy(), config)
        tensors[hf_name] = tt.tensor(np.ascontiguousarray(arr))
    nn.save(tensors, os.path.join(directory, "model.safetensors"))
    tmp = os.path.join(directory, ".config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=2)
    os.replace(tmp, os.path.join(directory, "config.json"))
