"""ResNet (He et al. 2015) from tinytensor nn, laid out as torchvision's: the same module
names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc, ...), so a torchvision
state dict (`resnet18-*.pth`, read with models.torch_pickle or passed as torch tensors)
loads with `load_state_dict` unchanged.

    model = resnet18(num_classes=1000)
    logits = model(images)            # images: (N, 3, H, W)
"""
from tinytensor import nn

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50"]


def _conv3x3(cin, cout, stride=1, dtype=None):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False, dtype=dtype)


def _conv1x1(cin, cout, stride=1, dtype=None):
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False, dtype=dtype)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; the input added back (through `downsample`
    when the shape changes)."""
    expansion = 1

    def __init__(self, cin, width, stride=1, downsample=None, dtype=None):
        super().__init__()
        self.conv1 = _conv3x3(cin, width, stride, dtype)
        self.bn1 = nn.BatchNorm2d(width, dtype=dtype)
        self.relu = nn.ReLU()
        self.conv2 = _conv3x3(width, width, 1, dtype)
        self.bn2 = nn.BatchNorm2d(width, dtype=dtype)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 down to `width`, 3x3 (the stride, as torchvision v1.5), 1x1 up to 4 * width."""
    expansion = 4

    def __init__(self, cin, width, stride=1, downsample=None, dtype=None):
        super().__init__()
        self.conv1 = _conv1x1(cin, width, 1, dtype)
        self.bn1 = nn.BatchNorm2d(width, dtype=dtype)
        self.conv2 = _conv3x3(width, width, stride, dtype)
        self.bn2 = nn.BatchNorm2d(width, dtype=dtype)
        self.conv3 = _conv1x1(width, width * 4, 1, dtype)
        self.bn3 = nn.BatchNorm2d(width * 4, dtype=dtype)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Stem (7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool), four stages of `layers[i]`
    blocks at widths 64, 128, 256, 512 (stride 2 from the second), global average pool, fc.
    Initialization as torchvision: kaiming-normal (fan_out, relu) convolutions, norms at 1
    and 0; zero_init_residual zeroes each block's last norm weight."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, dtype=None):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False, dtype=dtype)
        self.bn1 = nn.BatchNorm2d(64, dtype=dtype)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(block, 64, layers[0], 1, dtype)
        self.layer2 = self._stage(block, 128, layers[1], 2, dtype)
        self.layer3 = self._stage(block, 256, layers[2], 2, dtype)
        self.layer4 = self._stage(block, 512, layers[3], 2, dtype)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes, dtype=dtype)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_residual:
            for m in self.modules():
                last = getattr(m, "bn3", None) if isinstance(m, Bottleneck) else \
                    getattr(m, "bn2", None) if isinstance(m, BasicBlock) else None
                if last is not None:
                    nn.init.zeros_(last.weight)

    def _stage(self, block, width, blocks, stride, dtype):
        downsample = None
        if stride != 1 or self.inplanes != width * block.expansion:
            downsample = nn.Sequential(_conv1x1(self.inplanes, width * block.expansion, stride, dtype),
                                       nn.BatchNorm2d(width * block.expansion, dtype=dtype))
        out = [block(self.inplanes, width, stride, downsample, dtype)]
        self.inplanes = width * block.expansion
        out += [block(self.inplanes, width, 1, None, dtype) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def resnet18(**kw):
    return ResNet(BasicBlock, [2, 2, 2, 2], **kw)


def resnet34(**kw):
    return ResNet(BasicBlock, [3, 4, 6, 3], **kw)


def resnet50(**kw):
    return ResNet(Bottleneck, [3, 4, 6, 3], **kw)
