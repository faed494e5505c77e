"""What is fuzzed: for each target, how its seed files are made (real files, as torch,
nn.save and transformers-style directories write them), how one case mutates a seed and
feeds it to the reader, and the one error type the reader may raise."""
import io
import json
import os
import shutil
import zipfile

from . import mutate as m


# ------------------------------------------------------------------ pytorch_model.bin
def pickle_seeds(directory):
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    torch.save(net.state_dict(), os.path.join(directory, "module.bin"))  # OrderedDict + _metadata
    a = torch.arange(12.0).reshape(3, 4)
    torch.save({"a": a, "row": a[1], "t": a.t(), "ids": torch.arange(6).expand(2, -1),
                "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "scalar": a[2, 3],
                "empty": torch.zeros(0, 3), "half": torch.ones(2, dtype=torch.float16)},
               os.path.join(directory, "views.bin"))
    torch.save({"w": torch.ones(2, 2)}, os.path.join(directory, "p4.bin"), pickle_protocol=4)


def _rezip(original, pkl_name, pkl):
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, pkl if info.filename == pkl_name else src.read(info))
    return out.getvalue()


def pickle_case(rng, seeds, path):
    name = rng.choice(sorted(seeds))
    original = seeds[name]
    if rng.random() < 0.2:  # the zip archive itself
        data = m.mutate(rng, original, m.GENERIC)
    else:                   # the pickle inside it
        with zipfile.ZipFile(io.BytesIO(original)) as z:
            pkl_name = next(n for n in z.namelist() if n.endswith("data.pkl"))
            pkl = z.read(pkl_name)
        data = _rezip(original, pkl_name, m.mutate(rng, pkl, m.PICKLE))
    with open(path, "wb") as f:
        f.write(data)
    from tinytensor.nn.torch_pickle import load_torch_bin
    return lambda: load_torch_bin(path)


# ------------------------------------------------------------------ safetensors (nn.load)
def safetensors_seeds(directory):
    import numpy as np

    from tinytensor import nn
    import tinytensor as tt
    tt.manual_seed(0)
    nn.save({"w": tt.randn(3, 4), "b": tt.zeros(4), "ids": tt.tensor([1, 2, 3]),
             "mask": tt.tensor([True, False])}, os.path.join(directory, "flat.safetensors"))
    nn.save({"model": {"w": tt.randn(2, 2)}, "step": 7, "opt": {"state": {0: {"m": tt.ones(2)}},
             "groups": [{"lr": 0.1, "betas": (0.9, 0.999)}]}, "cfg": {"name": "x", "none": None},
             "arr": np.arange(3, dtype=np.int16)}, os.path.join(directory, "tree.safetensors"))
    try:
        from safetensors.numpy import save_file
    except ImportError:
        return
    save_file({"x": np.ones((2, 3), np.float32), "y": np.arange(4, dtype=np.int64)},
              os.path.join(directory, "other.safetensors"), metadata={"format": "np"})


def _split(data):
    n = int.from_bytes(data[:8], "little")
    return data[8:8 + n], data[8 + n:]


def safetensors_case(rng, seeds, path):
    original = seeds[rng.choice(sorted(seeds))]
    header, rest = _split(original)
    r = rng.random()
    if r < 0.25:      # the whole file
        data = m.mutate(rng, original, m.GENERIC)
    else:
        if r < 0.45 and b"tinytensor" in header:  # the stored tree, a JSON string in the header
            obj = json.loads(header)
            tree = obj["__metadata__"]["tinytensor"].encode()
            obj["__metadata__"]["tinytensor"] = m.mutate(rng, tree, m.JSON).decode("utf-8", "replace")
            header = json.dumps(obj).encode()
        else:
            header = m.mutate(rng, header, m.JSON)
        length = len(header) if rng.random() < 0.9 else int.from_bytes(original[:8], "little")
        data = length.to_bytes(8, "little") + header + rest
    with open(path, "wb") as f:
        f.write(data)
    from tinytensor import nn
    return lambda: nn.load(path)


# ------------------------------------------------------------------ HF-directory JSON
HF_FILES = {  # file -> what reads it
    "config.json": "from_hf",
    "tokenizer_config.json": "tokenizer",
    "special_tokens_map.json": "tokenizer",
    "tokenizer.json": "tokenizer",
    "modules.json": "pooling",
    "1_Pooling/config.json": "pooling",
    "sentence_bert_config.json": "pooling",
}


def hfjson_seeds(directory):
    from tests.models.text_fixtures import bert_dir, gpt2_dir
    gpt2_dir(os.path.join(directory, "gpt2"))
    bert = bert_dir(os.path.join(directory, "bert"))
    with open(os.path.join(bert, "special_tokens_map.json"), "w") as f:
        json.dump({"mask_token": {"content": "[MASK]", "lstrip": False}, "unk_token": "[UNK]"}, f)
    with open(os.path.join(bert, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 16, "do_lower_case": False}, f)


class HFDirectories:
    """Working copies of the seed directories; each case mutates one file and puts it back."""

    def __init__(self, seeds_dir, work):
        self.dirs = []
        for name in sorted(os.listdir(seeds_dir)):
            shutil.copytree(os.path.join(seeds_dir, name), os.path.join(work, name))
            self.dirs.append(os.path.join(work, name))
        self.restore = None

    def case(self, rng):
        if self.restore is not None:
            self.restore()
        d = rng.choice(self.dirs)
        names = [n for n in HF_FILES if os.path.exists(os.path.join(d, n))]
        name = rng.choice(names)
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            original = f.read()

        def restore():
            with open(path, "wb") as f:
                f.write(original)
        self.restore = restore
        with open(path, "wb") as f:
            f.write(m.mutate(rng, original, m.JSON))
        return _reader(HF_FILES[name], d)


def _reader(kind, d):
    from tinytensor import models
    from tinytensor.tools.lib import text
    if kind == "tokenizer":
        return lambda: models.Tokenizer.from_dir(d)
    if kind == "pooling":
        return lambda: text.pooling_config(d)
    return lambda: models.from_hf(d)


def own_errors(target):
    if target == "hfjson":
        from tinytensor.models.hf_json import ConfigError
        return (ConfigError,)
    from tinytensor import nn
    return (nn.CheckpointError,)
