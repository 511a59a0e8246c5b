"""Layers the seed networks share, and the Gaussian initialisation of their weights."""

import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

_NO_CPU_KERNEL = (torch.float16, torch.bfloat16)


class CaffeLRN(nn.Module):
    """Caffe's cross-channel LRN: x / (k + alpha/n * sum(x^2 over n channels))^beta.

    PyTorch's LocalResponseNorm computes the same thing but goes through avg_pool3d, which has
    no half-precision CPU kernel ("avg_pool3d_out_frame not implemented for 'Half'", and the
    same for 'BFloat16'). For fp16/bf16 tensors on the CPU we compute the normalisation in
    float32 and cast back: what a reduced-precision LRN should give, rounded once, not an error.
    """

    def __init__(self, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype in _NO_CPU_KERNEL and x.device.type == "cpu":
            out = F.local_response_norm(x.float(), self.size, self.alpha, self.beta, self.k)
            return out.to(x.dtype)
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"size={self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def fc_classifier(in_features: int, num_classes: int) -> nn.Sequential:
    """The AlexNet/VGG head: two 4096-wide ReLU layers with dropout, then the class layer."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, 4096),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(4096, 4096),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(4096, num_classes),
    )


def gaussian_init(model: nn.Module, seed: int = 0, residual_gain: Optional[float] = None) -> None:
    """Random Gaussian weights, as the TX1 whitepaper used (no trained weights are needed to
    measure speed and power, but the values must switch like real ones do).

    Conv/linear weights ~ N(0, 2/fan_in) (He): activations keep their scale through ReLU
    stacks, so nothing underflows to zero or overflows float16 in deep nets. Biases ~ N(0, 0.01^2).
    BatchNorm keeps identity statistics; `residual_gain` scales the last BN of each residual
    branch (marked with `_jetbench_residual_bn`) so 50 stacked blocks stay in float16 range.
    """
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                weight = module.weight
                fan_in = weight[0].numel()
                _normal_(weight, math.sqrt(2.0 / fan_in), gen)
                if module.bias is not None:
                    _normal_(module.bias, 0.01, gen)
            elif isinstance(module, nn.BatchNorm2d):
                gain = residual_gain if getattr(module, "_jetbench_residual_bn", False) else None
                module.weight.fill_(1.0 if gain is None else gain)
                module.bias.zero_()


def _normal_(tensor: torch.Tensor, std: float, gen: torch.Generator) -> None:
    if tensor.device.type == "meta":
        return  # shapes only: parameter and MAC counts never need values
    tensor.normal_(0.0, std, generator=gen)
