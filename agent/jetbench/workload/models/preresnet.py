"""ResNet-200 with pre-activation residual units (He et al. 2016, "Identity Mappings in Deep
Residual Networks"): bottleneck units [3, 24, 36, 3], each BN-ReLU-conv1x1, BN-ReLU-conv3x3,
BN-ReLU-conv1x1 added to an untouched shortcut.

As the paper describes: the first unit follows conv1's own BN-ReLU (no second activation
there); where a stage changes width or stride the projection shortcut takes the pre-activated
input; after the last unit an extra BN-ReLU precedes the average pooling. The stride sits on
the 3x3 convolution, as in the other ResNets here. 64,666,152 parameters.
"""

from typing import List, Optional

import torch
from torch import nn

from .common import gaussian_init
from .resnet import _RESIDUAL_GAIN, _bn


class PreActBottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, preact: bool):
        super().__init__()
        out = width * 4
        # the unit's own pre-activation; None for the first unit (conv1's BN-ReLU precedes it)
        self.bn1: Optional[nn.Module] = _bn(cin) if preact else None
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn2 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        # the branch is linear after this BN: its gain damps the whole residual (see resnet.py)
        self.bn3 = _bn(width, residual=True)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.relu = nn.ReLU()
        self.shortcut: Optional[nn.Module] = None
        if stride != 1 or cin != out:
            self.shortcut = nn.Conv2d(cin, out, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = x if self.bn1 is None else self.relu(self.bn1(x))
        identity = x if self.shortcut is None else self.shortcut(act)
        out = self.conv1(act)
        out = self.conv2(self.relu(self.bn2(out)))
        out = self.conv3(self.relu(self.bn3(out)))
        return out + identity


class PreActResNet(nn.Module):
    def __init__(self, counts: List[int], num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), _bn(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        self.cin = 64
        self.layer1 = self._stage(64, counts[0], 1, first=True)
        self.layer2 = self._stage(128, counts[1], 2)
        self.layer3 = self._stage(256, counts[2], 2)
        self.layer4 = self._stage(512, counts[3], 2)
        self.head = nn.Sequential(
            _bn(2048), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(2048, num_classes),
        )

    def _stage(self, width: int, count: int, stride: int, first: bool = False) -> nn.Sequential:
        units: List[nn.Module] = [PreActBottleneck(self.cin, width, stride, preact=not first)]
        self.cin = width * 4
        units += [PreActBottleneck(self.cin, width, 1, preact=True) for _ in range(1, count)]
        return nn.Sequential(*units)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.head(x)


def resnet200(seed: int = 0) -> nn.Module:
    model = PreActResNet([3, 24, 36, 3])
    gaussian_init(model, seed, residual_gain=_RESIDUAL_GAIN)
    return model
