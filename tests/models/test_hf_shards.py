"""Sharded HuggingFace checkpoints: transformers' own sharded saves load (safetensors and
pytorch_model.bin), save_hf shards past max_shard_size and transformers loads that, and an
index that does not match its shards is an error naming the files."""
import json
import os

import numpy as np
import pytest

from tinytensor import models
from tinytensor import nn
import tinytensor as tt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CFG = dict(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=2)


def _ids():
    return np.random.default_rng(0).integers(0, 50, (2, 7))


def _logits_ours(directory):
    model = models.from_hf(directory).double()
    with tt.no_grad():
        return model(tt.tensor(_ids())).logits.numpy()


def _theirs():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**CFG)).eval()


@pytest.mark.parametrize("safe", [True, False])
def test_transformers_sharded_save_loads(tmp_path, safe):
    ref = _theirs()
    ref.save_pretrained(tmp_path, max_shard_size="20KB")
    index = "model.safetensors.index.json"
    if not safe:  # transformers 5 writes only safetensors: the same shards as torch.save'd .bin
        index = _as_torch_bins(tmp_path, ref)
    assert len(set(json.loads((tmp_path / index).read_text())["weight_map"].values())) > 1
    with torch.no_grad():
        want = ref.double()(torch.tensor(_ids())).logits.numpy()
    np.testing.assert_allclose(_logits_ours(str(tmp_path)), want, rtol=1e-9, atol=1e-9)


def _as_torch_bins(directory, ref):
    """Rewrite a sharded safetensors save as pytorch_model-0000i-of-0000n.bin shards."""
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    state = ref.state_dict()
    wmap = {}
    for shard in sorted(set(index["weight_map"].values())):
        names = [k for k, v in index["weight_map"].items() if v == shard]
        binary = shard.replace("model-", "pytorch_model-").replace(".safetensors", ".bin")
        torch.save({k: state[k].clone() for k in names}, directory / binary)
        wmap.update(dict.fromkeys(names, binary))
        os.unlink(directory / shard)
    os.unlink(directory / "model.safetensors.index.json")
    (directory / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": index["metadata"], "weight_map": wmap}))
    return "pytorch_model.bin.index.json"


def test_save_hf_shards_past_the_limit_and_both_libraries_load_it(tmp_path):
    tt.manual_seed(0)
    ours = models.GPT(**CFG)
    ours.save_hf(str(tmp_path), max_shard_size="30KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and not (tmp_path / "model.safetensors").exists()
    total = 0
    for s in shards:  # each shard at most the limit, unless one tensor alone is larger
        held = nn.load(str(tmp_path / s))
        size = sum(t.data.nbytes for t in held.values())
        assert size <= 30_000 or len(held) == 1, (s, size)
        total += size
    assert index["metadata"]["total_size"] == total
    back = models.from_hf(str(tmp_path))
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k].numpy(), v.numpy())
    ref = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval().double()
    with torch.no_grad():
        want = ref(torch.tensor(_ids())).logits.numpy()
    np.testing.assert_allclose(_logits_ours(str(tmp_path)), want, rtol=1e-9, atol=1e-9)
    # saved again below the limit: one file, and no stale index or shards for from_hf to prefer
    ours.save_hf(str(tmp_path))
    assert (tmp_path / "model.safetensors").exists()
    assert not (tmp_path / "model.safetensors.index.json").exists()
    assert not any((tmp_path / s).exists() for s in shards)


def _sharded(tmp_path):
    _theirs().save_pretrained(tmp_path, max_shard_size="20KB")
    path = tmp_path / "model.safetensors.index.json"
    return path, json.loads(path.read_text())


def test_an_index_naming_a_missing_shard_or_a_path_outside_is_refused(tmp_path):
    path, index = _sharded(tmp_path)
    name = next(iter(index["weight_map"]))
    for bad, words in (("gone.safetensors", "which is missing"),
                       ("../x.safetensors", "not a file name in the checkpoint's directory")):
        index["weight_map"][name] = bad
        path.write_text(json.dumps(index))
        with pytest.raises(nn.CheckpointError, match=words):
            models.from_hf(str(tmp_path))


def test_a_shard_that_holds_other_tensors_than_the_index_says_is_refused(tmp_path):
    path, index = _sharded(tmp_path)
    name = next(iter(index["weight_map"]))
    del index["weight_map"][name]
    path.write_text(json.dumps(index))
    with pytest.raises(nn.CheckpointError, match=rf"does not match the index .*{name}"):
        models.from_hf(str(tmp_path))


def test_max_shard_size_is_checked():
    with pytest.raises(ValueError, match="max_shard_size must be"):
        models.GPT(**CFG).save_hf("/nonexistent-never-written", max_shard_size="lots")
