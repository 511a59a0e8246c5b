"""VGG-16 and VGG-19 (configurations D and E, no BatchNorm). VGG-16: 138,357,544 parameters."""

from typing import List, Union

import torch
from torch import nn

from .common import fc_classifier, gaussian_init

_CONFIGS = {
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, depth: int, num_classes: int = 1000):
        super().__init__()
        layers: List[nn.Module] = []
        cin = 3
        item: Union[int, str]
        for item in _CONFIGS[depth]:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, int(item), 3, padding=1), nn.ReLU()]
                cin = int(item)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(7)  # identity at 224x224; lets tests use small inputs
        self.classifier = fc_classifier(512 * 7 * 7, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)))


def vgg16(seed: int = 0) -> nn.Module:
    model = VGG(16)
    gaussian_init(model, seed)
    return model


def vgg19(seed: int = 0) -> nn.Module:
    model = VGG(19)
    gaussian_init(model, seed)
    return model
