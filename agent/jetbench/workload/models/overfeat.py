"""OverFeat, the fast model (Sermanet et al. 2013, "OverFeat: Integrated Recognition,
Localization and Detection using Convolutional Networks", Table 1).

231x231 input; conv1 96 11x11 stride 4 + 2x2/2 max pool; conv2 256 5x5 + 2x2/2 pool;
conv3-5 512/1024/1024 3x3 with 1-pixel zero padding, 2x2/2 pool after conv5 (6x6x1024);
fc6 3072, fc7 4096 (dropout 0.5 on both, section 3.1), fc8 1000. No contrast normalisation,
non-overlapping pooling. 145,920,872 parameters, 2.80 GMACs per image.
"""

from torch import nn

from .common import gaussian_init


class OverFeatFast(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(), nn.MaxPool2d(2, 2),  # 231 -> 56 -> 28
            nn.Conv2d(96, 256, 5), nn.ReLU(), nn.MaxPool2d(2, 2),  # 28 -> 24 -> 12
            nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(),
            nn.Conv2d(512, 1024, 3, padding=1), nn.ReLU(),
            nn.Conv2d(1024, 1024, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),  # 12 -> 6
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(1024 * 6 * 6, 3072), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(3072, 4096), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):  # noqa: ANN001 - torch.Tensor in, logits out
        return self.classifier(self.features(x))


def overfeat(seed: int = 0) -> nn.Module:
    model = OverFeatFast()
    gaussian_init(model, seed)
    return model
