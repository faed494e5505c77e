"""Checkpoints keep bfloat16: nn.save/nn.load bit for bit and readable by safetensors/torch,
from_hf of a bfloat16 GPT-2 (safetensors and pytorch_model.bin) gives a bfloat16 model whose
logits are torch's within bfloat16 tolerance, and save_hf writes BF16 back."""
import json

import numpy as np
import pytest
import torch

pytest.importorskip("ml_dtypes")
transformers = pytest.importorskip("transformers")

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor import models  # noqa: E402


def _bits(t):
    return t.view(torch.int16).numpy() if isinstance(t, torch.Tensor) else t.numpy().view(np.int16)


def test_save_load_round_trip_is_bitwise_and_torch_reads_bf16(tmp_path):
    x = torch.randn(5, 7).bfloat16()
    x[0, :3] = torch.tensor([float("inf"), float("nan"), -0.0])
    ours = tt.tensor(_bits(x).view(tt.bfloat16.np))  # the very bits, NaN payload included
    tree = {"w": ours, "nested": [ours[1:3], {"b": tt.ones(3, dtype=tt.bfloat16)}], "f": tt.ones(2)}
    nn.save(tree, tmp_path / "c.safetensors")
    back = nn.load(tmp_path / "c.safetensors")
    assert back["w"].dtype is tt.bfloat16 and back["nested"][1]["b"].dtype is tt.bfloat16
    assert back["f"].dtype is tt.float32
    np.testing.assert_array_equal(_bits(back["w"]), _bits(x))
    np.testing.assert_array_equal(_bits(back["nested"][0]), _bits(x[1:3]))
    from safetensors.torch import load_file
    theirs = load_file(str(tmp_path / "c.safetensors"))
    assert theirs["w"].dtype == torch.bfloat16
    np.testing.assert_array_equal(_bits(theirs["w"]), _bits(x))


def test_foreign_bf16_file_loads_as_bfloat16(tmp_path):
    from safetensors.torch import save_file
    x = torch.randn(3, 4).bfloat16()
    save_file({"w": x}, str(tmp_path / "t.safetensors"))
    w = nn.load(tmp_path / "t.safetensors")["w"]
    assert w.dtype is tt.bfloat16
    np.testing.assert_array_equal(_bits(w), _bits(x))


@pytest.fixture
def bf16_gpt2(tmp_path):
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=16,
                                  bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(cfg).to(torch.bfloat16).eval()
    return ref, tmp_path


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_from_hf_keeps_bfloat16_and_matches_torch(bf16_gpt2, fmt):
    ref, d = bf16_gpt2
    if fmt == "safetensors":
        ref.save_pretrained(str(d))
    else:
        ref.config.save_pretrained(str(d))
        torch.save(ref.state_dict(), d / "pytorch_model.bin")
    model = models.from_hf(str(d))
    assert {p.dtype for p in model.parameters()} == {tt.bfloat16}
    ids = np.array([[1, 5, 9, 2, 33, 7, 0, 12]])
    with tt.no_grad():
        ours = model(tt.tensor(ids)).logits
    with torch.no_grad():
        theirs = ref(torch.tensor(ids)).logits
    assert ours.dtype is tt.bfloat16 and theirs.dtype == torch.bfloat16
    # both round every layer's output to bfloat16, in different orders: a few ulps of |logit|
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=0.05, atol=0.05)


def test_save_hf_writes_bf16_that_transformers_loads(bf16_gpt2, tmp_path):
    ref, d = bf16_gpt2
    ref.save_pretrained(str(d / "in"))
    model = models.from_hf(str(d / "in"))
    model.save_hf(str(d / "out"))
    with open(d / "out" / "model.safetensors", "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    assert {e["dtype"] for k, e in header.items() if k != "__metadata__"} == {"BF16"}
    assert json.loads((d / "out" / "config.json").read_text())["dtype"] == "bfloat16"
    back = transformers.GPT2LMHeadModel.from_pretrained(str(d / "out"), dtype="auto")
    assert back.dtype == torch.bfloat16
    for (name, a), (_, b) in zip(sorted(back.state_dict().items()), sorted(ref.state_dict().items())):
        np.testing.assert_array_equal(_bits(a), _bits(b), err_msg=name)


def test_gpt_forward_backward_in_bf16_close_to_torch(bf16_gpt2):
    ref, d = bf16_gpt2
    ref.save_pretrained(str(d))
    model = models.from_hf(str(d)).train()
    ref.train()
    ids = np.array([[1, 5, 9, 2, 33, 7, 0, 12], [3, 3, 8, 60, 1, 2, 4, 5]])
    ours = model(tt.tensor(ids), labels=tt.tensor(ids))
    theirs = ref(torch.tensor(ids), labels=torch.tensor(ids))
    ours.loss.backward()
    theirs.loss.backward()
    assert ours.loss.dtype is tt.bfloat16
    assert abs(float(ours.loss) - float(theirs.loss)) < 0.05 * abs(float(theirs.loss))
    grads = dict(model.named_parameters())
    for name in ("wte.weight", "h.0.attn.c_attn.weight", "h.1.mlp.c_proj.weight"):
        g = grads[name].grad if name in grads else None
        want = ref.get_parameter("transformer." + name).grad
        assert g is not None and g.dtype is tt.bfloat16, name
        scale = float(want.float().abs().max())
        g = g.float().numpy()
        g = g if g.shape == tuple(want.shape) else g.T  # HF's Conv1D stores (in, out)
        np.testing.assert_allclose(g, want.float().numpy(),
                                   atol=0.05 * scale, rtol=0.1, err_msg=name)
