"""GoogLeNet (Inception-v1) as BVLC's deploy.prototxt: real 5x5 branches, LRN, no BatchNorm,
no auxiliary classifiers, pooling rounded up as Caffe does (ceil mode). 6,998,552 parameters.
"""

import torch
from torch import nn

from .common import CaffeLRN, gaussian_init


def _conv(cin: int, cout: int, k: int, stride: int = 1, pad: int = 0) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=pad), nn.ReLU())


class Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, proj: int):
        super().__init__()
        self.b1 = _conv(cin, c1, 1)
        self.b3 = nn.Sequential(_conv(cin, c3r, 1), _conv(c3r, c3, 3, pad=1))
        self.b5 = nn.Sequential(_conv(cin, c5r, 1), _conv(c5r, c5, 5, pad=2))
        self.pool = nn.Sequential(
            nn.MaxPool2d(3, 1, padding=1, ceil_mode=True), _conv(cin, proj, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.pool(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            _conv(3, 64, 7, stride=2, pad=3),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            CaffeLRN(5, 1e-4, 0.75),
            _conv(64, 64, 1),
            _conv(64, 192, 3, pad=1),
            CaffeLRN(5, 1e-4, 0.75),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        )
        self.inception3 = nn.Sequential(
            Inception(192, 64, 96, 128, 16, 32, 32),
            Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        )
        self.inception4 = nn.Sequential(
            Inception(480, 192, 96, 208, 16, 48, 64),
            Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64),
            Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        )
        self.inception5 = nn.Sequential(
            Inception(832, 256, 160, 320, 32, 128, 128),
            Inception(832, 384, 192, 384, 48, 128, 128),
        )
        # deploy.prototxt pools 7x7 at 224 input; adaptive gives the same there and lets
        # tests run on small inputs.
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(1024, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.inception5(self.inception4(self.inception3(x)))
        return self.head(x)


def googlenet(seed: int = 0) -> nn.Module:
    model = GoogLeNet()
    gaussian_init(model, seed)
    return model
