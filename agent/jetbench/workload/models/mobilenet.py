"""MobileNetV2 (Sandler et al. 2018), width 1.0: the modern edge network. 3,504,872 parameters."""

from typing import List

import torch
from torch import nn

from .common import gaussian_init

# expansion t, output channels c, repeats n, first stride s (table 2 of the paper)
_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
             (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _cbr(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> List[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(),
    ]


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: List[nn.Module] = _cbr(cin, hidden, 1) if expand != 1 else []
        layers += _cbr(hidden, hidden, 3, stride, groups=hidden)
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        return x + out if self.residual else out


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = _cbr(3, 32, 3, 2)
        cin = 32
        for t, c, n, s in _SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += _cbr(cin, 1280, 1)
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(1280, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def mobilenet_v2(seed: int = 0) -> nn.Module:
    model = MobileNetV2()
    gaussian_init(model, seed)
    return model
