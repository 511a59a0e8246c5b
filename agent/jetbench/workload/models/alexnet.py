"""AlexNet and CaffeNet as BVLC deployed them: 227x227 input, LRN, grouped conv2/4/5.

bvlc_alexnet/deploy.prototxt: conv -> relu -> norm -> pool for the first two stages;
bvlc_reference_caffenet swaps the order (pool before norm). Both have 60,965,224 parameters.
"""

from typing import List

from torch import nn

from .common import CaffeLRN, fc_classifier, gaussian_init


def _features(pool_before_norm: bool) -> nn.Sequential:
    def stage(conv: nn.Conv2d) -> List[nn.Module]:
        norm = CaffeLRN(5, 1e-4, 0.75)
        pool = nn.MaxPool2d(3, 2, ceil_mode=True)  # Caffe rounds pooled sizes up
        tail = [pool, norm] if pool_before_norm else [norm, pool]
        return [conv, nn.ReLU()] + tail

    layers: List[nn.Module] = []
    layers += stage(nn.Conv2d(3, 96, 11, stride=4))
    layers += stage(nn.Conv2d(96, 256, 5, padding=2, groups=2))
    layers += [
        nn.Conv2d(256, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1, groups=2),
        nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1, groups=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, ceil_mode=True),
    ]
    return nn.Sequential(*layers)


class AlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, caffenet: bool = False):
        super().__init__()
        self.features = _features(pool_before_norm=caffenet)
        self.classifier = fc_classifier(256 * 6 * 6, num_classes)

    def forward(self, x):  # noqa: ANN001 - torch.Tensor in, logits out
        return self.classifier(self.features(x))


def alexnet(seed: int = 0) -> nn.Module:
    model = AlexNet()
    gaussian_init(model, seed)
    return model


def caffenet(seed: int = 0) -> nn.Module:
    model = AlexNet(caffenet=True)
    gaussian_init(model, seed)
    return model
