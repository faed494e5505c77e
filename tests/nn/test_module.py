"""The module system: registration, traversal, modes, state_dict, hooks, containers, and
the module paths recorded on the tape."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import Module, ModuleDict, ModuleList, Parameter, Sequential


class Attn(Module):
    def __init__(self, d):
        super().__init__()
        self.q_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        return self.out_proj(self.q_proj(x).tanh())


class Block(Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = Attn(d)

    def forward(self, x):
        return x + self.attn(self.norm(x))


class Model(Module):
    def __init__(self, d=4, n=2):
        super().__init__()
        self.embed = nn.Embedding(10, d)
        self.blocks = ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 3)
        self.register_buffer("mask", tt.ones(2, 2))
        self.register_buffer("cache", tt.zeros(3), persistent=False)
        self.register_buffer("steps", tt.tensor([0]))
        self.temperature = 2.0  # a plain attribute

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(x) / self.temperature


PARAMS = ["embed.weight",
          "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.0.attn.q_proj.weight",
          "blocks.0.attn.q_proj.bias", "blocks.0.attn.out_proj.weight",
          "blocks.1.norm.weight", "blocks.1.norm.bias", "blocks.1.attn.q_proj.weight",
          "blocks.1.attn.q_proj.bias", "blocks.1.attn.out_proj.weight",
          "head.weight", "head.bias"]


def test_registration_and_traversal():
    m = Model()
    assert [n for n, _ in m.named_parameters()] == PARAMS
    assert all(isinstance(p, Parameter) and p.requires_grad for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["mask", "cache", "steps"]
    # own entries first, then children (as torch); the non-persistent buffer is left out
    assert list(m.state_dict()) == ["mask", "steps"] + PARAMS
    assert [n for n, _ in m.named_children()] == ["embed", "blocks", "head"]
    assert [n for n, _ in m.named_modules()][:6] == ["", "embed", "blocks", "blocks.0", "blocks.0.norm",
                                                     "blocks.0.attn"]
    assert len(list(m.modules())) == 1 + 1 + 1 + 2 * 5 + 1
    assert [n for n, _ in m.blocks[0].named_parameters(prefix="x")][0] == "x.norm.weight"
    assert [n for n, _ in m.named_parameters(recurse=False)] == []
    assert m.temperature == 2.0 and "temperature" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        m.nope


def test_registration_order_kept_on_reassignment_and_delete():
    m = Model()
    m.embed = nn.Embedding(10, 4)  # replacing a submodule keeps its place, as in torch
    assert [n for n, _ in m.named_children()] == ["embed", "blocks", "head"]
    m.head.weight = Parameter(tt.zeros(3, 4))
    assert [n for n, _ in m.head.named_parameters()] == ["weight", "bias"]
    del m.head
    assert [n for n, _ in m.named_children()] == ["embed", "blocks"]
    m.head = 3  # a plain value under the old name
    assert m.head == 3 and "head" not in dict(m.named_children())


def test_shared_parameters_are_listed_once():
    m = Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    m[1].weight = m[0].weight
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert m.num_parameters() == 9 + 3 + 3


def test_init_order_error():
    class Bad(Module):
        def __init__(self):
            self.w = Parameter(tt.ones(1))
    with pytest.raises(RuntimeError, match="super\\(\\).__init__\\(\\)"):
        Bad()


def test_train_eval_propagate():
    m = Model()
    assert m.training and all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.blocks.train()
    assert m.blocks[1].attn.q_proj.training and not m.training and not m.head.training


def test_zero_grad_requires_grad_num_parameters():
    m = Model()
    m(tt.tensor([[1, 2, 3]])).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not np.any(p.grad.numpy()) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    n = 10 * 4 + 2 * (4 + 4 + 16 + 4 + 16) + 12 + 3
    assert m.num_parameters() == n
    m.embed.requires_grad_(False)
    assert m.num_parameters(trainable_only=True) == n - 40 and m.num_parameters() == n
    assert m.requires_grad_() is m and all(p.requires_grad for p in m.parameters())


def test_apply_visits_children_first_then_self():
    m = Model()
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen[-1] == "Model" and seen[0] == "Embedding" and seen.count("Linear") == 5


def test_to_dtype_casts_floating_state_in_place():
    m = Model()
    w = m.head.weight
    m(tt.tensor([[1, 2]])).sum().backward()
    assert m.to(tt.float64) is m
    assert m.head.weight is w and w.dtype == tt.float64 and w.requires_grad and w.grad.dtype == tt.float64
    assert m.mask.dtype == tt.float64 and m.steps.dtype == tt.int64  # integer buffers stay
    assert m(tt.tensor([[1, 2]])).dtype == tt.float64
    m.float()
    assert all(p.dtype == tt.float32 for p in m.parameters())
    m.to(dtype=tt.float64)
    assert m.embed.weight.dtype == tt.float64


def test_repr_shows_structure_and_counts():
    m = Model()
    r = repr(m)
    assert f"# {m.num_parameters():,} params" in r.splitlines()[-1]
    assert "(q_proj): Linear(in_features=4, out_features=4, bias=True)  # 20 params" in r
    assert "(blocks): ModuleList(" in r and "(0): Block(" in r
    assert "Parameter containing" in repr(m.head.bias)


# --------------------------------------------------------------------------- state_dict
def test_state_dict_shares_memory_and_load_copies():
    m = Model()
    sd = m.state_dict()
    assert not sd["head.weight"].requires_grad
    with tt.no_grad():
        m.head.weight.data[0, 0] = 5.0
    assert sd["head.weight"].numpy()[0, 0] == 5.0
    src = {k: (v.numpy() + 1.0 if v.is_floating_point() else v.numpy() + 1) for k, v in sd.items()}
    m2 = Model()
    res = m2.load_state_dict(src)  # NumPy arrays are accepted too
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in m2.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), src[k])
    src["head.bias"][0] = 123.0  # no aliasing of the source
    assert m2.head.bias.detach().numpy()[0] != 123.0
    assert m2.head.bias.requires_grad and m2.head.bias.grad_fn is None


def test_load_state_dict_strict_reports_everything_together():
    m = Model()
    sd = dict(m.state_dict())
    del sd["head.bias"], sd["blocks.1.norm.weight"]
    sd["head.weight"] = tt.zeros(4, 4)
    sd["blocks.0.attn.q_proj.bias"] = tt.zeros(5)
    sd["extra"] = tt.zeros(1)
    with pytest.raises(RuntimeError) as e:
        Model().load_state_dict(sd)
    msg = str(e.value)
    for part in ["head.weight expects (3, 4) but got (4, 4)", "blocks.0.attn.q_proj.bias expects (4,) but got (5,)",
                 "missing: blocks.1.norm.weight, head.bias", "unexpected: extra"]:
        assert part in msg, msg


def test_load_state_dict_non_strict_returns_keys():
    m = Model()
    sd = dict(m.state_dict())
    del sd["head.bias"]
    sd["extra"] = tt.zeros(1)
    before = Model()
    missing, unexpected = before.load_state_dict(sd, strict=False)
    assert missing == ["head.bias"] and unexpected == ["extra"]
    np.testing.assert_array_equal(before.head.weight.detach().numpy(), m.head.weight.detach().numpy())
    sd["head.weight"] = tt.zeros(1)
    with pytest.raises(RuntimeError, match="wrong shape"):  # a wrong shape is never ignored
        before.load_state_dict(sd, strict=False)


def test_state_dict_loads_into_torch_and_back():
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    m = Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(m(tt.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- hooks
def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda mod, args: calls.append(("pre", mod)) or (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: calls.append(("post", args[0].shape)) or out + 1)
    y = lin(tt.ones(3, 2))
    assert [c[0] for c in calls] == ["pre", "post"] and calls[0][1] is lin
    np.testing.assert_allclose(y.detach().numpy(), lin.bias.detach().numpy() + 1 + np.zeros((3, 2)), rtol=1e-6)
    h1.remove()
    h2.remove()
    h2.remove()  # removing twice is harmless
    np.testing.assert_allclose(lin(tt.ones(3, 2)).detach().numpy(),
                               (tt.ones(3, 2) @ lin.weight.T + lin.bias).detach().numpy())


def test_hook_returning_none_keeps_values_and_can_capture_activations():
    m = Model()
    seen = {}
    for name, mod in m.named_modules():
        if isinstance(mod, Attn):
            mod.register_forward_hook(lambda mod, args, out, name=name: seen.__setitem__(name, out.shape))
    m(tt.tensor([[1, 2, 3]]))
    assert seen == {"blocks.0.attn": (1, 3, 4), "blocks.1.attn": (1, 3, 4)}


# --------------------------------------------------------------------------- containers
def test_sequential():
    s = Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[1], nn.ReLU) and isinstance(s[-1], nn.Linear)
    assert [type(x).__name__ for x in s] == ["Linear", "ReLU", "Linear"]
    assert s(tt.ones(5, 2)).shape == (5, 1)
    named = Sequential({"fc": nn.Linear(2, 2), "act": nn.GELU()})
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]


def test_module_list_and_dict():
    ml = ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU()).extend([nn.Identity(), nn.Linear(1, 2)])
    assert len(ml) == 4 and isinstance(ml[-1], nn.Linear) and isinstance(ml[1:3], ModuleList)
    assert len(ml[1:3]) == 2
    assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias", "3.weight", "3.bias"]
    md = ModuleDict({"a": nn.Linear(1, 1)})
    md["b"] = nn.Linear(1, 2)
    assert list(md) == ["a", "b"] and "b" in md and len(md) == 2 and list(md.keys()) == ["a", "b"]
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert dict(md.items())["b"] is md["b"]


def test_module_without_forward():
    with pytest.raises(NotImplementedError, match="Module has no forward"):
        Module()(tt.ones(1))


# --------------------------------------------------------------------------- module paths
def test_ops_carry_module_paths_on_the_tape():
    m = Model()
    with tt.record() as tape:
        m(tt.tensor([[1, 2, 3]]))
    scopes = [n.scope for n in tape]
    for path in ["embed", "blocks.0.norm", "blocks.0.attn.q_proj", "blocks.0.attn", "blocks.1.attn.out_proj",
                 "head", ""]:
        assert path in scopes, (path, scopes)
    # the tanh inside Attn.forward itself is recorded under the attention module, not a layer
    assert any(n.name == "tanh" and n.scope == "blocks.0.attn" for n in tape)
    assert [n.scope for n in tape][-1] == ""  # the division in Model.forward
    assert m.head.weight.name == "head.weight"  # parameters learn their full names


def test_paths_of_a_submodule_called_on_its_own():
    m = Model()
    m(tt.tensor([[1]]))
    with tt.record() as tape:
        m.blocks[1](tt.ones(1, 4))
    assert "blocks.1.attn.q_proj" in {n.scope for n in tape}


def test_parameter_from_tensor_detaches():
    x = tt.ones(2, requires_grad=True) * 3
    p = Parameter(x)
    assert p.is_leaf and p.requires_grad and isinstance(p, tt.Tensor)
    assert not Parameter(tt.ones(2), requires_grad=False).requires_grad


def test_sequential_slice_is_a_callable_sequential_sharing_the_layers():
    seq = Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    head = seq[:2]
    assert isinstance(head, Sequential) and len(head) == 2 and head[0] is seq[0]
    x = tt.randn(5, 3)
    np.testing.assert_allclose(head(x).detach().numpy(), seq[1](seq[0](x)).detach().numpy())
    assert list(dict(head.named_parameters())) == ["0.weight", "0.bias"]


def test_calling_a_slice_does_not_rename_the_layers_it_shares():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    x = tt.randn(1, 3)
    model(x)
    head = model[:2]
    with tt.record() as tape:
        head(x)
    assert {n.scope for n in tape} >= {"0"}
    assert model[0].weight.name == "0.weight"
    with tt.record() as tape:
        model(x)
    assert [n.scope for n in tape if n.name == "matmul"] == ["0", "2"]


def test_evaluating_restores_each_submodules_own_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model[1].eval()  # the user froze this one
    with model.evaluating():
        assert not any(m.training for m in model.modules())
    assert model.training and model[0].training and not model[1].training


def test_a_forward_that_raises_leaves_the_module_scope_as_it_found_it():
    # Module.__call__ enters and leaves the scope by plain calls (no context manager): an
    # error inside must still restore the path, or every later op would be placed under it
    from tinytensor.autograd import STATE

    class Bad(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = nn.Sequential(nn.Linear(2, 2), Bad())
    with pytest.raises(ValueError, match="boom"):
        model(tt.randn(1, 2))
    assert STATE.scope_path == "" and STATE.scope == []
    with tt.record() as tape:
        model[0](tt.randn(1, 2))
    assert {n.scope for n in tape} == {"0"}
