"""A small U-Net (Ronneberger et al. 2015) with GroupNorm and SiLU, the shape of a
diffusion model's denoiser without its time embedding: an encoder of conv blocks with 2x2
max pooling between them, a decoder that upsamples with a stride-2 transposed convolution
and concatenates the encoder's feature map of the same size (the skip), then a 1x1
convolution to the output channels.

    net = UNet(in_channels=3, out_channels=3, channels=(16, 32, 64), groups=8)
    y = net(x)     # x: (N, 3, H, W), H and W divisible by 2 ** (len(channels) - 1)
"""
import tinytensor as tt
from tinytensor import nn

__all__ = ["ConvBlock", "UNet"]


class ConvBlock(nn.Module):
    """(3x3 conv, GroupNorm, SiLU) twice."""

    def __init__(self, cin, cout, groups, dtype=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, dtype=dtype)
        self.norm1 = nn.GroupNorm(groups, cout, dtype=dtype)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, dtype=dtype)
        self.norm2 = nn.GroupNorm(groups, cout, dtype=dtype)
        self.act = nn.SiLU()

    def forward(self, x):
        x = self.act(self.norm1(self.conv1(x)))
        return self.act(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, channels=(16, 32, 64), groups=8, dtype=None):
        super().__init__()
        for c in channels:
            if c % groups:
                raise ValueError(f"UNet: every width in channels={tuple(channels)} must be divisible "
                                 f"by groups={groups} (GroupNorm), {c} is not")
        self.channels = tuple(channels)
        widths = (in_channels,) + self.channels
        self.down = nn.ModuleList([ConvBlock(a, b, groups, dtype) for a, b in zip(widths[:-1], widths[1:])])
        self.pool = nn.MaxPool2d(2)
        rev = self.channels[::-1]
        self.ups = nn.ModuleList([nn.ConvTranspose2d(hi, lo, 2, stride=2, dtype=dtype)
                                  for hi, lo in zip(rev[:-1], rev[1:])])
        self.up_blocks = nn.ModuleList([ConvBlock(2 * lo, lo, groups, dtype) for lo in rev[1:]])
        self.head = nn.Conv2d(self.channels[0], out_channels, 1, dtype=dtype)

    def forward(self, x):
        levels = len(self.channels) - 1
        if x.shape[-1] % 2 ** levels or x.shape[-2] % 2 ** levels:
            raise ValueError(f"UNet: input of shape {tuple(x.shape)}: height and width must be "
                             f"divisible by {2 ** levels} ({levels} poolings)")
        skips = []
        for k, block in enumerate(self.down):
            x = block(x if k == 0 else self.pool(x))
            skips.append(x)
        skips.pop()   # the deepest level is the bottleneck, not a skip
        for up, block in zip(self.ups, self.up_blocks):
            x = block(tt.cat([skips.pop(), up(x)], dim=1))
        return self.head(x)
