"""tt.save / tt.load as torch.save / torch.load for training checkpoints (issue 30)."""
import collections
import datetime

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor.nn import CheckpointError


def _torch_checkpoint():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2).double()
    o = torch.optim.AdamW(m.parameters(), lr=0.1, betas=(0.9, 0.95))
    m(torch.randn(4, 3, dtype=torch.float64)).pow(2).sum().backward()
    o.step()
    return m, o, {"model": m.state_dict(), "optimizer": o.state_dict(), "iter_num": 7,
                  "model_args": {"n_layer": 2, "bias": True, "name": "x"},
                  "best_val_loss": torch.tensor(1.25), "shape": (3, [4, None])}


def test_a_torch_saved_checkpoint_loads_and_resumes_as_torch(tmp_path):
    m, o, ck = _torch_checkpoint()
    torch.save(ck, tmp_path / "ckpt.pt")
    got = tt.load(tmp_path / "ckpt.pt", map_location="cpu", weights_only=True)
    assert isinstance(got["model"], collections.OrderedDict)
    assert (got["iter_num"], got["model_args"], got["shape"]) == (7, ck["model_args"], (3, [4, None]))
    assert got["best_val_loss"].dtype is tt.float32 and got["best_val_loss"].item() == 1.25
    ours = tt.nn.Linear(3, 2, dtype=tt.float64)
    ours.load_state_dict(got["model"])
    opt = tt.optim.AdamW(ours.parameters(), lr=0.5)
    opt.load_state_dict(got["optimizer"])
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["betas"] == (0.9, 0.95)
    x = np.linspace(-1, 1, 12).reshape(4, 3)
    o.zero_grad()
    ours(tt.tensor(x)).pow(2).sum().backward()
    m(torch.tensor(x)).pow(2).sum().backward()
    opt.step()
    o.step()
    for name, p in m.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).detach().numpy(), p.detach().numpy(),
                                   rtol=1e-14, atol=1e-16)


def test_save_load_round_trip_resumes_bitwise(tmp_path):
    def model():
        tt.manual_seed(3)
        return tt.nn.Linear(4, 3, dtype=tt.float64)

    def step(m, o, k):
        x = tt.tensor(np.cos(np.arange(8.0) + k).reshape(2, 4))
        m(x).pow(2).sum().backward()
        o.step()
        o.zero_grad(set_to_none=True)

    a = model()
    oa = tt.optim.AdamW(a.parameters(), lr=0.01)
    for k in range(4):
        step(a, oa, k)
    b = model()
    ob = tt.optim.AdamW(b.parameters(), lr=0.01)
    for k in range(2):
        step(b, ob, k)
    tt.save({"model": b.state_dict(), "optimizer": ob.state_dict(), "iter_num": 2}, tmp_path / "c.pt")
    ck = tt.load(tmp_path / "c.pt", map_location={"cuda:0": "cpu"})
    c = tt.nn.Linear(4, 3, dtype=tt.float64)
    c.load_state_dict(ck["model"])
    oc = tt.optim.AdamW(c.parameters(), lr=0.01)
    oc.load_state_dict(ck["optimizer"])
    for k in range(ck["iter_num"], 4):
        step(c, oc, k)
    for p, q in zip(a.parameters(), c.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert oc.state_dict()["state"][0]["step"] == 4


def test_unknown_group_keys_are_kept_as_torch_keeps_them():
    p, q = tt.nn.Parameter(tt.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    for opt in (tt.optim.AdamW([p]), torch.optim.AdamW([q])):
        sd = opt.state_dict()
        sd["param_groups"][0]["note"] = "kept"
        opt.load_state_dict(sd)
        assert opt.param_groups[0]["note"] == "kept"


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("payload", [Evil(), datetime.date(2020, 1, 1)])
def test_other_objects_in_a_torch_file_are_refused_not_run(tmp_path, capsys, payload, weights_only):
    torch.save({"model": {"w": torch.zeros(2)}, "extra": payload}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=r"(?s)tt.load: .*refusing to load (__builtin__\.print|datetime\.date)"):
        tt.load(tmp_path / "bad.pt", weights_only=weights_only)
    assert "pwned" not in capsys.readouterr().out


def test_save_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(TypeError, match="f must be a file path"):
        tt.save({"a": tt.zeros(1)}, open(tmp_path / "f", "wb"))
    with pytest.raises(TypeError, match="callable map_location"):
        tt.save({"a": tt.zeros(1)}, tmp_path / "ok.pt")
        tt.load(tmp_path / "ok.pt", map_location=lambda s, loc: s)
