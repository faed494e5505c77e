"""models.unet.UNet (GroupNorm, SiLU, skips) against a torch twin written here with the
same module names and weights, in float64: output and every parameter's gradient, in
train and eval mode (GroupNorm has no running statistics: the two must agree)."""
import numpy as np
import pytest
import torch
import torch.nn as tnn

import tinytensor as tt
from tinytensor.models.unet import UNet
from tests.against_torch import forward_backward_both


class TorchBlock(tnn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = tnn.GroupNorm(groups, cout)
        self.conv2 = tnn.Conv2d(cout, cout, 3, padding=1)
        self.norm2 = tnn.GroupNorm(groups, cout)
        self.act = tnn.SiLU()

    def forward(self, x):
        return self.act(self.norm2(self.conv2(self.act(self.norm1(self.conv1(x))))))


class TorchUNet(tnn.Module):
    def __init__(self, cin, cout, channels, groups):
        super().__init__()
        widths = (cin,) + channels
        self.down = tnn.ModuleList([TorchBlock(a, b, groups) for a, b in zip(widths[:-1], widths[1:])])
        self.pool = tnn.MaxPool2d(2)
        rev = channels[::-1]
        self.ups = tnn.ModuleList([tnn.ConvTranspose2d(h, lo, 2, stride=2) for h, lo in zip(rev[:-1], rev[1:])])
        self.up_blocks = tnn.ModuleList([TorchBlock(2 * lo, lo, groups) for lo in rev[1:]])
        self.head = tnn.Conv2d(channels[0], cout, 1)

    def forward(self, x):
        skips = []
        for k, block in enumerate(self.down):
            x = block(x if k == 0 else self.pool(x))
            skips.append(x)
        skips.pop()
        for up, block in zip(self.ups, self.up_blocks):
            x = block(torch.cat([skips.pop(), up(x)], 1))
        return self.head(x)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_unet_matches_torch(mode):
    torch.manual_seed(0)
    theirs = TorchUNet(3, 2, (8, 16, 32), 4).double()
    with torch.no_grad():
        for m in theirs.modules():
            if isinstance(m, tnn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    ours = UNet(3, 2, (8, 16, 32), groups=4, dtype=tt.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    getattr(ours, mode)(), getattr(theirs, mode)()
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((2, 3, 16, 16)), rng.standard_normal((2, 2, 16, 16))
    forward_backward_both(ours, theirs, x, g, out_tol=(1e-10, 1e-12), grad_tol=(1e-9, 1e-11))
    named = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        q = named[name].grad
        np.testing.assert_allclose(p.grad.numpy(), q.numpy(), rtol=1e-9, atol=1e-10 * float(q.abs().max()),
                                   err_msg=name)


def test_unet_refuses_sizes_the_poolings_cannot_halve():
    with pytest.raises(ValueError, match=r"UNet: input of shape \(1, 3, 12, 12\).*divisible by 8"):
        UNet(3, 3, (8, 8, 8, 8), groups=4)(tt.zeros(1, 3, 12, 12))
    with pytest.raises(ValueError, match="divisible by groups=4"):
        UNet(channels=(8, 6), groups=4)
