"""ResNet-18/34/50/101/152 (He et al. 2015; stride on the 3x3 conv of bottlenecks, as in
torchvision's v1.5 and NVIDIA's deployment examples). ResNet-50: 25,557,032 parameters."""

from typing import List, Optional, Type, Union

import torch
from torch import nn

from .common import gaussian_init

# Gain of the last BN of each residual branch: keeps 50 stacked blocks inside float16 range
# with Gaussian weights (trained nets learn a similar damping).
_RESIDUAL_GAIN = 0.25


def _bn(channels: int, residual: bool = False) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)
    bn._jetbench_residual_bn = residual  # type: ignore[attr-defined]
    return bn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int, downsample: Optional[nn.Module]):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = _bn(width, residual=True)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int, downsample: Optional[nn.Module]):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = _bn(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = _bn(width * 4, residual=True)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


Block = Union[Type[BasicBlock], Type[Bottleneck]]


class ResNet(nn.Module):
    def __init__(self, block: Block, counts: List[int], num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), _bn(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        self.cin = 64
        self.layer1 = self._stage(block, 64, counts[0], 1)
        self.layer2 = self._stage(block, 128, counts[1], 2)
        self.layer3 = self._stage(block, 256, counts[2], 2)
        self.layer4 = self._stage(block, 512, counts[3], 2)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512 * block.expansion, num_classes)
        )

    def _stage(self, block: Block, width: int, count: int, stride: int) -> nn.Sequential:
        out = width * block.expansion
        downsample = None
        if stride != 1 or self.cin != out:
            downsample = nn.Sequential(nn.Conv2d(self.cin, out, 1, stride, bias=False), _bn(out))
        blocks: List[nn.Module] = [block(self.cin, width, stride, downsample)]
        self.cin = out
        blocks += [block(out, width, 1, None) for _ in range(1, count)]
        return nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.head(x)


_DEPTHS = {
    18: (BasicBlock, [2, 2, 2, 2]),
    34: (BasicBlock, [3, 4, 6, 3]),
    50: (Bottleneck, [3, 4, 6, 3]),
    101: (Bottleneck, [3, 4, 23, 3]),
    152: (Bottleneck, [3, 8, 36, 3]),
}


def resnet(depth: int, seed: int = 0) -> nn.Module:
    block, counts = _DEPTHS[depth]
    model = ResNet(block, counts)
    gaussian_init(model, seed, residual_gain=_RESIDUAL_GAIN)
    return model
