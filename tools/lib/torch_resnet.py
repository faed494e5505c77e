"""A torch ResNet-18 laid out as torchvision's (the same module and state-dict names), for
the parity test (tests/models/test_resnet.py) and `bench.py conv --resnet`, so neither needs
torchvision. Imports torch lazily: tools that do not use it never load it."""


def torch_resnet18(num_classes=1000):
    import torch
    import torch.nn as tnn

    class BasicBlock(tnn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, width, 3, stride, 1, bias=False)
            self.bn1 = tnn.BatchNorm2d(width)
            self.relu = tnn.ReLU()
            self.conv2 = tnn.Conv2d(width, width, 3, 1, 1, bias=False)
            self.bn2 = tnn.BatchNorm2d(width)
            self.downsample = None
            if stride != 1 or cin != width:
                self.downsample = tnn.Sequential(tnn.Conv2d(cin, width, 1, stride, bias=False),
                                                 tnn.BatchNorm2d(width))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet18(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = tnn.BatchNorm2d(64)
            self.relu = tnn.ReLU()
            self.maxpool = tnn.MaxPool2d(3, 2, 1)
            cin, stages = 64, []
            for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                stages.append(tnn.Sequential(BasicBlock(cin, width, stride), BasicBlock(width, width, 1)))
                cin = width
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet18()
