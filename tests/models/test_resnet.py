"""models.resnet.resnet18 against a torch ResNet-18 with the same weights, in float64: the
logits, the loss, every parameter's gradient and every running statistic after a training
step, then the logits and gradients in eval mode. The torch twin (tools/lib/torch_resnet.py,
shared with `bench.py conv --resnet`) is written layer for layer as torchvision's
(torchvision is not a dependency), so the state dict it loads from has torchvision's key
names."""
import numpy as np
import pytest
import torch
import torch.nn as tnn

import tinytensor as tt
from tinytensor.models.resnet import resnet18
from tinytensor.tools.lib.torch_resnet import torch_resnet18
from tinytensor.tools.lib.training import classifier_step


@pytest.fixture(scope="module")
def twins():
    torch.manual_seed(0)
    theirs = torch_resnet18(10).double()
    with torch.no_grad():   # norms away from 1 and 0, so their parameters' gradients differ
        for m in theirs.modules():
            if isinstance(m, tnn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    ours = resnet18(num_classes=10, dtype=tt.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())   # torchvision's names, in order
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _step(ours, theirs, x, y):
    lo = ours(tt.tensor(x))
    lt = theirs(torch.tensor(x))
    np.testing.assert_allclose(lo.detach().numpy(), lt.detach().numpy(), rtol=1e-10, atol=1e-11)
    loss_o = tt.functional.cross_entropy(lo, tt.tensor(y))
    loss_t = torch.nn.functional.cross_entropy(lt, torch.tensor(y))
    loss_o.backward()
    loss_t.backward()
    named = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        q = named[name]
        # against the gradient's own scale: twenty batch norms' backward subtract means, so an
        # entry that cancels to ~1e-9 of its neighbours carries their rounding (a wrong
        # formula is off by the scale itself)
        scale = float(q.grad.abs().max())
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-9 * scale, err_msg=name)
        p.grad, q.grad = None, None
    theirs_state = theirs.state_dict()
    for k, v in ours.state_dict().items():   # running statistics and num_batches_tracked
        np.testing.assert_allclose(v.numpy(), theirs_state[k].numpy(), rtol=1e-10, atol=1e-12, err_msg=k)


def test_resnet18_matches_torch_in_training_then_eval(twins):
    ours, theirs = twins
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 32, 32))
    y = np.array([3, 7])
    ours.train(), theirs.train()
    _step(ours, theirs, x, y)
    assert ours.layer3[0].bn1.num_batches_tracked.item() == 1
    ours.eval(), theirs.eval()
    _step(ours, theirs, rng.standard_normal((1, 3, 32, 32)), np.array([5]))


@pytest.mark.slow   # ~20 s on 2 loaded cores: capture of a ResNet-18 step (the small-model proof is in tests/nn/test_normalization.py)
def test_compiled_resnet18_training_step_equals_eager_with_its_running_statistics():
    def make():
        tt.manual_seed(0)
        return resnet18(num_classes=10, dtype=tt.float64)

    from tinytensor import nn
    eager, comp = make(), make()
    opt_e = nn.optim.SGD(eager.parameters(), lr=0.01, momentum=0.9)
    opt_c = nn.optim.SGD(comp.parameters(), lr=0.01, momentum=0.9)

    step = classifier_step
    fast = tt.compile(step, backend="numpy")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = tt.tensor(rng.standard_normal((2, 3, 32, 32))), tt.tensor(rng.integers(0, 10, 2))
        assert fast(comp, opt_c, x, y).item() == step(eager, opt_e, x, y).item()
        for (k, a), b in zip(comp.state_dict().items(), eager.state_dict().values()):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert comp.layer4[1].bn2.num_batches_tracked.item() == 3
